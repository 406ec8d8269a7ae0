package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/dirlock"
	"github.com/dfs-project/dfs/internal/errs"
)

const testID = "0123abcd-1111-2222-3333-444455556666"

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func openDisk(t *testing.T, dir string) *Disk {
	t.Helper()
	return openDiskMode(t, dir, "")
}

func openDiskMode(t *testing.T, dir string, mode SyncMode) *Disk {
	t.Helper()
	return openDiskOpts(t, dir, Options{SyncMode: mode})
}

func openDiskOpts(t *testing.T, dir string, o Options) *Disk {
	t.Helper()
	d, err := OpenDisk(dir, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// crash ends d as the death of its process would before the directory is
// opened again: every file stays as it is, and the directory's lock, which
// the kernel would release, is released.
func crash(t *testing.T, d *Disk) {
	t.Helper()
	require.NoError(t, d.Close())
}

// syncModes are the modes this system can run, each to be tested.
func syncModes(t *testing.T) []SyncMode {
	if err := BatchSyncSupported(); err != nil {
		t.Logf("batch mode not tested: %v", err)
		return []SyncMode{SyncFile}
	}
	return []SyncMode{SyncFile, SyncBatch}
}

// requireBatch skips a test of batch mode where it cannot run.
func requireBatch(t *testing.T) {
	t.Helper()
	if err := BatchSyncSupported(); err != nil {
		t.Skipf("batch sync mode: %v", err)
	}
}

func receive(t *testing.T, d *Disk, id string, data []byte) {
	t.Helper()
	_, created, err := d.Receive(context.Background(), id, sum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created)
}

// tree lists every file under dir, relative to it, except the directory's
// identity, which every open store has (identity_test.go covers it).
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(dir, p); !e.IsDir() && rel != identityName && rel != layoutName && rel != dirlock.Name {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir)
	data := []byte("hello, layout")
	receive(t, d, testID, data)
	require.Equal(t, []string{"01/23/" + testID, "01/23/" + testID + ".sha256"}, tree(t, dir))
	require.FileExists(t, filepath.Join(dir, "disk-id"))
	layout, err := os.ReadFile(filepath.Join(dir, layoutName))
	require.NoError(t, err)
	require.Equal(t, "files\n", string(layout), "the layout is recorded at the first open")
	require.FileExists(t, filepath.Join(dir, dirlock.Name))
	side, err := os.ReadFile(filepath.Join(dir, "01", "23", testID+".sha256"))
	require.NoError(t, err)
	require.Equal(t, sum(data)+"\n", string(side))
	got, err := os.ReadFile(filepath.Join(dir, "01", "23", testID))
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestFailedWritesLeaveNoFiles(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 700<<10)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		sum  string
		size int64
		opts Options
	}{
		{"checksum mismatch", context.Background(), sum([]byte("other")), int64(len(data)), Options{}},
		{"short body", context.Background(), sum(data), int64(len(data)) + 1, Options{}},
		{"cancelled", cancelled, sum(data), int64(len(data)), Options{}},
		{"capacity, size declared", context.Background(), sum(data), int64(len(data)), Options{CapacityBytes: 1 << 10}},
		{"capacity, size unknown", context.Background(), sum(data), -1, Options{CapacityBytes: 300 << 10}},
	} {
		for _, mode := range syncModes(t) {
			t.Run(fmt.Sprintf("%s/%s", tc.name, mode), func(t *testing.T) {
				dir := t.TempDir()
				opts := tc.opts
				opts.SyncMode = mode
				d, err := OpenDisk(dir, opts)
				require.NoError(t, err)
				_, _, err = d.Receive(tc.ctx, testID, tc.sum, tc.size, bytes.NewReader(data))
				require.Error(t, err)
				require.Empty(t, tree(t, dir), "a failed write leaves no file behind")
				require.Equal(t, int64(0), d.acct.inflight, "a failed write releases its reservation")
			})
		}
	}
}

// TestCrashWindows stops a write at each step of each mode as a crash would
// (leaving its files) and checks what is visible then, and that reopening
// the store leaves the blob either absent, or present with its sidecar:
// intact if it is the new one, the corrupt copy it was if it is the old one.
// The large cases are copies over BatchSyncMax in a batch-mode store, which
// take file mode's steps.
func TestCrashWindows(t *testing.T) {
	old, next := []byte("the old bytes"), []byte("the new bytes")
	// What Stat shows after the crash and after reopening.
	const (
		absent    = "absent"
		oldCopy   = "the old, corrupt copy"
		newIntact = "the new copy"
	)
	const large = "batch, over BatchSyncMax"
	for _, tc := range []struct {
		mode    SyncMode
		step    string
		replace bool
		// visible is what a crash at step leaves under the final names.
		visible string
		// temps is whether temp files are left to clean up.
		temps bool
	}{
		{SyncFile, "blob-synced", false, absent, true},
		{SyncFile, "sidecar-published", false, absent, true},
		{SyncFile, "blob-synced", true, oldCopy, true},
		{SyncFile, "old-removed", true, absent, true},
		{SyncFile, "sidecar-published", true, absent, true},

		{SyncBatch, "temps-written", false, absent, true},
		{SyncBatch, "temps-synced", false, absent, true},
		{SyncBatch, "sidecar-published", false, absent, true},
		{SyncBatch, "blob-published", false, newIntact, false},
		{SyncBatch, "temps-written", true, oldCopy, true},
		{SyncBatch, "old-removed", true, absent, true},
		{SyncBatch, "temps-synced", true, absent, true},
		{SyncBatch, "sidecar-published", true, absent, true},
		{SyncBatch, "blob-published", true, newIntact, false},

		{large, "blob-synced", false, absent, true},
		{large, "sidecar-published", false, absent, true},
		{large, "blob-synced", true, oldCopy, true},
		{large, "old-removed", true, absent, true},
		{large, "sidecar-published", true, absent, true},
	} {
		t.Run(fmt.Sprintf("%s/%s/replace=%v", tc.mode, tc.step, tc.replace), func(t *testing.T) {
			opts := Options{SyncMode: tc.mode}
			if tc.mode == large {
				// Both copies are 13 bytes: over the limit.
				opts = Options{SyncMode: SyncBatch, BatchSyncMax: 12}
			}
			if opts.SyncMode == SyncBatch {
				requireBatch(t)
			}
			dir := t.TempDir()
			d := openDiskOpts(t, dir, opts)
			if tc.replace {
				receive(t, d, testID, old)
				p := filepath.Join(dir, "01", "23", testID)
				require.NoError(t, os.WriteFile(p, []byte("the rotten bytes"), 0o640))
			}
			d.crashAt = tc.step
			_, _, err := d.Receive(context.Background(), testID, sum(next), int64(len(next)), bytes.NewReader(next))
			require.ErrorIs(t, err, errSimulatedCrash)

			ctx := context.Background()
			requireState := func(d *Disk) {
				t.Helper()
				info, err := d.Stat(ctx, testID)
				if tc.visible == absent {
					require.Equal(t, errs.NotFound, errs.KindOf(err), "blob visible after crash at %s", tc.step)
					return
				}
				require.NoError(t, err)
				c, err := d.Rehash(ctx, testID)
				require.NoError(t, err)
				if tc.visible == oldCopy {
					require.Equal(t, sum(old), info.Checksum)
					require.False(t, c.Intact())
				} else {
					require.Equal(t, sum(next), info.Checksum)
					require.True(t, c.Intact())
				}
			}
			requireState(d)

			crash(t, d)
			d2 := openDiskOpts(t, dir, opts)
			rec := d2.Recovery()
			if tc.temps {
				require.Positive(t, rec.TempFilesRemoved, "the interrupted write's temp files are removed")
			} else {
				require.Zero(t, rec.TempFilesRemoved)
			}
			files := tree(t, dir)
			for _, f := range files {
				require.False(t, strings.Contains(f, tempPrefix), "temp file %s survives reopening", f)
			}
			require.True(t, len(files) == 0 || len(files) == 2, "after reopening, a blob has its sidecar or neither exists: %v", files)
			requireState(d2)

			_, created, err := d2.Receive(ctx, testID, sum(next), int64(len(next)), bytes.NewReader(next))
			require.NoError(t, err)
			require.Equal(t, tc.visible != newIntact, created)
			c, err := d2.Rehash(ctx, testID)
			require.NoError(t, err)
			require.True(t, c.Intact())
			u, err := d2.Usage(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), u.Blobs)
			require.Equal(t, int64(len(next)), u.BytesUsed)
		})
	}
}

// TestBatchCrashStates builds the states a crash in batch mode can leave on
// disk when the file system kept only some of the operations not yet synced
// (the steps of TestCrashWindows leave each of them whole), and checks that
// reopening finds the blob absent or intact, never a name without its bytes.
func TestBatchCrashStates(t *testing.T) {
	requireBatch(t)
	old, next := []byte("the old bytes"), []byte("the new bytes")
	ctx := context.Background()
	shardDir := func(dir string) string { return filepath.Join(dir, "01", "23") }
	// temps finds the temp files of the interrupted write: the sidecar's holds
	// the checksum, the blob's the body.
	temps := func(t *testing.T, dir string) (blobTemp, sideTemp string) {
		t.Helper()
		entries, err := os.ReadDir(shardDir(dir))
		require.NoError(t, err)
		for _, e := range entries {
			if !isTempName(e.Name()) {
				continue
			}
			p := filepath.Join(shardDir(dir), e.Name())
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			if string(b) == sum(next)+"\n" {
				sideTemp = p
			} else {
				blobTemp = p
			}
		}
		require.NotEmpty(t, blobTemp)
		require.NotEmpty(t, sideTemp)
		return blobTemp, sideTemp
	}
	for _, tc := range []struct {
		name    string
		replace bool
		// crashAt is where the write stops; keep then undoes or completes
		// some of the operations the crash would have lost or kept.
		crashAt string
		keep    func(t *testing.T, dir string)
		intact  bool
	}{
		// Before sync 1: the unlink of the old copy half kept.
		{"old blob unlinked, old sidecar kept", true, "temps-written", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(blobPath(dir, testID)))
		}, false},
		{"old sidecar unlinked, old blob kept", true, "temps-written", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(sidecarPath(dir, testID)))
		}, false},
		// Before sync 1: a temp file holding less than was written.
		{"blob temp truncated", false, "temps-written", func(t *testing.T, dir string) {
			b, _ := temps(t, dir)
			require.NoError(t, os.Truncate(b, 3))
		}, false},
		// Between sync 1 and sync 2: any subset of the two renames.
		{"no rename kept", false, "temps-synced", func(*testing.T, string) {}, false},
		{"only the sidecar's rename kept", false, "temps-synced", func(t *testing.T, dir string) {
			_, side := temps(t, dir)
			require.NoError(t, os.Rename(side, sidecarPath(dir, testID)))
		}, false},
		{"only the blob's rename kept", false, "temps-synced", func(t *testing.T, dir string) {
			b, _ := temps(t, dir)
			require.NoError(t, os.Rename(b, blobPath(dir, testID)))
		}, false},
		{"only the blob's rename kept, replacing", true, "temps-synced", func(t *testing.T, dir string) {
			b, _ := temps(t, dir)
			require.NoError(t, os.Rename(b, blobPath(dir, testID)))
		}, false},
		{"both renames kept, replacing", true, "temps-synced", func(t *testing.T, dir string) {
			b, side := temps(t, dir)
			require.NoError(t, os.Rename(b, blobPath(dir, testID)))
			require.NoError(t, os.Rename(side, sidecarPath(dir, testID)))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openDiskMode(t, dir, SyncBatch)
			if tc.replace {
				receive(t, d, testID, old)
				require.NoError(t, os.WriteFile(blobPath(dir, testID), []byte("the rotten bytes"), 0o640))
			}
			d.crashAt = tc.crashAt
			_, _, err := d.Receive(ctx, testID, sum(next), int64(len(next)), bytes.NewReader(next))
			require.ErrorIs(t, err, errSimulatedCrash)
			tc.keep(t, dir)

			crash(t, d)
			d2 := openDiskMode(t, dir, SyncBatch)
			files := tree(t, dir)
			info, err := d2.Stat(ctx, testID)
			if !tc.intact {
				require.Equal(t, errs.NotFound, errs.KindOf(err), "files left: %v", files)
				require.Empty(t, files)
				return
			}
			require.NoError(t, err)
			require.Equal(t, sum(next), info.Checksum)
			c, err := d2.Rehash(ctx, testID)
			require.NoError(t, err)
			require.True(t, c.Intact())
			require.Len(t, files, 2)
		})
	}
}

func TestSecondOpenOfAHeldDirectoryTouchesNothing(t *testing.T) {
	if !dirlock.Supported {
		t.Skip("no directory lock on this system")
	}
	dir := t.TempDir()
	first := openDisk(t, dir)
	receive(t, first, testID, []byte("kept"))
	leftovers := []string{filepath.Join(dir, "01", "23", ".tmp-"+testID+"-1"), filepath.Join(dir, ".tmp-disk-id-1")}
	for _, p := range leftovers {
		require.NoError(t, os.WriteFile(p, []byte("the first store's business"), 0o640))
	}

	second, err := OpenDisk(dir, Options{Owner: "storage node"})
	require.Nil(t, second)
	require.Equal(t, errs.Conflict, errs.KindOf(err), "%v", err)
	require.ErrorIs(t, err, dirlock.ErrHeld)
	require.ErrorContains(t, err, "data directory "+dir+" is in use: another storage node")
	for _, p := range leftovers {
		require.FileExists(t, p, "the refused open cleaned nothing")
	}

	crash(t, first)
	again := openDisk(t, dir)
	require.Equal(t, 1, again.Recovery().TempFilesRemoved, "once the holder is gone the next open cleans up")
}

func TestOpenRecountsAndCleans(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir)
	ids := []string{testID, "0123ffff", "9999-0000-x", "abcd"}
	var total int64
	for i, id := range ids {
		data := bytes.Repeat([]byte{byte(i)}, 100*(i+1))
		receive(t, d, id, data)
		total += int64(len(data))
	}
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o640))
	}
	write("01/23/.tmp-"+testID+"-123", "half a write")
	write("ab/cd/.tmp-abcdzz-9", "another")
	write("ee/ff/eeffeeff.sha256", sum(nil)+"\n")                            // sidecar without blob
	write("ee/ff/eeff0000", "blob without sidecar")                          // blob without sidecar
	write("lost+found/something", "not ours")                                // foreign directory
	write("README", "not ours either")                                       // foreign file at the root
	write("ab/cd/zzzz", "a valid id in the wrong shard")                     // not ours
	write("ab/cd/zzzz.sha256", sum([]byte("a valid id in the wrong shard"))) // not ours

	crash(t, d)
	d2 := openDisk(t, dir)
	require.Equal(t, Recovery{Blobs: 4, Bytes: total, TempFilesRemoved: 2, OrphansRemoved: 2}, d2.Recovery())
	u, err := d2.Usage(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(4), u.Blobs)
	require.Equal(t, total, u.BytesUsed)
	files := tree(t, dir)
	for _, gone := range []string{"01/23/.tmp-" + testID + "-123", "ab/cd/.tmp-abcdzz-9", "ee/ff/eeffeeff.sha256", "ee/ff/eeff0000"} {
		require.NotContains(t, files, gone)
	}
	for _, kept := range []string{"lost+found/something", "README", "ab/cd/zzzz", "ab/cd/zzzz.sha256"} {
		require.Contains(t, files, kept, "files that are not the store's are left alone")
	}
	list, err := d2.Enumerate(context.Background(), "", 100)
	require.NoError(t, err)
	var got []string
	for _, info := range list {
		got = append(got, info.ID)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	require.Equal(t, want, got)
}

func TestMalformedSidecar(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir)
	data := []byte("some bytes")
	receive(t, d, testID, data)
	require.NoError(t, os.WriteFile(sidecarPath(dir, testID), []byte("not a checksum\n"), 0o640))
	ctx := context.Background()

	_, err := d.Stat(ctx, testID)
	require.Equal(t, errs.Corrupt, errs.KindOf(err))
	_, _, err = d.Fetch(ctx, testID)
	require.Equal(t, errs.Corrupt, errs.KindOf(err))
	c, err := d.Rehash(ctx, testID)
	require.NoError(t, err)
	require.False(t, c.Intact())
	require.Empty(t, c.Stored)
	list, err := d.Enumerate(ctx, "", 10)
	require.NoError(t, err)
	require.Equal(t, []Info{{ID: testID, Size: int64(len(data))}}, list, "listed without a checksum")

	_, created, err := d.Receive(ctx, testID, sum(data), -1, bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created, "a copy whose sidecar is unreadable is replaced")
	c, err = d.Rehash(ctx, testID)
	require.NoError(t, err)
	require.True(t, c.Intact())
}

func TestInvalidIDTouchesNothing(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir)
	// With the data directory gone, any file-system access would fail with
	// another kind of error: an Invalid answer shows validation came first.
	require.NoError(t, os.RemoveAll(dir))
	ctx := context.Background()
	for _, id := range []string{"../etc", "..", "a/b/c/d", "ABCD", "abc\x00d", ".tmp-x"} {
		_, _, err := d.Receive(ctx, id, sum(nil), 0, bytes.NewReader(nil))
		require.Equal(t, errs.Invalid, errs.KindOf(err), "Receive(%q)", id)
		_, err = d.Stat(ctx, id)
		require.Equal(t, errs.Invalid, errs.KindOf(err), "Stat(%q)", id)
		require.Equal(t, errs.Invalid, errs.KindOf(d.Remove(ctx, id)), "Remove(%q)", id)
	}
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, fs.ErrNotExist, "nothing was created")
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"removed", func(t *testing.T, dir string) { require.NoError(t, os.RemoveAll(dir)) }},
		{"replaced by a file", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.WriteFile(dir, nil, 0o640))
		}},
		{"replaced by another directory", func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.Mkdir(dir, 0o750))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			d := openDisk(t, dir)
			require.NoError(t, d.Check(ctx))
			tc.damage(t, dir)
			require.Equal(t, errs.Unavailable, errs.KindOf(d.Check(ctx)))
		})
	}
}

func TestCheckPassesWhenFull(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDisk(dir, Options{CapacityBytes: 10})
	require.NoError(t, err)
	receive(t, d, testID, []byte("0123456789"))
	_, _, err = d.Receive(context.Background(), "abcd", sum([]byte("x")), 1, bytes.NewReader([]byte("x")))
	require.Equal(t, errs.NoSpace, errs.KindOf(err))
	require.NoError(t, d.Check(context.Background()), "a full store is still usable for reads")
	u, err := d.Usage(context.Background())
	require.NoError(t, err)
	require.Zero(t, u.FreeBytes)
	require.Positive(t, u.TotalBytes)
}

func TestUsageReportsTheDevice(t *testing.T) {
	d := openDisk(t, t.TempDir())
	u, err := d.Usage(context.Background())
	require.NoError(t, err)
	require.Positive(t, u.TotalBytes)
	require.Positive(t, u.FreeBytes)
	require.LessOrEqual(t, u.FreeBytes, u.TotalBytes)
	require.Zero(t, u.CapacityBytes)
}

func TestOpenRejects(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o640))
	for _, tc := range []struct {
		dir  string
		opts Options
	}{
		{"", Options{}},
		{t.TempDir(), Options{CapacityBytes: -1}},
		{file, Options{}},
	} {
		_, err := OpenDisk(tc.dir, tc.opts)
		require.Error(t, err, "OpenDisk(%q, %+v)", tc.dir, tc.opts)
	}
}

func TestFSErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want errs.Kind
	}{
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, errs.NoSpace},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}, errs.NoSpace},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.EIO}, errs.Other},
		{errs.E(errs.Invalid, "bad body"), errs.Invalid},
	} {
		got := fsError(tc.err, "op")
		require.Equal(t, tc.want, errs.KindOf(got), "%v", tc.err)
		require.ErrorIs(t, got, tc.err)
	}
	require.NoError(t, fsError(nil, "op"))
}
