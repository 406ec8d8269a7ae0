// The Disk store itself: its type and the promises every operation keeps
// (the comment on Disk), opening a data directory, and what is not about one
// blob (Usage, Check, Close). Each operation has its file: disk_write.go,
// disk_read.go, disk_remove.go, disk_enumerate.go and disk_recover.go, and
// layout.go holds the tree's paths. Files without the disk_ prefix (other
// than layout.go) are not tied to the sharded tree and serve any layout.

package blob

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/dfs-project/dfs/internal/dirlock"
	"github.com/dfs-project/dfs/internal/errs"
)

// Disk is a Store kept in a local directory tree (layout.go).
//
// A blob counts as present only when both the blob and its sidecar exist
// under their final names. Nothing is acknowledged before it is on stable
// storage, and a crash at any point leaves each blob either absent or
// present and intact, never a published name over bytes that may not have
// reached the disk. How a write gets there depends on Options.SyncMode.
//
// In file mode the write publishes the sidecar before the blob, each step
// durable, by an fsync of what it changed, before the next:
//
//  1. the body is copied into a temp file in the blob's own directory, hashed
//     on the way, and fsynced; if it does not hash to the declared checksum
//     the temp file is removed and nothing is published;
//  2. when a corrupt copy is being replaced, the old blob is unlinked and the
//     directory fsynced;
//  3. the sidecar is written to a temp file, fsynced, renamed into place, and
//     the directory fsynced;
//  4. the blob's temp file is renamed into place and the directory fsynced.
//
// A crash before step 4 therefore leaves no blob (at worst a temp file and a
// sidecar without its blob), and after it a blob whose sidecar matches it.
//
// In batch mode a copy larger than Options.BatchSyncMax follows file mode's
// steps, with its own fsyncs, plus an fsync of both shard directories'
// parents (a batched write may have created them without its sync yet); each
// copy's guarantees hold on their own, so the two kinds mix freely. For every
// other copy no file is fsynced. Two syncs of the whole file system
// (syncfs), each shared by every write waiting for one when it starts
// (syncGroup), divide the write into a data phase and a naming phase:
//
//  1. the body goes to a temp file as above, hashed and verified, and the
//     sidecar to a second temp file, neither synced; whatever is under the
//     blob's and the sidecar's final names (a corrupt copy being replaced) is
//     unlinked;
//  2. sync 1: the bytes of both temp files, the directories the write
//     created and those unlinks are on disk;
//  3. the sidecar is renamed into place, then the blob;
//  4. sync 2: the new names are on disk, and only then does the write succeed.
//
// Until sync 1 completes, no final name refers to the new bytes, so a crash
// leaves temp files (with any content, which does not matter) and, at worst,
// the corrupt copy being replaced still there or half unlinked: recovery
// deletes the temp files and a blob or sidecar left alone, and an old copy
// still whole stays the corrupt copy it was. After sync 1, the new bytes and
// the absence of the old names are durable; a crash before sync 2 completes
// may keep any subset of the two renames, in any order (a file system without
// a journal orders nothing). Both kept is the new blob, present and intact;
// one alone is a blob or a sidecar without its partner, which recovery
// deletes with the remaining temp file. The old names being gone since sync 1
// is what keeps a new blob from ever pairing with an old sidecar. When sync 2
// fails, or the writer stops waiting for it, the names are unlinked again and
// the write fails.
//
// The kernel reports a write-back error to only one syncfs, so after a failed
// sync a Disk in batch mode refuses every write and removal, and Check fails,
// until it is reopened. syncfs flushes the file system holding the data
// directory, including everyone else's data on it: the mode pays off most on
// a file system of its own, and it assumes that the data directory's tree is
// one file system (a shard directory mounted from another device would not be
// synced).
//
// New shard directories are fsynced into their parents in file mode; in batch
// mode sync 1 of the write that needs them covers them. Removal unlinks the
// blob before the sidecar, so a crash in between also leaves an absent blob,
// and returns once the directory is fsynced (file mode) or a shared sync has
// completed (batch mode). OpenDisk deletes what a crash left behind: temp
// files, sidecars without a blob and blobs without a sidecar.
//
// Writers and removers of one id are serialised, until the write is durable
// or undone; readers never wait. The number of blobs and bytes is counted
// once by OpenDisk and kept up to date, so Usage does not walk the tree.
type Disk struct {
	root string
	// rootDir stays open so that the root's inode cannot be reused while the
	// store runs: Check can then tell the directory it opened from one that
	// replaced it. In batch mode it is also the file the syncs go through,
	// open before the first write, so that they report every write-back
	// error since.
	rootDir *os.File
	// lock keeps a second process off the directory while this one runs.
	lock     *dirlock.Lock
	rootInfo fs.FileInfo
	acct     *accounting
	locks    idLocks
	closed   atomic.Bool
	recovery Recovery
	identity string
	mode     SyncMode
	syncer   *syncGroup // batch mode only
	batchMax int64      // batch mode: larger copies are written in file mode
	// seen holds every id the tree may have a file of, so that looking up
	// an id it never held costs no system call.
	seen *heldFilter

	// crashAt names a step at which Receive stops as if the process died
	// there, leaving its files behind; tests use it to check the crash windows.
	crashAt string
}

var _ Store = (*Disk)(nil)

// OpenDisk opens (creating it if needed) a store rooted at dir. It locks the
// directory first (a directory another process holds is errs.Conflict, and
// nothing in it has been read or removed then), reads the directory's
// identity, recording one at the first open (a malformed one is
// errs.Invalid), and walks the tree once to count the blobs and to delete
// what interrupted writes and removals left behind.
func OpenDisk(dir string, opts Options) (*Disk, error) {
	return openDiskLayout(dir, opts, LayoutFiles, &accounting{capacity: opts.CapacityBytes})
}

// openDiskLayout opens the tree of a data directory whose recorded layout must be
// layout (layoutmark.go), counting its blobs into acct, which a Volumes store
// shares with the Disk that keeps its large blobs.
func openDiskLayout(dir string, opts Options, layout Layout, acct *accounting) (*Disk, error) {
	if dir == "" {
		return nil, errs.E(errs.Invalid, "blob store: no data directory given")
	}
	if opts.CapacityBytes < 0 {
		return nil, errs.E(errs.Invalid, "blob store: capacity %d is negative", opts.CapacityBytes)
	}
	mode := opts.SyncMode
	if mode == "" {
		mode = DefaultSyncMode()
	}
	switch mode {
	case SyncFile:
	case SyncBatch:
		if err := BatchSyncSupported(); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "blob store: sync mode %s is not available", mode)
		}
	default:
		return nil, errs.E(errs.Invalid, "blob store: unknown sync mode %q (use %s or %s)", mode, SyncBatch, SyncFile)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "blob store: data directory %q", dir)
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fsError(err, "blob store: create data directory %s", root)
	}
	lock, err := dirlock.Acquire(root, opts.Owner)
	if err != nil {
		return nil, err
	}
	rootDir, err := os.Open(root)
	if err != nil {
		lock.Close()
		return nil, fsError(err, "blob store: data directory %s", root)
	}
	fi, err := rootDir.Stat()
	if err == nil && !fi.IsDir() {
		err = errs.E(errs.Invalid, "blob store: %s is not a directory", root)
	}
	if err != nil {
		rootDir.Close()
		lock.Close()
		return nil, fsError(err, "blob store: data directory %s", root)
	}
	batchMax := opts.BatchSyncMax
	if batchMax <= 0 {
		batchMax = DefaultBatchSyncMax
	}
	if err := checkLayout(root, layout); err != nil {
		rootDir.Close()
		lock.Close()
		return nil, err
	}
	d := &Disk{root: root, rootDir: rootDir, lock: lock, rootInfo: fi, acct: acct, mode: mode, batchMax: batchMax,
		seen: newHeldFilter()}
	if mode == SyncBatch {
		d.syncer = newSyncGroup(func() error { return syncFS(rootDir) })
	}
	if d.identity, err = loadIdentity(root); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.recoverTree(); err != nil {
		d.Close()
		return nil, err
	}
	d.acct.add(d.recovery.Blobs, d.recovery.Bytes)
	return d, nil
}

// Dir returns the store's absolute root directory.
func (d *Disk) Dir() string { return d.root }

// Identity implements Identifier: the UUID recorded in the data directory at
// its first open (identity.go).
func (d *Disk) Identity() string { return d.identity }

// Recovery reports what OpenDisk found and cleaned up.
func (d *Disk) Recovery() Recovery { return d.recovery }

// SyncMode reports how the store makes writes durable.
func (d *Disk) SyncMode() SyncMode { return d.mode }

// SyncStats counts the shared syncs of batch mode; in file mode it is zero.
func (d *Disk) SyncStats() SyncStats {
	if d.syncer == nil {
		return SyncStats{}
	}
	return d.syncer.snapshot()
}

// Usage implements UsageReporter. The counts are always filled in; an error
// reading the device's free space is returned alongside them.
func (d *Disk) Usage(context.Context) (Usage, error) {
	u := Usage{CapacityBytes: d.acct.capacity}
	u.Blobs, u.BytesUsed = d.acct.snapshot()
	free, total, err := diskSpace(d.root)
	if err != nil {
		return u, errs.Wrap(errs.Unavailable, err, "free space of %s", d.root)
	}
	u.FreeBytes, u.TotalBytes = free, total
	if room := d.acct.free(); room >= 0 {
		u.FreeBytes = min(free, room)
	}
	return u, nil
}

// Check implements Checker: the data directory must still be the one opened,
// a directory, listable and writable. A full device passes.
func (d *Disk) Check(context.Context) error {
	if d.closed.Load() {
		return errClosed()
	}
	fi, err := os.Stat(d.root)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "data directory")
	}
	if !fi.IsDir() {
		return errs.E(errs.Unavailable, "data directory %s is not a directory", d.root)
	}
	if !os.SameFile(fi, d.rootInfo) {
		return errs.E(errs.Unavailable, "data directory %s was replaced after start", d.root)
	}
	f, err := os.Open(d.root)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "data directory")
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err != nil && err != io.EOF {
		return errs.Wrap(errs.Unavailable, err, "data directory %s is not readable", d.root)
	}
	if err := accessible(d.root); err != nil {
		return errs.Wrap(errs.Unavailable, err, "data directory %s is not usable", d.root)
	}
	if d.syncer != nil {
		if err := d.syncer.err(); err != nil {
			return errs.Wrap(errs.Unavailable, err, "data directory %s", d.root)
		}
	}
	return nil
}

// Close marks the store closed: later calls fail with errs.Unavailable.
// Calls in flight finish, except that a batch-mode write or removal still
// waiting for its sync fails (the sync goes through rootDir, closed here).
func (d *Disk) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return errors.Join(d.rootDir.Close(), d.lock.Close())
}
