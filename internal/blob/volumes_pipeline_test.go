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
// even while a sync runs, by a goroutine of its own: it reaches
// ownWriteMin.
func bigPayload(i int) []byte { return bytes.Repeat([]byte{byte(i), 'b'}, ownWriteMin/2) }

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
	var landed atomic.Int64
	v.landed = func() { landed.Add(1) }
	var want int64 = recordLen(vid(1), int64(len(payload(1))))
	errc := make(chan error, writers)
	for i := 2; i < 2+writers; i++ {
		want += recordLen(vid(i), int64(len(bigPayload(i))))
		go func() {
			_, _, err := v.Receive(context.Background(), vid(i), sum(bigPayload(i)), -1, bytes.NewReader(bigPayload(i)))
			errc <- err
		}()
	}
	require.Eventually(t, func() bool { return landed.Load() == writers }, 10*time.Second, time.Millisecond,
		"the later records are written while the first group's sync runs")
	require.Equal(t, synced+want, fileSize(t, volumeFile(dir, 1)))
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

// holdOwnWrites makes the own write of each record whose data is
// bigPayload(i) for a key i of holds wait until holds[i] is closed, then
// fail with fails[i] if that is set; entered[i] is closed when the write
// begins.
func holdOwnWrites(t *testing.T, holds map[int]chan struct{}, fails map[int]error) (entered map[int]chan struct{}) {
	t.Helper()
	entered = map[int]chan struct{}{}
	for i := range holds {
		entered[i] = make(chan struct{})
	}
	orig := writeVolume
	t.Cleanup(func() { writeVolume = orig })
	t.Cleanup(func() {
		for _, c := range holds {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})
	writeVolume = func(f *os.File, bufs [][]byte, off int64) (int, error) {
		for i, gate := range holds {
			if len(bufs) == 1 && bytes.HasSuffix(bufs[0], bigPayload(i)) {
				close(entered[i])
				<-gate
				if fails[i] != nil {
					return 0, &os.PathError{Op: "pwritev", Path: f.Name(), Err: fails[i]}
				}
			}
		}
		return orig(f, bufs, off)
	}
	return entered
}

// openCountingOwnWrites opens a store at dir holding vid(0) and counts the
// records' own writes the appender has heard finish.
func openCountingOwnWrites(t *testing.T, dir string) (*Volumes, *atomic.Int64) {
	t.Helper()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	landed := new(atomic.Int64)
	v.landed = func() { landed.Add(1) }
	return v, landed
}

// reopenClean closes v and opens dir again, which must find nothing torn
// or damaged.
func reopenClean(t *testing.T, v *Volumes, dir string, o Options) *Volumes {
	t.Helper()
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, o)
	require.Zero(t, v.Recovery().TornBytes)
	require.Zero(t, v.Recovery().Quarantined)
	return v
}

// receiveBig starts the receipt of bigPayload(i) and returns where it is
// answered.
func receiveBig(v *Volumes, i int) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, _, err := v.Receive(context.Background(), vid(i), sum(bigPayload(i)), -1, bytes.NewReader(bigPayload(i)))
		errc <- err
	}()
	return errc
}

// TestVolumesOwnWritesCommitOnlyTheWrittenPrefix: a large record written
// after one whose own write has not finished is not synced or acknowledged
// before it: a sync covers only the written stretch with nothing unwritten
// before it.
func TestVolumesOwnWritesCommitOnlyTheWrittenPrefix(t *testing.T) {
	dir := t.TempDir()
	v, landed := openCountingOwnWrites(t, dir)
	gate := make(chan struct{})
	entered := holdOwnWrites(t, map[int]chan struct{}{1: gate}, nil)
	first := receiveBig(v, 1)
	<-entered[1]
	before := v.GroupCommits()
	second := receiveBig(v, 2)
	require.Eventually(t, func() bool { return landed.Load() == 1 }, 10*time.Second, time.Millisecond, "the second record is written")
	time.Sleep(20 * time.Millisecond) // room for a sync and an answer, which must not come
	select {
	case err := <-second:
		t.Fatalf("a record behind an unwritten one was answered (%v)", err)
	default:
	}
	require.Equal(t, before, v.GroupCommits(), "no sync covers a record beyond a gap")
	requireGone(t, v, vid(2))
	close(gate)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	v = reopenClean(t, v, dir, Options{})
	requireHeld(t, v, vid(0), payload(0))
	requireHeld(t, v, vid(1), bigPayload(1))
	requireHeld(t, v, vid(2), bigPayload(2))
}

// TestVolumesFailedOwnWriteFailsTheRecordsAfterIt: when a large record's
// own write fails, it and every record placed after it fail, and the volume
// is cut back to where it began, after the write before it has finished;
// the record before it commits.
func TestVolumesFailedOwnWriteFailsTheRecordsAfterIt(t *testing.T) {
	dir := t.TempDir()
	v, landed := openCountingOwnWrites(t, dir)
	holdA, holdB := make(chan struct{}), make(chan struct{})
	entered := holdOwnWrites(t, map[int]chan struct{}{1: holdA, 2: holdB}, map[int]error{2: syscall.ENOSPC})
	a := receiveBig(v, 1)
	<-entered[1]
	b := receiveBig(v, 2)
	<-entered[2]
	c := receiveBig(v, 3)
	require.Eventually(t, func() bool { return landed.Load() == 1 }, 10*time.Second, time.Millisecond, "the third record is written")
	aEnd := fileSize(t, volumeFile(dir, 1)) - 2*recordLen(vid(2), int64(len(bigPayload(2))))
	close(holdB) // fails, while the first is still being written
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-b:
		t.Fatalf("the failed write was answered (%v) before the cut, which waits for the write before it", err)
	default:
	}
	close(holdA)
	require.NoError(t, <-a)
	require.Equal(t, errs.NoSpace, errs.KindOf(<-b))
	require.Equal(t, errs.NoSpace, errs.KindOf(<-c), "a record after the failed one fails with it")
	require.Equal(t, aEnd, fileSize(t, volumeFile(dir, 1)), "cut back to where the failed record began")
	requireGone(t, v, vid(2))
	requireGone(t, v, vid(3))
	_, _, err := v.Receive(context.Background(), vid(3), sum(bigPayload(3)), -1, bytes.NewReader(bigPayload(3)))
	require.NoError(t, err)
	v = reopenClean(t, v, dir, Options{})
	requireHeld(t, v, vid(1), bigPayload(1))
	requireHeld(t, v, vid(3), bigPayload(3))
	requireGone(t, v, vid(2))
}

// TestVolumesOwnWritesRollVolumes: many large and small records written at
// once across several volumes, each record in one volume, all served after
// a restart.
func TestVolumesOwnWritesRollVolumes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{VolumeSize: 1 << 20, InlineMax: 256 << 10}
	v := openVolumes(t, dir, opts)
	const n = 40
	data := func(i int) []byte {
		if i%2 == 0 {
			return bigPayload(i)
		}
		return payload(i)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { putV(t, v, vid(i), data(i)) })
	}
	wg.Wait()
	for i := range n {
		requireHeld(t, v, vid(i), data(i))
	}
	v = reopenClean(t, v, dir, opts)
	require.GreaterOrEqual(t, v.Recovery().Volumes, 3, "20 records of 128 KiB fill several 1 MiB volumes")
	for i := range n {
		requireHeld(t, v, vid(i), data(i))
	}
}
