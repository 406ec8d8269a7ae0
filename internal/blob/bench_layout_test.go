//go:build linux || darwin

package blob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The layouts side by side: each benchmark runs the files layout (Disk, in
// the default sync mode) and the volumes layout on the same machine in one
// run.

func openBenchLayout(b *testing.B, layout Layout) Store {
	b.Helper()
	dir := b.TempDir()
	if layout == LayoutFiles {
		return openBenchDisk(b, DefaultSyncMode())
	}
	v, err := OpenVolumes(dir, Options{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = v.Close() })
	return v
}

var benchSizes = []int{4 << 10, 64 << 10, 1 << 20}

// BenchmarkLayoutReceiveParallel: 32 writers at once (16 per core on two
// cores), every copy durable before it returns.
func BenchmarkLayoutReceiveParallel(b *testing.B) {
	for _, layout := range []Layout{LayoutFiles, LayoutVolumes} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("layout=%s/%dKiB", layout, size>>10), func(b *testing.B) {
				s := openBenchLayout(b, layout)
				data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
				sm := sum(data)
				ctx := context.Background()
				runParallel(b, size, func(i int64) error {
					_, _, err := s.Receive(ctx, benchID(i), sm, int64(size), bytes.NewReader(data))
					return err
				})
				if v, ok := s.(*Volumes); ok {
					if g := v.GroupCommits(); g.Syncs > 0 {
						b.ReportMetric(float64(g.Waits)/float64(g.Syncs), "records/sync")
						// The share of the run with a volume fdatasync in
						// flight: near 1, the syncs bound the writes; well
						// below, the appender's writes do.
						b.ReportMetric(g.Time.Seconds()/b.Elapsed().Seconds(), "sync-busy")
					}
				}
			})
		}
	}
}

// BenchmarkLayoutFetchParallel: 32 readers of stored blobs.
func BenchmarkLayoutFetchParallel(b *testing.B) {
	const blobs = 256
	for _, layout := range []Layout{LayoutFiles, LayoutVolumes} {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("layout=%s/%dKiB", layout, size>>10), func(b *testing.B) {
				s := openBenchLayout(b, layout)
				data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
				ctx := context.Background()
				for i := range int64(blobs) {
					_, _, err := s.Receive(ctx, benchID(i), sum(data), int64(size), bytes.NewReader(data))
					require.NoError(b, err)
				}
				runParallel(b, size, func(i int64) error {
					rc, _, err := s.Fetch(ctx, benchID(i%blobs))
					if err != nil {
						return err
					}
					defer rc.Close()
					_, err = io.Copy(io.Discard, rc)
					return err
				})
			})
		}
	}
}

// runParallel runs op from 32 goroutines (16 per core on two cores), each
// call with the next number, reporting size bytes per call.
func runParallel(b *testing.B, size int, op func(i int64) error) {
	var next atomic.Int64
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// startupBlobs is how many 4 KiB blobs BenchmarkVolumesStartup and
// BenchmarkLayoutDiskSpace store (DFS_BENCH_STARTUP_BLOBS; default
// 1,000,000: about 4.3 GB of disk for the volumes and twice that for files).
func startupBlobs(b *testing.B) int {
	if s := os.Getenv("DFS_BENCH_STARTUP_BLOBS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(b, err, "DFS_BENCH_STARTUP_BLOBS")
		return n
	}
	return 1_000_000
}

// fillConcurrently writes n 4 KiB blobs to s from 64 writers.
func fillConcurrently(b *testing.B, s Store, n int) {
	b.Helper()
	data := bytes.Repeat([]byte("0123456789abcdef"), 256)
	sm := sum(data)
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, _, err := s.Receive(context.Background(), benchID(i), sm, int64(len(data)), bytes.NewReader(data)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Logf("stored %d blobs of 4 KiB in %s", n, time.Since(began).Round(time.Millisecond))
}

// BenchmarkVolumesStartup measures opening a volumes directory holding
// startupBlobs 4 KiB blobs: from the checkpoint a clean stop writes, and
// after a crash with a full checkpoint interval of records to scan.
func BenchmarkVolumesStartup(b *testing.B) {
	n := startupBlobs(b)
	dir := b.TempDir()
	v, err := OpenVolumes(dir, Options{})
	require.NoError(b, err)
	fillConcurrently(b, v, n)
	require.NoError(b, v.Close())
	b.Run(fmt.Sprintf("blobs=%d/clean", n), func(b *testing.B) {
		var heap uint64
		for b.Loop() {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			v, err := OpenVolumes(dir, Options{})
			require.NoError(b, err)
			require.Equal(b, int64(n), v.Recovery().Blobs)
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
			v.crashed.Store(true) // no new checkpoint: the next open reads the same one
			require.NoError(b, v.Close())
		}
		b.ReportMetric(float64(heap)/float64(n), "index-bytes/blob")
	})
	// The worst case after a crash: the checkpoint is as old as it gets.
	v, err = OpenVolumes(dir, Options{})
	require.NoError(b, err)
	tail := min(checkpointEvery-1, n)
	data := bytes.Repeat([]byte("fedcba9876543210"), 256)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(tail); i = next.Add(1) {
				if _, _, err := v.Receive(context.Background(), benchID(int64(n)+i), sum(data), int64(len(data)), bytes.NewReader(data)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	v.crashed.Store(true)
	require.NoError(b, v.Close())
	b.Run(fmt.Sprintf("blobs=%d/after-crash-%d-to-scan", n+tail, tail), func(b *testing.B) {
		for b.Loop() {
			v, err := OpenVolumes(dir, Options{})
			require.NoError(b, err)
			require.Equal(b, int64(tail), v.Recovery().Records)
			v.crashed.Store(true)
			require.NoError(b, v.Close())
		}
	})
}

// BenchmarkLayoutDiskSpace reports the disk a directory of startupBlobs
// 4 KiB blobs takes in each layout (allocated blocks, as du counts them).
func BenchmarkLayoutDiskSpace(b *testing.B) {
	n := startupBlobs(b)
	for _, layout := range []Layout{LayoutFiles, LayoutVolumes} {
		b.Run(fmt.Sprintf("layout=%s/blobs=%d", layout, n), func(b *testing.B) {
			for b.Loop() {
				s := openBenchLayout(b, layout)
				fillConcurrently(b, s, n)
				var dir string
				switch st := s.(type) {
				case *Disk:
					dir = st.Dir()
				case *Volumes:
					dir = st.Dir()
				}
				require.NoError(b, s.Close())
				used := allocated(b, dir)
				b.ReportMetric(float64(used)/float64(n), "disk-bytes/blob")
				b.ReportMetric(float64(used)/1e9, "disk-GB")
			}
		})
	}
}

// allocated sums the blocks allocated to the files and directories under dir.
func allocated(b *testing.B, dir string) int64 {
	var total int64
	require.NoError(b, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		total += blocksOf(fi)
		return nil
	}))
	return total
}

// blocksOf is the disk a file takes, as du counts it.
func blocksOf(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

// BenchmarkVolumesCompaction compacts a sealed 64 MiB volume of 4 KiB blobs
// of which half were removed, and reports the volume bytes walked per second.
func BenchmarkVolumesCompaction(b *testing.B) {
	backgroundCompaction = false
	b.Cleanup(func() { backgroundCompaction = true })
	const volSize = 64 << 20
	var read int64
	var took time.Duration
	for range b.N {
		b.StopTimer()
		v, err := OpenVolumes(b.TempDir(), Options{VolumeSize: volSize})
		require.NoError(b, err)
		n := int(volSize / recordLen(benchID(0), 4<<10))
		fillConcurrently(b, v, n+64) // the last ones seal the first volume
		for i := 1; i <= n; i += 2 {
			require.NoError(b, v.Remove(context.Background(), benchID(int64(i))))
		}
		before := v.CompactStats()
		b.StartTimer()
		began := time.Now()
		require.NoError(b, v.Compact(context.Background()))
		took += time.Since(began)
		b.StopTimer()
		after := v.CompactStats()
		require.Positive(b, after.Volumes-before.Volumes)
		read += after.Read - before.Read
		require.NoError(b, v.Close())
	}
	b.ReportMetric(float64(read)/took.Seconds()/1e6, "MB/s")
}
