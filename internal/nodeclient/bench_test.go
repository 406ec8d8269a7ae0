package nodeclient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
)

// BenchmarkPut measures a write through the client and a real node on
// loopback, fsyncs included.
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			n := nodetest.Start(b, nodetest.Options{})
			c := nodeclient.New(nodeclient.Options{})
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			sum := checksum(data)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, _, err := c.Put(ctx, n.URL, fmt.Sprintf("bench-%08d", i), sum, int64(size), bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet measures a read through the client and a real node on
// loopback.
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			n := nodetest.Start(b, nodetest.Options{})
			c := nodeclient.New(nodeclient.Options{})
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			ctx := context.Background()
			if _, _, err := c.Put(ctx, n.URL, "bench-blob", checksum(data), int64(size), bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 256<<10)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				obj, err := c.Get(ctx, n.URL, "bench-blob", nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, obj.Body, buf); err != nil {
					b.Fatal(err)
				}
				obj.Body.Close()
			}
		})
	}
}

// BenchmarkPutNoDisk measures what a small Put costs the client and the
// HTTP layers alone: the server takes the body and answers at once, so the
// time per operation is CPU, not the node's sync.
func BenchmarkPutNoDisk(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"bench","size":4096}`)
	}))
	defer srv.Close()
	c := nodeclient.New(nodeclient.Options{})
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<10/16)
	sum := checksum(data)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.Put(ctx, srv.URL, "bench", sum, int64(len(data)), bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutParallel measures 4 KiB writes from 32 concurrent callers
// through the client to a real node in the default layout: the shape of the
// cluster bench's small uploads as one node sees them, with the node's
// group commit sharing each fdatasync among the writes waiting for it. The
// cases send the writes in batches (the default) and one request each.
func BenchmarkPutParallel(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts nodeclient.Options
	}{
		{"batched", nodeclient.Options{}},
		{"batch-inflight-1", nodeclient.Options{BatchInflight: 1}},
		{"batch-inflight-2", nodeclient.Options{BatchInflight: 2}},
		{"one-per-request", nodeclient.Options{BatchMax: 1}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := nodetest.Start(b, nodetest.Options{})
			c := nodeclient.New(tc.opts)
			data := bytes.Repeat([]byte("0123456789abcdef"), 4<<10/16)
			sum := checksum(data)
			ctx := context.Background()
			var next atomic.Int64
			b.SetBytes(int64(len(data)))
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("bench-%08d", next.Add(1))
					if _, _, err := c.Put(ctx, n.URL, id, sum, int64(len(data)), bytes.NewReader(data)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
