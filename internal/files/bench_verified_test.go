package files

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/dfs-project/dfs/internal/byterange"
)

// BenchmarkLargeDownloadVerified reads one 256 MiB file of 8 MiB chunks
// whole through the copy reader, from in-memory nodes that either say they
// checked their bytes by block sums (each chunk passes as it comes) or do
// not (the coordinator hashes each chunk against its SHA-256 as it passes):
// what the nodes' checking saves the coordinator.
func BenchmarkLargeDownloadVerified(b *testing.B) {
	const size = 256 << 20
	ids := []string{"A", "B", "C"}
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	for _, c := range []struct {
		name     string
		verified bool
	}{{"coordinator-hashes", false}, {"node-verified", true}} {
		b.Run(c.name, func(b *testing.B) {
			nodes := newBlockNodes(ids...)
			nodes.quiet = true
			s, _ := newService(b, nodes.gateNodes, ids, func(o *Options) {
				if c.verified {
					o.Nodes = nodes
				}
				o.MaxFileSize = 1 << 30
				o.ChunkSize = DefaultChunkSize
			})
			ctx := context.Background()
			res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
			if err != nil {
				b.Fatal(err)
			}
			benchReadWhole(b, s, res.FileID, size)
			if c.verified && len(nodes.asked) == 0 {
				b.Fatal("no chunk was read from the verifying nodes")
			}
		})
	}
}

// benchReadWhole times reads of file id whole, the way the REST handler
// sends it: a copy through a 256 KiB buffer to a writer.
func benchReadWhole(b *testing.B, s *Service, id string, size int64) {
	ctx := context.Background()
	buf := make([]byte, 256<<10)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		d, err := s.Open(ctx, id, byterange.Request{})
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, d.Body, buf)
		d.Body.Close()
		if err != nil || n != size {
			b.Fatalf("read %d of %d bytes: %v", n, size, err)
		}
	}
}
