package blob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkDiskReceive measures the whole write path: copy, hash, fsync of
// the blob and sidecar, renames and directory fsyncs.
func BenchmarkDiskReceive(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			d, err := OpenDisk(b.TempDir(), Options{})
			require.NoError(b, err)
			defer d.Close()
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			s := sum(data)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("%08x-bench", i)
				i++
				if _, _, err := d.Receive(ctx, id, s, int64(size), bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDiskFetch measures opening and reading a stored blob.
func BenchmarkDiskFetch(b *testing.B) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			d, err := OpenDisk(b.TempDir(), Options{})
			require.NoError(b, err)
			defer d.Close()
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			ctx := context.Background()
			_, _, err = d.Receive(ctx, testID, sum(data), int64(size), bytes.NewReader(data))
			require.NoError(b, err)
			buf := make([]byte, 256<<10)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				rc, _, err := d.Fetch(ctx, testID)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}

// BenchmarkDiskRehash measures re-hashing a stored blob.
func BenchmarkDiskRehash(b *testing.B) {
	d, err := OpenDisk(b.TempDir(), Options{})
	require.NoError(b, err)
	defer d.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16)
	ctx := context.Background()
	_, _, err = d.Receive(ctx, testID, sum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(b, err)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Rehash(ctx, testID); err != nil {
			b.Fatal(err)
		}
	}
}
