package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/dfs-project/dfs/internal/byterange"
)

// BenchmarkUpload measures the coordinator's upload pipeline with in-memory
// nodes: spooling and hashing, the PENDING insert and the final update in
// the embedded store (fsync'd commits), and three copy writes. The nodes cost
// next to nothing, so this is the coordinator's own share of an upload. Run
// with -cpu to vary the concurrent uploads (RunParallel runs GOMAXPROCS×8).
func BenchmarkUpload(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		for _, where := range []struct {
			name string
			max  int64
		}{{"memory", 4 << 20}, {"spoolfile", 0}} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, where.name), func(b *testing.B) {
				ids := []string{"A", "B", "C"}
				nodes := newGateNodes(ids...)
				nodes.quiet = true
				s, _ := newService(b, nodes, ids, func(o *Options) {
					o.MaxFileSize = 1 << 30
					o.MemorySpoolMax, o.MemorySpoolLimit = where.max, 64*where.max
				})
				data := bytes.Repeat([]byte("u"), size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkDownload measures opening and reading a 4 KiB file whose copies
// are in memory: the metadata lookup, holder ordering and full verification.
func BenchmarkDownload(b *testing.B) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	s, _ := newService(b, nodes, ids, nil)
	data := bytes.Repeat([]byte("d"), 4<<10)
	var files []string
	for range 64 {
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, res.FileID)
	}
	s.opt.DownloadBuffer = 1 << 20
	var i atomic.Int64
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d, err := s.Open(context.Background(), files[i.Add(1)%int64(len(files))], byterange.Request{})
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := io.Copy(io.Discard, d.Body); err != nil {
				b.Error(err)
			}
			d.Body.Close()
		}
	})
}

// BenchmarkLargeUpload compares one 64 MiB stream with the same bytes sent
// as four session parts at once and completed, with in-memory nodes and
// 8 MiB chunks: the coordinator's own cost of each (the nodes cost next to
// nothing here). Profile with -cpuprofile to see where a session spends it.
func BenchmarkLargeUpload(b *testing.B) {
	const size, parts = 64 << 20, 4
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	setup := func(b *testing.B) *Service {
		ids := []string{"A", "B", "C"}
		nodes := newGateNodes(ids...)
		nodes.quiet = true
		s, _ := newService(b, nodes, ids, func(o *Options) {
			o.MaxFileSize = 1 << 30
			o.ChunkSize = DefaultChunkSize
		})
		b.SetBytes(size)
		b.ReportAllocs()
		return s
	}
	ctx := context.Background()
	b.Run("stream", func(b *testing.B) {
		s := setup(b)
		for b.Loop() {
			res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Delete(ctx, res.FileID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("4parts", func(b *testing.B) {
		s := setup(b)
		for b.Loop() {
			sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
			if err != nil {
				b.Fatal(err)
			}
			errc := make(chan error, parts)
			for i := range parts {
				part := data[i*size/parts : (i+1)*size/parts]
				go func() {
					_, err := s.PutPart(ctx, sess.ID, i+1, bytes.NewReader(part), int64(len(part)))
					errc <- err
				}()
			}
			for range parts {
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
			}
			rec, err := s.CompleteSession(ctx, sess.ID, nil, "")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Delete(ctx, rec.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLargeDownload reads one 64 MiB chunked file whole, with
// in-memory nodes and 8 MiB chunks, the way the REST handler sends it (a
// copy through a 256 KiB buffer to a writer): the coordinator's own cost
// of fetching, verifying and passing on the chunks.
func BenchmarkLargeDownload(b *testing.B) {
	const size = 64 << 20
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	s, _ := newService(b, nodes, ids, func(o *Options) {
		o.MaxFileSize = 1 << 30
		o.ChunkSize = DefaultChunkSize
	})
	ctx := context.Background()
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(bytes.Repeat([]byte("0123456789abcdef"), size/16))})
	if err != nil {
		b.Fatal(err)
	}
	benchReadWhole(b, s, res.FileID, size)
}
