package blob

import (
	"bytes"
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

// holdFirstSync makes the next fdatasync of a volume wait until release is
// called; entered is closed once that sync has begun.
func holdFirstSync(t *testing.T) (entered <-chan struct{}, release func()) {
	t.Helper()
	gate, in := make(chan struct{}), make(chan struct{})
	var open, began sync.Once
	release = func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release) // never leave the sync stuck, even when failing
	var calls atomic.Int64
	orig := syncVolume
	t.Cleanup(func() { syncVolume = orig })
	syncVolume = func(f *os.File) error {
		if calls.Add(1) == 1 {
			began.Do(func() { close(in) })
			<-gate
		}
		return orig(f)
	}
	return in, release
}

// bigPayload is the data of a record that is written as soon as it arrives,
// even while a sync runs: it alone reaches writeAheadMin.
func bigPayload(i int) []byte { return bytes.Repeat([]byte{byte(i), 'b'}, writeAheadMin/2) }

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// TestVolumesWritesOverlapSync: large records that arrive while a group's
// sync runs are written to the volume during it, acknowledged only after a
// sync of their own, and all of them share that one sync.
func TestVolumesWritesOverlapSync(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	synced := v.length(v.active)
	entered, release := holdFirstSync(t)

	first := make(chan error, 1)
	go func() {
		_, _, err := v.Receive(context.Background(), vid(1), sum(payload(1)), -1, bytes.NewReader(payload(1)))
		first <- err
	}()
	<-entered
	const writers = 20
	var want int64 = recordLen(vid(1), int64(len(payload(1))))
	errc := make(chan error, writers)
	for i := 2; i < 2+writers; i++ {
		want += recordLen(vid(i), int64(len(bigPayload(i))))
		go func() {
			_, _, err := v.Receive(context.Background(), vid(i), sum(bigPayload(i)), -1, bytes.NewReader(bigPayload(i)))
			errc <- err
		}()
	}
	require.Eventually(t, func() bool { return fileSize(t, volumeFile(dir, 1)) == synced+want }, 10*time.Second, time.Millisecond,
		"the later records are written while the first group's sync runs")
	select {
	case err := <-errc:
		t.Fatalf("a record was answered (%v) before any sync covering it returned", err)
	case err := <-first:
		t.Fatalf("the held group was answered (%v) before its sync returned", err)
	default:
	}
	for i := 2; i < 2+writers; i++ {
		requireGone(t, v, vid(i)) // not indexed before their sync
	}
	before := v.GroupCommits()
	release()
	require.NoError(t, <-first)
	for range writers {
		require.NoError(t, <-errc)
	}
	after := v.GroupCommits()
	require.Equal(t, int64(2), after.Syncs-before.Syncs, "the held group, then one group of every record written during its sync")
	require.Equal(t, int64(1+writers), after.Waits-before.Waits)
	require.Equal(t, synced+want, v.length(v.active))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	require.Zero(t, v.Recovery().TornBytes)
	for i := 0; i < 2; i++ {
		requireHeld(t, v, vid(i), payload(i))
	}
	for i := 2; i < 2+writers; i++ {
		requireHeld(t, v, vid(i), bigPayload(i))
	}
}

// recordsPerWrite counts the records of each volume write from now to the
// end of the test; the function it returns lists them so far.
func recordsPerWrite(t *testing.T) func() []int {
	var mu sync.Mutex
	var writes []int
	orig := writeVolume
	t.Cleanup(func() { writeVolume = orig })
	writeVolume = func(f *os.File, bufs [][]byte, off int64) (int, error) {
		mu.Lock()
		writes = append(writes, len(bufs))
		mu.Unlock()
		return orig(f, bufs, off)
	}
	return func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(writes)
	}
}

// TestVolumesSmallRecordsShareAWrite: small records that arrive while a
// group's sync runs are held in memory, not written, until it returns; then
// all of them go to the volume in one write and share one sync.
func TestVolumesSmallRecordsShareAWrite(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	entered, release := holdFirstSync(t)
	writes := recordsPerWrite(t)
	var queued atomic.Int64
	v.submitted = func() { queued.Add(1) }
	const writers = 20
	errc := make(chan error, writers+1)
	receive := func(i int) {
		_, _, err := v.Receive(context.Background(), vid(i), sum(payload(i)), -1, bytes.NewReader(payload(i)))
		errc <- err
	}
	go receive(1)
	<-entered
	inSync := fileSize(t, volumeFile(dir, 1))
	for i := 2; i < 2+writers; i++ {
		go receive(i)
	}
	require.Eventually(t, func() bool { return queued.Load() == writers+1 }, 10*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // room for a write during the sync, which must not come
	require.Equal(t, inSync, fileSize(t, volumeFile(dir, 1)), "nothing is written behind the group in sync")
	before := v.GroupCommits()
	release()
	for range writers + 1 {
		require.NoError(t, <-errc)
	}
	after := v.GroupCommits()
	require.Equal(t, int64(2), after.Syncs-before.Syncs, "the held group, then one group of every record that arrived during its sync")
	require.Equal(t, []int{1, writers}, writes(), "the held record, then the rest in one write")
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	require.Zero(t, v.Recovery().TornBytes)
	for i := 0; i < 2+writers; i++ {
		requireHeld(t, v, vid(i), payload(i))
	}
}

// TestVolumesFailedWriteDuringSync: a write that fails while the group
// before it is being synced fails alone and is cut off; the group in sync
// is committed.
func TestVolumesFailedWriteDuringSync(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	entered, release := holdFirstSync(t)
	first := make(chan error, 1)
	go func() {
		_, _, err := v.Receive(context.Background(), vid(1), sum(payload(1)), -1, bytes.NewReader(payload(1)))
		first <- err
	}()
	<-entered
	held := fileSize(t, volumeFile(dir, 1))
	orig := writeVolume
	t.Cleanup(func() { writeVolume = orig })
	writeVolume = func(f *os.File, bufs [][]byte, off int64) (int, error) {
		n, _ := f.WriteAt(bufs[0][:len(bufs[0])/2], off) // what a filling disk lets through
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	_, _, err := v.Receive(context.Background(), vid(2), sum(bigPayload(2)), -1, bytes.NewReader(bigPayload(2)))
	require.Equal(t, errs.NoSpace, errs.KindOf(err), "%v", err)
	require.Equal(t, held, fileSize(t, volumeFile(dir, 1)), "only the failed write is cut off")
	select {
	case err := <-first:
		t.Fatalf("the group in sync was answered (%v) before its sync returned", err)
	default:
	}
	writeVolume = orig
	release()
	require.NoError(t, <-first)
	requireGone(t, v, vid(2))
	require.Equal(t, held, v.length(v.active))
	putV(t, v, vid(2), payload(2))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	require.Zero(t, v.Recovery().TornBytes)
	for i := range 3 {
		requireHeld(t, v, vid(i), payload(i))
	}
}

// TestVolumesFailedSyncFailsWritesBehindIt: when a sync fails, the records
// written behind its group during it fail too (the volume is cut back to
// where the group began, under them) and the next records commit.
func TestVolumesFailedSyncFailsWritesBehindIt(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	synced := v.length(v.active)
	gate, in := make(chan struct{}), make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) })
	var calls atomic.Int64
	orig := syncVolume
	t.Cleanup(func() { syncVolume = orig })
	syncVolume = func(f *os.File) error {
		if calls.Add(1) == 1 {
			close(in)
			<-gate
			return syscall.EIO
		}
		return orig(f)
	}
	first := make(chan error, 1)
	go func() {
		_, _, err := v.Receive(context.Background(), vid(1), sum(payload(1)), -1, bytes.NewReader(payload(1)))
		first <- err
	}()
	<-in
	behind := make(chan error, 1)
	go func() {
		_, _, err := v.Receive(context.Background(), vid(2), sum(bigPayload(2)), -1, bytes.NewReader(bigPayload(2)))
		behind <- err
	}()
	require.Eventually(t, func() bool { return fileSize(t, volumeFile(dir, 1)) > synced+recordLen(vid(1), int64(len(payload(1)))) },
		10*time.Second, time.Millisecond, "the second record is written during the first sync")
	open.Do(func() { close(gate) })
	require.ErrorIs(t, <-first, syscall.EIO)
	require.ErrorIs(t, <-behind, syscall.EIO)
	require.Equal(t, synced, fileSize(t, volumeFile(dir, 1)))
	requireGone(t, v, vid(1))
	requireGone(t, v, vid(2))
	putV(t, v, vid(3), payload(3))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	require.Zero(t, v.Recovery().TornBytes)
	requireHeld(t, v, vid(0), payload(0))
	requireHeld(t, v, vid(3), payload(3))
	requireGone(t, v, vid(1))
	requireGone(t, v, vid(2))
}

// TestVolumesGroupRecordCap: while a sync runs, the group gathering behind
// it stops at maxGroupRecords records; the writers beyond wait for the next
// group.
func TestVolumesGroupRecordCap(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	entered, release := holdFirstSync(t)
	writes := recordsPerWrite(t)
	var queued atomic.Int64
	v.submitted = func() { queued.Add(1) }
	const writers = maxGroupRecords + 72
	errc := make(chan error, writers+1)
	receive := func(i int) {
		_, _, err := v.Receive(context.Background(), vid(i), sum(payload(i)), -1, bytes.NewReader(payload(i)))
		errc <- err
	}
	go receive(1)
	<-entered
	for i := 2; i < 2+writers; i++ {
		go receive(i)
	}
	require.Eventually(t, func() bool { return queued.Load() == writers+1 }, 10*time.Second, time.Millisecond)
	before := v.GroupCommits()
	release()
	for range writers + 1 {
		require.NoError(t, <-errc)
	}
	after := v.GroupCommits()
	require.Equal(t, int64(3), after.Syncs-before.Syncs, "the held record, the full group, the rest")
	require.Equal(t, int64(writers+1), after.Waits-before.Waits)
	require.Equal(t, []int{1, maxGroupRecords, writers - maxGroupRecords}, writes())
	for i := 0; i < 2+writers; i++ {
		requireHeld(t, v, vid(i), payload(i))
	}
}
