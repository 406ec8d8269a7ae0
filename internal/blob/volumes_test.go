package blob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

func openVolumes(t *testing.T, dir string, o Options) *Volumes {
	t.Helper()
	v, err := OpenVolumes(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// die ends v as the death of its process would: no checkpoint, files as
// they are.
func die(t *testing.T, v *Volumes) {
	t.Helper()
	v.crashed.Store(true)
	require.NoError(t, v.Close())
}

func vid(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", i) }

func payload(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 'x'}, 100+i%50) }

func putV(t *testing.T, v *Volumes, id string, data []byte) {
	t.Helper()
	_, created, err := v.Receive(context.Background(), id, sum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created)
}

// requireHeld checks that v serves exactly data under id, intact.
func requireHeld(t *testing.T, v *Volumes, id string, data []byte) {
	t.Helper()
	rc, info, err := v.Fetch(context.Background(), id)
	require.NoError(t, err, id)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, data, got, id)
	require.Equal(t, sum(data), info.Checksum)
}

func requireGone(t *testing.T, v *Volumes, id string) {
	t.Helper()
	_, err := v.Stat(context.Background(), id)
	require.Equal(t, errs.NotFound, errs.KindOf(err), "%s: %v", id, err)
}

func volumeFile(dir string, num uint32) string {
	return filepath.Join(dir, volumesDirName, volumeName(num))
}

func TestLayoutIsRecordedAndEnforced(t *testing.T) {
	files, vols := t.TempDir(), t.TempDir()
	require.NoError(t, openDisk(t, files).Close())
	openVolumes(t, vols, Options{}).Close()

	_, err := OpenVolumes(files, Options{})
	var le *LayoutError
	require.ErrorAs(t, err, &le)
	require.Equal(t, LayoutError{Dir: files, Recorded: LayoutFiles, Wanted: LayoutVolumes}, *le)
	require.NoDirExists(t, filepath.Join(files, volumesDirName), "a refused open changes nothing")

	_, err = OpenDisk(vols, Options{})
	require.ErrorAs(t, err, &le)
	require.Equal(t, LayoutVolumes, le.Recorded)

	// A directory from before layouts were recorded is a files one.
	legacy := t.TempDir()
	require.NoError(t, openDisk(t, legacy).Close())
	require.NoError(t, os.Remove(filepath.Join(legacy, layoutName)))
	_, err = OpenVolumes(legacy, Options{})
	require.ErrorAs(t, err, &le)
	require.Equal(t, LayoutFiles, le.Recorded)
	require.NoError(t, openDisk(t, legacy).Close())

	require.NoError(t, os.WriteFile(filepath.Join(legacy, layoutName), []byte("heap\n"), 0o640))
	_, err = OpenDisk(legacy, Options{})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.ErrorContains(t, err, "heap")
}

// TestDirectoryLayout: what a node with no STORAGE_LAYOUT opens a directory
// as. A directory with blobs from before both the identity and the layout
// record is the files layout's too, never taken for a new one.
func TestDirectoryLayout(t *testing.T) {
	layoutOf := func(dir string) Layout {
		t.Helper()
		l, err := DirectoryLayout(dir)
		require.NoError(t, err)
		return l
	}
	require.Empty(t, layoutOf(filepath.Join(t.TempDir(), "absent")))
	require.Empty(t, layoutOf(t.TempDir()))
	files, vols := t.TempDir(), t.TempDir()
	d := openDisk(t, files)
	data := []byte("from before the records")
	_, _, err := d.Receive(context.Background(), vid(1), sum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, d.Close())
	openVolumes(t, vols, Options{}).Close()
	require.Equal(t, LayoutFiles, layoutOf(files))
	require.Equal(t, LayoutVolumes, layoutOf(vols))

	require.NoError(t, os.Remove(filepath.Join(files, layoutName)))
	require.Equal(t, LayoutFiles, layoutOf(files), "an identity without a record")
	require.NoError(t, os.Remove(filepath.Join(files, identityName)))
	require.Equal(t, LayoutFiles, layoutOf(files), "blobs without an identity or a record")
	_, err = OpenVolumes(files, Options{})
	var le *LayoutError
	require.ErrorAs(t, err, &le, "no volumes over those blobs")
	d = openDisk(t, files)
	_, err = d.Stat(context.Background(), vid(1))
	require.NoError(t, err, "the files layout serves them")
	require.NoError(t, d.Close())
}

// TestVolumesReopen: blobs, removals and replacements survive a restart,
// from the checkpoint Close writes and from a scan of every volume.
func TestVolumesReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{VolumeSize: 16 << 10, InlineMax: 4 << 10}
	v := openVolumes(t, dir, opts)
	want := map[string][]byte{}
	for i := range 200 {
		putV(t, v, vid(i), payload(i))
		want[vid(i)] = payload(i)
	}
	big := bytes.Repeat([]byte("L"), 5<<10)
	putV(t, v, vid(1000), big)
	want[vid(1000)] = big
	ctx := context.Background()
	for i := 0; i < 200; i += 3 {
		require.NoError(t, v.Remove(ctx, vid(i)))
		delete(want, vid(i))
	}
	CorruptVolumesBlob(t, v, vid(1))
	putV(t, v, vid(1), []byte("replaced"))
	want[vid(1)] = []byte("replaced")
	require.NoError(t, v.Close())
	require.FileExists(t, volumeFile(dir, 3), "volumes roll at VolumeSize")

	check := func(v *Volumes) {
		for id, data := range want {
			requireHeld(t, v, id, data)
		}
		for i := 0; i < 200; i += 3 {
			requireGone(t, v, vid(i))
		}
		u, err := v.Usage(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), u.Blobs)
		list, err := v.Enumerate(ctx, "", 1000)
		require.NoError(t, err)
		require.Len(t, list, len(want))
	}
	v = openVolumes(t, dir, opts)
	rec := v.Recovery()
	require.True(t, rec.Checkpoint)
	require.Zero(t, rec.Records, "a clean close leaves nothing to scan")
	check(v)
	require.NoError(t, v.Close())

	require.NoError(t, os.Remove(filepath.Join(dir, volumesDirName, checkpointName)))
	v = openVolumes(t, dir, opts)
	rec = v.Recovery()
	require.False(t, rec.Checkpoint)
	require.Positive(t, rec.Records)
	require.Zero(t, rec.TornBytes)
	require.Equal(t, 1, rec.Quarantined, "the corrupted copy of vid(1), superseded, is set aside")
	require.Equal(t, recordLen(vid(1), int64(len(payload(1)))), rec.QuarantinedBytes)
	check(v)
}

// TestVolumesCheckpointPlusTail: records after the last checkpoint are
// found by the scan; a checkpoint that no longer matches the volumes is
// ignored.
func TestVolumesCheckpointPlusTail(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	v.ckptEvery = 10
	for i := range 25 {
		putV(t, v, vid(i), payload(i))
	}
	require.NoError(t, v.checkpoint()) // the background ones may still be running
	for i := 25; i < 30; i++ {
		putV(t, v, vid(i), payload(i))
	}
	require.NoError(t, v.Remove(context.Background(), vid(3)))
	die(t, v)
	v = openVolumes(t, dir, Options{})
	require.True(t, v.Recovery().Checkpoint)
	require.Equal(t, int64(6), v.Recovery().Records)
	for i := range 30 {
		if i == 3 {
			requireGone(t, v, vid(i))
			continue
		}
		requireHeld(t, v, vid(i), payload(i))
	}
	die(t, v)

	// The volume shorter than the checkpoint says: scan everything.
	require.NoError(t, v.checkpointFileFor(t, dir, 1<<40))
	v = openVolumes(t, dir, Options{})
	require.False(t, v.Recovery().Checkpoint)
	require.Contains(t, v.Recovery().CheckpointIgnored, "shorter")
	requireHeld(t, v, vid(29), payload(29))
}

// checkpointFileFor rewrites the checkpoint so that it claims volume 1 is
// covered up to length.
func (v *Volumes) checkpointFileFor(t *testing.T, dir string, length int64) error {
	t.Helper()
	w, err := OpenVolumes(dir, Options{})
	require.NoError(t, err)
	w.mu.Lock()
	w.vols[1].size = length
	w.mu.Unlock()
	err = w.checkpoint()
	w.crashed.Store(true)
	require.NoError(t, w.Close())
	return err
}

// TestVolumesTornTail: a record cut short by a crash is cut off at the next
// start, never served, and the volume goes on from there.
func TestVolumesTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(rec []byte) []byte
	}{
		{"header only", func(rec []byte) []byte { return rec[:60] }},
		{"half the data", func(rec []byte) []byte { return rec[:len(rec)/2] }},
		{"whole length, zeros for data", func(rec []byte) []byte {
			return append(rec[:60:60], make([]byte, len(rec)-60)...)
		}},
		{"a few bytes of header", func(rec []byte) []byte { return rec[:5] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			v := openVolumes(t, dir, Options{})
			putV(t, v, vid(1), payload(1))
			salt := v.vols[1].salt
			die(t, v)
			path := volumeFile(dir, 1)
			before, err := os.Stat(path)
			require.NoError(t, err)
			data := payload(2)
			rec := make([]byte, recordLen(vid(2), int64(len(data))))
			copy(rec[headerLen(vid(2)):], data)
			h := recordHeader{id: vid(2), size: int64(len(data)), sum: [32]byte(mustHex(sum(data)))}
			sealHeader(rec, salt, h)
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write(tc.tear(rec))
			require.NoError(t, err)
			require.NoError(t, f.Close())

			v = openVolumes(t, dir, Options{})
			require.Positive(t, v.Recovery().TornBytes)
			requireGone(t, v, vid(2))
			requireHeld(t, v, vid(1), payload(1))
			after, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, before.Size(), after.Size(), "the torn tail is cut off")
			putV(t, v, vid(3), payload(3))
			require.NoError(t, v.Close())
			v = openVolumes(t, dir, Options{})
			requireHeld(t, v, vid(3), payload(3))
			require.Zero(t, v.Recovery().TornBytes)
		})
	}
}

// TestVolumesCorruptMiddleRecordIsSetAside: a damaged record with good ones
// after it costs only itself.
func TestVolumesCorruptMiddleRecordIsSetAside(t *testing.T) {
	for _, where := range []string{"header", "data"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			v := openVolumes(t, dir, Options{})
			for i := range 5 {
				putV(t, v, vid(i), payload(i))
			}
			e, ok := v.entry(vid(2))
			require.True(t, ok)
			require.NoError(t, v.Close())
			require.NoError(t, os.Remove(filepath.Join(dir, volumesDirName, checkpointName)))
			at := e.off + 20 // in the checksum field
			if where == "data" {
				at = e.dataOff() + 7
			}
			flipByte(t, volumeFile(dir, 1), at)

			v = openVolumes(t, dir, Options{})
			rec := v.Recovery()
			require.Equal(t, 1, rec.Quarantined)
			require.Equal(t, recordLen(vid(2), e.size), rec.QuarantinedBytes)
			require.Zero(t, rec.TornBytes)
			requireGone(t, v, vid(2))
			for _, i := range []int{0, 1, 3, 4} {
				requireHeld(t, v, vid(i), payload(i))
			}
		})
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], at)
	require.NoError(t, err)
	b[0] ^= 0x55
	_, err = f.WriteAt(b[:], at)
	require.NoError(t, err)
}

// TestVolumesGroupCommit: writers waiting together share one sync, and a
// failed sync fails every write it covered, cuts the volume back and leaves
// later writes working.
func TestVolumesGroupCommit(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	synced := v.length(v.active)

	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release) // never leave the appender stuck, even when failing
	var queued atomic.Int64
	v.submitted = func() { queued.Add(1) }
	var fail error
	var mu sync.Mutex
	calls := 0
	orig := syncVolume
	t.Cleanup(func() { syncVolume = orig })
	syncVolume = func(f *os.File) error {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			<-gate // hold the first group's sync until every writer is queued
		}
		if fail != nil {
			return fail
		}
		return orig(f)
	}
	fail = syscall.EIO
	const writers = 20
	errc := make(chan error, writers)
	for i := 1; i <= writers; i++ {
		go func() {
			_, _, err := v.Receive(context.Background(), vid(i), sum(payload(i)), -1, bytes.NewReader(payload(i)))
			errc <- err
		}()
	}
	require.Eventually(t, func() bool { return queued.Load() == writers }, 10e9, 1e6, "every writer is queued behind the first sync")
	release()
	for range writers {
		err := <-errc
		require.ErrorIs(t, err, syscall.EIO)
	}
	require.Equal(t, synced, v.length(v.active))
	fi, err := os.Stat(volumeFile(dir, 1))
	require.NoError(t, err)
	require.Equal(t, synced, fi.Size(), "cut back to the last synced length")
	for i := 1; i <= writers; i++ {
		requireGone(t, v, vid(i))
	}
	u, err := v.Usage(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(1), u.Blobs)
	require.Zero(t, v.acct.inflight, "failed writes hold no capacity")

	// Working again: the queued writers share syncs.
	fail = nil
	before := v.GroupCommits()
	var wg sync.WaitGroup
	for i := 1; i <= writers; i++ {
		wg.Go(func() { putV(t, v, vid(i), payload(i)) })
	}
	wg.Wait()
	after := v.GroupCommits()
	require.Equal(t, int64(writers), after.Waits-before.Waits)
	require.LessOrEqual(t, after.Syncs-before.Syncs, int64(writers))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	for i := 0; i <= writers; i++ {
		requireHeld(t, v, vid(i), payload(i))
	}
}

// TestVolumesFullDiskLeavesNoHalfRecord: a write the device cannot take
// whole fails as NoSpace and leaves the volume as it was.
func TestVolumesFullDiskLeavesNoHalfRecord(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	synced := v.length(v.active)
	orig := writeVolume
	t.Cleanup(func() { writeVolume = orig })
	writeVolume = func(f *os.File, bufs [][]byte, off int64) (int, error) {
		n, _ := f.WriteAt(bufs[0][:len(bufs[0])/2], off) // what a filling disk lets through
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	_, _, err := v.Receive(context.Background(), vid(1), sum(payload(1)), -1, bytes.NewReader(payload(1)))
	require.Equal(t, errs.NoSpace, errs.KindOf(err), "%v", err)
	fi, err := os.Stat(volumeFile(dir, 1))
	require.NoError(t, err)
	require.Equal(t, synced, fi.Size())
	writeVolume = orig
	putV(t, v, vid(1), payload(1))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	require.Zero(t, v.Recovery().TornBytes)
	requireHeld(t, v, vid(1), payload(1))
}

// TestVolumesCrashWindows stops the store at each step of an append, a
// volume's creation and a checkpoint, as a process death would, and checks
// that every acknowledged blob is served intact after the restart and the
// interrupted one is either absent or intact.
func TestVolumesCrashWindows(t *testing.T) {
	for _, step := range []string{crashVolumeCreated, crashAppended, crashSynced, crashCheckpointWritten} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{VolumeSize: 4 << 10, InlineMax: 1 << 10}
			v := openVolumes(t, dir, opts)
			for i := range 10 {
				putV(t, v, vid(i), payload(i))
			}
			v.crashAt.Store(step)
			var err error
			if step == crashCheckpointWritten {
				err = v.checkpoint()
			} else {
				// Enough writes to reach a volume's creation.
				for i := 10; i < 40 && err == nil; i++ {
					_, _, err = v.Receive(context.Background(), vid(i), sum(payload(i)), -1, bytes.NewReader(payload(i)))
					if err == nil {
						continue
					}
					require.ErrorIs(t, err, errSimulatedCrash)
				}
			}
			require.ErrorIs(t, err, errSimulatedCrash)
			die(t, v)

			v = openVolumes(t, dir, opts)
			for i := range 10 {
				requireHeld(t, v, vid(i), payload(i))
			}
			for i := 10; i < 40; i++ {
				if _, err := v.Stat(context.Background(), vid(i)); err == nil {
					requireHeld(t, v, vid(i), payload(i))
				}
			}
			putV(t, v, vid(99), payload(99))
			require.NoError(t, v.Close())
			v = openVolumes(t, dir, opts)
			requireHeld(t, v, vid(99), payload(99))
		})
	}
}

func TestVolumesRejectBadOptions(t *testing.T) {
	_, err := OpenVolumes(t.TempDir(), Options{VolumeSize: 1 << 20, InlineMax: 1 << 20})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.ErrorContains(t, err, "volume size")
	_, err = OpenVolumes(t.TempDir(), Options{CapacityBytes: -1})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	_, err = OpenVolumes(t.TempDir(), Options{CompactThreshold: 1})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.ErrorContains(t, err, "compaction threshold")
}

// fillAndThin writes n blobs to small volumes and removes two in three,
// returning what is left.
func fillAndThin(t *testing.T, v *Volumes, n int) map[string][]byte {
	t.Helper()
	want := map[string][]byte{}
	for i := range n {
		putV(t, v, vid(i), payload(i))
		want[vid(i)] = payload(i)
	}
	for i := range n {
		if i%3 != 0 {
			require.NoError(t, v.Remove(context.Background(), vid(i)))
			delete(want, vid(i))
		}
	}
	return want
}

func requireExactly(t *testing.T, v *Volumes, n int, want map[string][]byte) {
	t.Helper()
	for i := range n {
		if data, ok := want[vid(i)]; ok {
			requireHeld(t, v, vid(i), data)
		} else {
			requireGone(t, v, vid(i))
		}
	}
	u, err := v.Usage(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), u.Blobs)
}

var compactOpts = Options{VolumeSize: 16 << 10, InlineMax: 1 << 10}

// manualCompaction keeps stores opened by the test from compacting by
// themselves, so that the test's own calls find the work to do.
func manualCompaction(t *testing.T) {
	backgroundCompaction = false
	t.Cleanup(func() { backgroundCompaction = true })
}

// TestVolumesCompaction: compaction reclaims the garbage of sealed volumes,
// keeps every live blob and every removal, and its result survives restarts
// from the checkpoint and from a full scan.
func TestVolumesCompaction(t *testing.T) {
	manualCompaction(t)
	dir := t.TempDir()
	v := openVolumes(t, dir, compactOpts)
	const n = 150
	want := fillAndThin(t, v, n)
	before := v.GarbageBytes()
	require.NotEmpty(t, v.compactable())
	require.NoError(t, v.Compact(context.Background()))
	st := v.CompactStats()
	require.Positive(t, st.Volumes)
	require.Positive(t, st.Reclaimed)
	require.Zero(t, st.Failed)
	require.Empty(t, v.compactable(), "nothing over the threshold is left")
	require.Less(t, v.GarbageBytes(), before)
	requireExactly(t, v, n, want)
	fi, err := os.Stat(volumeFile(dir, 1))
	require.NoError(t, err)
	require.Less(t, fi.Size(), compactOpts.VolumeSize/2, "the first volume lost two thirds of its records")
	require.NoError(t, v.Close())

	v = openVolumes(t, dir, compactOpts)
	require.True(t, v.Recovery().Checkpoint)
	requireExactly(t, v, n, want)
	require.NoError(t, v.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, volumesDirName, checkpointName)))
	v = openVolumes(t, dir, compactOpts)
	require.Zero(t, v.Recovery().Quarantined+int(v.Recovery().TornBytes))
	requireExactly(t, v, n, want)
}

// TestVolumesCompactionCrashWindows: a compaction stopped after the new
// volume is written, or after it is renamed into place, leaves one whole
// volume authoritative.
func TestVolumesCompactionCrashWindows(t *testing.T) {
	manualCompaction(t)
	for _, step := range []string{crashCompactWritten, crashCompactRenamed} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			v := openVolumes(t, dir, compactOpts)
			const n = 100
			want := fillAndThin(t, v, n)
			v.crashAt.Store(step)
			require.ErrorIs(t, v.Compact(context.Background()), errSimulatedCrash)
			die(t, v)
			v = openVolumes(t, dir, compactOpts)
			requireExactly(t, v, n, want)
			require.NoError(t, v.Compact(context.Background()))
			require.NoError(t, v.Close())
			v = openVolumes(t, dir, compactOpts)
			requireExactly(t, v, n, want)
			entries, err := os.ReadDir(filepath.Join(dir, volumesDirName))
			require.NoError(t, err)
			for _, e := range entries {
				require.NotContains(t, e.Name(), tempPrefix, "no temp file is left")
			}
		})
	}
}

// TestVolumesCompactionUnderLoad compacts again and again while readers,
// writers and deleters run, then checks the store against what they did.
func TestVolumesCompactionUnderLoad(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, compactOpts)
	const n = 300
	var (
		mu   sync.Mutex
		want = map[string][]byte{}
	)
	ctx, cancel := context.WithCancel(context.Background())
	var writers, reader sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := w; i < n; i += 4 {
				putV(t, v, vid(i), payload(i))
				mu.Lock()
				want[vid(i)] = payload(i)
				mu.Unlock()
				if i%3 != 0 {
					require.NoError(t, v.Remove(context.Background(), vid(i)))
					mu.Lock()
					delete(want, vid(i))
					mu.Unlock()
				}
			}
		})
	}
	reader.Go(func() { // whatever it gets must be whole
		for ctx.Err() == nil {
			for i := 0; i < n && ctx.Err() == nil; i += 7 {
				rc, info, err := v.Fetch(context.Background(), vid(i))
				if err != nil {
					continue
				}
				got, err := io.ReadAll(rc)
				require.NoError(t, rc.Close())
				require.NoError(t, err)
				require.Equal(t, info.Checksum, sum(got))
			}
		}
	})
	compactions := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := v.Compact(context.Background()); err != nil {
				compactions <- err
				return
			}
		}
		compactions <- nil
	}()
	writers.Wait()
	cancel()
	reader.Wait()
	require.NoError(t, <-compactions)
	require.NoError(t, v.Compact(context.Background()))
	require.Positive(t, v.CompactStats().Volumes)
	requireExactly(t, v, n, want)
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, compactOpts)
	requireExactly(t, v, n, want)
}

// TestVolumesUnfinishedVolume: a last volume cut short inside its
// superblock (a crash while creating it) is removed at open; any other bad
// superblock stops the open, naming the file.
func TestVolumesUnfinishedVolume(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(1), payload(1))
	require.NoError(t, v.Close())
	require.NoError(t, os.WriteFile(volumeFile(dir, 2), superblock{num: 2, salt: 7}.encode()[:10], 0o640))
	v = openVolumes(t, dir, Options{})
	require.NoFileExists(t, volumeFile(dir, 2))
	require.Equal(t, int64(10), v.Recovery().TornBytes)
	requireHeld(t, v, vid(1), payload(1))
	putV(t, v, vid(2), payload(2))
	require.NoError(t, v.Close())

	flipByte(t, volumeFile(dir, 1), 13) // the volume number
	require.NoError(t, os.WriteFile(volumeFile(dir, 2), superblock{num: 2, salt: 7}.encode(), 0o640))
	_, err := OpenVolumes(dir, Options{})
	require.Equal(t, errs.Corrupt, errs.KindOf(err), "%v", err)
	require.ErrorContains(t, err, volumeName(1))
}
