package blob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchModes are the sync modes this system can run.
func benchModes(b *testing.B) []SyncMode {
	if BatchSyncSupported() != nil {
		return []SyncMode{SyncFile}
	}
	return []SyncMode{SyncFile, SyncBatch}
}

// benchShards is how many shard directories a benchmark's ids fall in:
// enough that writers rarely share a directory, few enough to create them all
// before timing, as a node that has run a while has all of its shards.
const benchShards = 256

// benchID is the i-th id of a benchmark, scattered over benchShards shards.
func benchID(i int64) string {
	k := uint32(i) * 2654435761 >> 24 // 0 to 255, scattered
	return fmt.Sprintf("%02x%02x-%d", k, k^0x5a, i)
}

// openBenchDisk opens a store in mode with every shard of benchID created.
func openBenchDisk(b *testing.B, mode SyncMode) *Disk {
	d, err := OpenDisk(b.TempDir(), Options{SyncMode: mode})
	require.NoError(b, err)
	b.Cleanup(func() { _ = d.Close() })
	for i := range int64(benchShards * 8) {
		_, err := d.ensureShard(benchID(i), mode)
		require.NoError(b, err)
	}
	return d
}

// reportSyncs adds the shared syncs of batch mode to a benchmark's results.
func reportSyncs(b *testing.B, d *Disk) {
	if st := d.SyncStats(); st.Syncs > 0 {
		b.ReportMetric(float64(st.Syncs)/float64(b.N), "syncs/op")
		b.ReportMetric(float64(st.Waits)/float64(st.Syncs), "waits/sync")
		b.ReportMetric(st.Time.Seconds()*1e3/float64(st.Syncs), "ms/sync")
	}
}

// BenchmarkDiskReceive measures the whole write path of one writer at a
// time: copy, hash, and the syncs and renames of each mode.
func BenchmarkDiskReceive(b *testing.B) {
	for _, mode := range benchModes(b) {
		for _, size := range []int{4 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("mode=%s/%dKiB", mode, size>>10), func(b *testing.B) {
				d := openBenchDisk(b, mode)
				data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
				s := sum(data)
				ctx := context.Background()
				b.SetBytes(int64(size))
				b.ReportAllocs()
				var i int64
				for b.Loop() {
					i++
					if _, _, err := d.Receive(ctx, benchID(i), s, int64(size), bytes.NewReader(data)); err != nil {
						b.Fatal(err)
					}
				}
				reportSyncs(b, d)
			})
		}
	}
}

// BenchmarkDiskReceiveParallel measures small writes arriving together, as a
// node receiving copies of many uploads at once sees them; in batch mode
// they share syncs.
func BenchmarkDiskReceiveParallel(b *testing.B) {
	const size = 4 << 10
	for _, mode := range benchModes(b) {
		b.Run(fmt.Sprintf("mode=%s/%dKiB", mode, size>>10), func(b *testing.B) {
			d := openBenchDisk(b, mode)
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
			s := sum(data)
			ctx := context.Background()
			var next atomic.Int64
			b.SetBytes(size)
			b.ReportAllocs()
			b.SetParallelism(48) // 48 writers per GOMAXPROCS: 96 on two cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, _, err := d.Receive(ctx, benchID(next.Add(1)), s, size, bytes.NewReader(data)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportSyncs(b, d)
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

// BenchmarkDiskEnumerate measures listing a store in pages of 500, the
// page the anti-entropy sweep asks a node for, over 20 000 blobs spread as
// random ids spread over the shard tree. The files are laid down directly
// (the layout is the store's own) so that setting up costs no syncs.
func BenchmarkDiskEnumerate(b *testing.B) {
	const blobs, page = 20_000, 500
	root := b.TempDir()
	sum := hashBytes([]byte("x"))
	for i := range blobs {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(i)*2654435761, i)
		p := blobPath(root, id)
		require.NoError(b, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(b, os.WriteFile(p, []byte("x"), 0o644))
		require.NoError(b, os.WriteFile(p+sidecarExt, []byte(sum+"\n"), 0o644))
	}
	d, err := OpenDisk(root, Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	for b.Loop() {
		n, after := 0, ""
		for {
			infos, err := d.Enumerate(ctx, after, page)
			require.NoError(b, err)
			n += len(infos)
			if len(infos) < page {
				break
			}
			after = infos[len(infos)-1].ID
		}
		require.Equal(b, blobs, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blobs), "ns/blob")
}
