package blob

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	acct     accounting
	locks    idLocks
	closed   atomic.Bool
	recovery Recovery
	identity string
	mode     SyncMode
	syncer   *syncGroup // batch mode only
	batchMax int64      // batch mode: larger copies are written in file mode

	// crashAt names a step at which Receive stops as if the process died
	// there, leaving its files behind; tests use it to check the crash windows.
	crashAt string
}

var _ Store = (*Disk)(nil)

// Recovery is what OpenDisk found and cleaned up.
type Recovery struct {
	// Blobs and Bytes are the blobs found intact in layout (blob and sidecar).
	Blobs int64
	Bytes int64
	// TempFilesRemoved counts writes a crash interrupted.
	TempFilesRemoved int
	// OrphansRemoved counts sidecars without a blob and blobs without a sidecar.
	OrphansRemoved int
}

// errSimulatedCrash is returned at a crashAt step.
var errSimulatedCrash = errors.New("simulated crash")

// OpenDisk opens (creating it if needed) a store rooted at dir. It locks the
// directory first (a directory another process holds is errs.Conflict, and
// nothing in it has been read or removed then), reads the directory's
// identity, recording one at the first open (a malformed one is
// errs.Invalid), and walks the tree once to count the blobs and to delete
// what interrupted writes and removals left behind.
func OpenDisk(dir string, opts Options) (*Disk, error) {
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
	d := &Disk{root: root, rootDir: rootDir, lock: lock, rootInfo: fi, acct: accounting{capacity: opts.CapacityBytes}, mode: mode, batchMax: batchMax}
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
	d.acct.blobs, d.acct.used = d.recovery.Blobs, d.recovery.Bytes
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

// Receive implements Receiver.
func (d *Disk) Receive(ctx context.Context, id, checksum string, size int64, r io.Reader) (Info, bool, error) {
	if err := ValidateID(id); err != nil {
		return Info{}, false, err
	}
	sum, err := ValidateChecksum(checksum)
	if err != nil {
		return Info{}, false, err
	}
	if d.closed.Load() {
		return Info{}, false, errClosed()
	}
	unlock, err := d.locks.lock(ctx, id)
	if err != nil {
		return Info{}, false, err
	}
	defer unlock()

	cur, err := d.lookup(id)
	if err != nil {
		return Info{}, false, err
	}
	if cur.present && cur.sumErr == nil {
		actual, n, err := d.hashBlob(ctx, id)
		if err != nil {
			return Info{}, false, err
		}
		if actual == cur.sum {
			if cur.sum == sum {
				return Info{ID: id, Size: n, Checksum: sum}, false, nil
			}
			return Info{}, false, errs.E(errs.Conflict, "blob %s is already stored with checksum %s, not %s", id, cur.sum, sum)
		}
		// The held copy is corrupt: fall through and replace it.
	}
	if size >= 0 {
		if err := d.acct.checkRoom(size); err != nil {
			return Info{}, false, err
		}
	}
	info, err := d.write(ctx, id, sum, size, r, cur)
	if err != nil {
		return Info{}, false, err
	}
	return info, true, nil
}

// write runs the publication sequence of the copy's sync mode (see Disk).
func (d *Disk) write(ctx context.Context, id, sum string, size int64, r io.Reader, cur held) (Info, error) {
	mode := d.copyMode(size)
	dir, err := d.ensureShard(id, mode)
	if err != nil {
		return Info{}, err
	}
	t, err := d.receiveTemp(ctx, dir, id, sum, size, r, mode)
	if err != nil {
		return Info{}, err
	}
	if mode == SyncBatch {
		return d.publishBatched(ctx, t, cur)
	}
	return d.publishSynced(t, cur)
}

// copyMode is the sequence a copy of the declared size is written with: the
// store's mode, except that in batch mode a copy larger than batchMax is
// written in file mode. A size of -1 (unknown) stays in batch mode.
func (d *Disk) copyMode(size int64) SyncMode {
	if d.mode == SyncBatch && size > d.batchMax {
		return SyncFile
	}
	return d.mode
}

// tempBlob is a received and verified body in a temp file, not yet published.
type tempBlob struct {
	id, sum, dir, path string
	size               int64
	// reserved is what the body holds of the store's capacity until it is
	// published or discarded.
	reserved int64
}

// discard deletes an unpublished body and returns its reservation.
func (d *Disk) discard(t tempBlob) {
	d.acct.release(t.reserved)
	_ = os.Remove(t.path) // best effort: OpenDisk removes what is left
}

// crash reports whether a test asked Receive to stop at step.
func (d *Disk) crash(step string) bool { return d.crashAt == step }

// receiveTemp copies the body into a temp file in dir, hashing it, and
// checks it against the declared checksum and size. In file mode the temp
// file is fsynced. On failure nothing is left behind.
func (d *Disk) receiveTemp(ctx context.Context, dir, id, sum string, size int64, r io.Reader, mode SyncMode) (tempBlob, error) {
	f, err := os.CreateTemp(dir, tempPattern(id))
	if err != nil {
		return tempBlob{}, fsError(err, "blob %s: create temp file", id)
	}
	w := &reservingWriter{w: f, acct: &d.acct}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close() // may already be closed; the file is going away either way
			d.discard(tempBlob{path: f.Name(), reserved: w.reserved})
		}
	}()
	n, actual, err := receiveCopy(ctx, w, r, size)
	if err != nil {
		return tempBlob{}, fsError(err, "blob %s: write", id)
	}
	if actual != sum {
		return tempBlob{}, errs.E(errs.Corrupt, "blob %s: body hashes to %s but %s was declared", id, actual, sum)
	}
	if mode == SyncFile {
		if err := f.Sync(); err != nil {
			return tempBlob{}, fsError(err, "blob %s: sync", id)
		}
	}
	if err := f.Close(); err != nil {
		return tempBlob{}, fsError(err, "blob %s: close", id)
	}
	ok = true
	return tempBlob{id: id, sum: sum, dir: dir, path: f.Name(), size: n, reserved: w.reserved}, nil
}

// publishSynced is file mode's publication: steps 2 to 4 on Disk, each
// fsynced.
func (d *Disk) publishSynced(t tempBlob, cur held) (Info, error) {
	id, dir := t.id, t.dir
	if d.crash("blob-synced") {
		return Info{}, errSimulatedCrash
	}
	if cur.present {
		if err := os.Remove(blobPath(d.root, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.discard(t)
			return Info{}, fsError(err, "blob %s: remove corrupt copy", id)
		}
		d.acct.drop(cur.size)
		if err := syncDir(dir); err != nil {
			d.discard(t)
			return Info{}, fsError(err, "blob %s: sync directory", id)
		}
		if d.crash("old-removed") {
			return Info{}, errSimulatedCrash
		}
	}
	if err := writeSidecar(dir, id, t.sum); err != nil {
		d.discard(t)
		return Info{}, err
	}
	if d.crash("sidecar-published") {
		return Info{}, errSimulatedCrash
	}
	if err := os.Rename(t.path, blobPath(d.root, id)); err != nil {
		_ = os.Remove(sidecarPath(d.root, id)) // leave no sidecar without its blob
		d.discard(t)
		return Info{}, fsError(err, "blob %s: publish", id)
	}
	d.acct.publish(t.reserved)
	if err := syncDir(dir); err != nil {
		return Info{}, fsError(err, "blob %s: sync directory", id)
	}
	return Info{ID: id, Size: t.size, Checksum: t.sum}, nil
}

// writeSidecar durably publishes the sidecar of id holding sum.
func writeSidecar(dir, id, sum string) error {
	f, err := os.CreateTemp(dir, tempPattern(id))
	if err != nil {
		return fsError(err, "blob %s: create sidecar temp file", id)
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.WriteString(sum + "\n"); err != nil {
		return fsError(err, "blob %s: write sidecar", id)
	}
	if err := f.Sync(); err != nil {
		return fsError(err, "blob %s: sync sidecar", id)
	}
	if err := f.Close(); err != nil {
		return fsError(err, "blob %s: close sidecar", id)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, id+sidecarExt)); err != nil {
		return fsError(err, "blob %s: publish sidecar", id)
	}
	done = true
	return fsError(syncDir(dir), "blob %s: sync directory", id)
}

// publishBatched is batch mode's publication: steps 1 (sidecar and unlinks)
// to 4 on Disk, with the two shared syncs.
func (d *Disk) publishBatched(ctx context.Context, t tempBlob, cur held) (Info, error) {
	id := t.id
	blobName, sideName := blobPath(d.root, id), sidecarPath(d.root, id)
	side, err := writeSidecarTemp(t.dir, id, t.sum)
	if err != nil {
		d.discard(t)
		return Info{}, err
	}
	fail := func(err error) (Info, error) {
		d.discard(t)
		_ = os.Remove(side) // best effort: OpenDisk removes what is left
		return Info{}, err
	}
	if d.crash("temps-written") {
		return Info{}, errSimulatedCrash
	}
	// A corrupt copy being replaced goes, and so does anything else under the
	// final names, so that after sync 1 no old name is left to pair with a new
	// one.
	for _, p := range []string{blobName, sideName} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(fsError(err, "blob %s: remove old copy", id))
		}
	}
	if cur.present {
		d.acct.drop(cur.size)
		if d.crash("old-removed") {
			return Info{}, errSimulatedCrash
		}
	}
	if err := d.groupSync(ctx, id); err != nil {
		return fail(err)
	}
	if d.crash("temps-synced") {
		return Info{}, errSimulatedCrash
	}
	if err := os.Rename(side, sideName); err != nil {
		return fail(fsError(err, "blob %s: publish sidecar", id))
	}
	if d.crash("sidecar-published") {
		return Info{}, errSimulatedCrash
	}
	if err := os.Rename(t.path, blobName); err != nil {
		_ = os.Remove(sideName) // leave no sidecar without its blob
		return fail(fsError(err, "blob %s: publish", id))
	}
	d.acct.publish(t.reserved)
	if d.crash("blob-published") {
		return Info{}, errSimulatedCrash
	}
	if err := d.groupSync(ctx, id); err != nil {
		// Not known to be durable, so not published: take the names back.
		// Whichever unlink a crash loses, recovery finds either the intact
		// blob (its bytes were synced) or half of it, which it deletes.
		_ = os.Remove(blobName)
		_ = os.Remove(sideName)
		d.acct.drop(t.reserved)
		return Info{}, err
	}
	return Info{ID: id, Size: t.size, Checksum: t.sum}, nil
}

// writeSidecarTemp writes the sidecar of id holding sum to a new temp file in
// dir, without syncing it, and returns its path.
func writeSidecarTemp(dir, id, sum string) (string, error) {
	f, err := os.CreateTemp(dir, tempPattern(id))
	if err != nil {
		return "", fsError(err, "blob %s: create sidecar temp file", id)
	}
	_, werr := f.WriteString(sum + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return "", fsError(err, "blob %s: write sidecar", id)
	}
	return f.Name(), nil
}

// groupSync waits for a shared sync (batch mode) on behalf of a write or
// removal of id.
func (d *Disk) groupSync(ctx context.Context, id string) error {
	err := d.syncer.Sync(ctx)
	switch {
	case err == nil:
		return nil
	case d.closed.Load():
		return errs.Wrap(errs.Unavailable, err, "blob %s: store closed before the write was durable", id)
	case errs.KindOf(err) == errs.Unavailable:
		return errs.Wrap(errs.Unavailable, err, "blob %s", id)
	}
	return fsError(err, "blob %s: sync", id)
}

// ensureShard creates the directories of id's shard for a copy written in
// mode. In file mode each new entry is made durable in its parent here; in
// batch mode the caller's first sync does it, before anything is published in
// them. A file-mode copy in a batch-mode store cannot count on that: the
// directories may have been created by a batched write whose sync has not
// happened yet, so both parents are fsynced whether or not this call created
// anything (two directory fsyncs, small beside the large copy that pays them).
func (d *Disk) ensureShard(id string, mode SyncMode) (string, error) {
	a, b := shard(id)
	l1 := filepath.Join(d.root, a)
	dir := filepath.Join(l1, b)
	steps := []struct{ dir, parent string }{{l1, d.root}, {dir, l1}}
	alone := mode == SyncFile && d.mode == SyncBatch
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && !alone {
		return dir, nil
	}
	for _, step := range steps {
		err := os.Mkdir(step.dir, 0o750)
		created := err == nil
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fsError(err, "blob %s: create directory", id)
		}
		if mode == SyncBatch || !(created || alone) {
			continue
		}
		if err := syncDir(step.parent); err != nil {
			return "", fsError(err, "blob %s: sync directory", id)
		}
	}
	return dir, nil
}

// held is what lookup found for an id.
type held struct {
	present bool
	size    int64
	sum     string
	// sumErr is set when the sidecar exists but cannot be parsed.
	sumErr error
}

// lookup reports whether id is present: blob and sidecar both exist.
func (d *Disk) lookup(id string) (held, error) {
	sum, err := readSidecar(sidecarPath(d.root, id))
	var sumErr error
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return held{}, nil
	case errs.Is(err, errs.Corrupt):
		sumErr = err
	case err != nil:
		return held{}, fsError(err, "blob %s: read sidecar", id)
	}
	fi, err := os.Stat(blobPath(d.root, id))
	if errors.Is(err, fs.ErrNotExist) {
		return held{}, nil
	}
	if err != nil {
		return held{}, fsError(err, "blob %s: stat", id)
	}
	if !fi.Mode().IsRegular() {
		return held{}, errs.E(errs.Other, "blob %s: %s is not a regular file", id, blobPath(d.root, id))
	}
	return held{present: true, size: fi.Size(), sum: sum, sumErr: sumErr}, nil
}

// readSidecar returns the checksum a sidecar holds; a malformed one is
// errs.Corrupt.
func readSidecar(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var buf [80]byte
	n, err := io.ReadFull(f, buf[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	sum, verr := ValidateChecksum(strings.TrimSpace(string(buf[:n])))
	if verr != nil {
		return "", errs.Wrap(errs.Corrupt, verr, "sidecar %s is malformed", path)
	}
	return sum, nil
}

func (d *Disk) hashBlob(ctx context.Context, id string) (string, int64, error) {
	f, err := os.Open(blobPath(d.root, id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, errNotFound(id)
	}
	if err != nil {
		return "", 0, fsError(err, "blob %s: open", id)
	}
	defer f.Close()
	sum, n, err := hashReader(ctx, f)
	if err != nil {
		return "", 0, fsError(err, "blob %s: read", id)
	}
	return sum, n, nil
}

// Stat implements Statter.
func (d *Disk) Stat(_ context.Context, id string) (Info, error) {
	h, err := d.present(id)
	if err != nil {
		return Info{}, err
	}
	if h.sumErr != nil {
		return Info{}, h.sumErr
	}
	return Info{ID: id, Size: h.size, Checksum: h.sum}, nil
}

// present validates id and looks it up, answering errs.NotFound when absent.
func (d *Disk) present(id string) (held, error) {
	if err := ValidateID(id); err != nil {
		return held{}, err
	}
	if d.closed.Load() {
		return held{}, errClosed()
	}
	h, err := d.lookup(id)
	if err != nil {
		return held{}, err
	}
	if !h.present {
		return held{}, errNotFound(id)
	}
	return h, nil
}

// Fetch implements Fetcher. The reader is the blob's *os.File, so an HTTP
// server can send it with sendfile.
func (d *Disk) Fetch(_ context.Context, id string) (io.ReadSeekCloser, Info, error) {
	if err := ValidateID(id); err != nil {
		return nil, Info{}, err
	}
	if d.closed.Load() {
		return nil, Info{}, errClosed()
	}
	// The sidecar first, then the blob: a blob is present only with both.
	// Opening the blob and asking the open file for its size costs one path
	// lookup fewer than lookup's stat followed by an open.
	sum, err := readSidecar(sidecarPath(d.root, id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, Info{}, errNotFound(id)
	case err != nil && errs.Is(err, errs.Corrupt):
		if _, serr := os.Stat(blobPath(d.root, id)); errors.Is(serr, fs.ErrNotExist) {
			return nil, Info{}, errNotFound(id)
		}
		return nil, Info{}, err
	case err != nil:
		return nil, Info{}, fsError(err, "blob %s: read sidecar", id)
	}
	f, err := os.Open(blobPath(d.root, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, errNotFound(id)
	}
	if err != nil {
		return nil, Info{}, fsError(err, "blob %s: open", id)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, fsError(err, "blob %s: stat", id)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, Info{}, errs.E(errs.Other, "blob %s: %s is not a regular file", id, blobPath(d.root, id))
	}
	return f, Info{ID: id, Size: fi.Size(), Checksum: sum}, nil
}

// Rehash implements Rehasher.
func (d *Disk) Rehash(ctx context.Context, id string) (Check, error) {
	h, err := d.present(id)
	if err != nil {
		return Check{}, err
	}
	actual, n, err := d.hashBlob(ctx, id)
	if err != nil {
		return Check{}, err
	}
	return Check{ID: id, Size: n, Stored: h.sum, Actual: actual}, nil
}

// Remove implements Remover.
func (d *Disk) Remove(ctx context.Context, id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if d.closed.Load() {
		return errClosed()
	}
	unlock, err := d.locks.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	h, err := d.lookup(id)
	if err != nil {
		return err
	}
	removed := false
	for _, p := range []string{blobPath(d.root, id), sidecarPath(d.root, id)} {
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = true
		case errors.Is(err, fs.ErrNotExist):
		default:
			return fsError(err, "blob %s: remove", id)
		}
	}
	if h.present {
		d.acct.drop(h.size)
	}
	switch {
	case d.mode == SyncBatch:
		// Even with nothing to unlink: an earlier removal that stopped waiting
		// for its sync may have unlinked the files without their absence
		// being durable yet.
		return d.groupSync(ctx, id)
	case removed:
		return fsError(syncDir(shardDir(d.root, id)), "blob %s: sync directory", id)
	}
	return nil
}

// Enumerate implements Enumerator by walking the tree in id order, skipping
// the shards that hold only ids at or before the cursor.
func (d *Disk) Enumerate(ctx context.Context, after string, limit int) ([]Info, error) {
	if err := ValidateCursor(after); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, errs.E(errs.Invalid, "limit %d must be positive", limit)
	}
	if d.closed.Load() {
		return nil, errClosed()
	}
	var out []Info
	l1s, err := shardNames(d.root)
	if err != nil {
		return nil, fsError(err, "enumerate %s", d.root)
	}
	for _, a := range l1s {
		if a < prefix(after, 0) {
			continue
		}
		l2s, err := shardNames(filepath.Join(d.root, a))
		if err != nil {
			return nil, fsError(err, "enumerate %s", a)
		}
		for _, b := range l2s {
			if a == prefix(after, 0) && b < prefix(after, 2) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, errs.Wrap(errs.Unavailable, err, "enumerate stopped")
			}
			if out, err = d.enumerateLeaf(a, b, after, limit, out); err != nil {
				return nil, err
			}
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// prefix returns the two characters of s starting at i, or what there is.
func prefix(s string, i int) string {
	if i >= len(s) {
		return ""
	}
	return s[i:min(i+2, len(s))]
}

func (d *Disk) enumerateLeaf(a, b, after string, limit int, out []Info) ([]Info, error) {
	dir := filepath.Join(d.root, a, b)
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		return out, fsError(err, "enumerate %s", dir)
	}
	sidecars := make(map[string]bool, len(entries)/2)
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), sidecarExt); ok {
			sidecars[id] = true
		}
	}
	for _, e := range entries {
		id := e.Name()
		if id <= after || !sidecars[id] || !e.Type().IsRegular() || ValidateID(id) != nil || !inShard(id, a, b) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return out, fsError(err, "enumerate %s", id)
		}
		// A malformed sidecar lists the blob with no checksum, so a caller
		// comparing checksums sees that this copy is not a good one.
		sum, err := readSidecar(sidecarPath(d.root, id))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil && !errs.Is(err, errs.Corrupt) {
			return out, fsError(err, "enumerate %s", id)
		}
		out = append(out, Info{ID: id, Size: fi.Size(), Checksum: sum})
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// shardNames lists the shard directories under dir in order.
func shardNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() && isShardName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
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

// recoverTree counts the blobs and deletes crash leftovers (see Disk).
func (d *Disk) recoverTree() error {
	l1s, err := shardNames(d.root)
	if err != nil {
		return fsError(err, "blob store: read %s", d.root)
	}
	for _, a := range l1s {
		l2s, err := shardNames(filepath.Join(d.root, a))
		if err != nil {
			return fsError(err, "blob store: read %s", a)
		}
		for _, b := range l2s {
			if err := d.recoverLeaf(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *Disk) recoverLeaf(a, b string) error {
	dir := filepath.Join(d.root, a, b)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fsError(err, "blob store: read %s", dir)
	}
	blobs := make(map[string]int64)
	sidecars := make(map[string]bool)
	var leftovers []string
	for _, e := range entries {
		name := e.Name()
		if isTempName(name) {
			leftovers = append(leftovers, name)
			d.recovery.TempFilesRemoved++
			continue
		}
		id, isSidecar := strings.CutSuffix(name, sidecarExt)
		if !e.Type().IsRegular() || ValidateID(id) != nil || !inShard(id, a, b) {
			continue // not ours: leave it alone
		}
		if isSidecar {
			sidecars[id] = true
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return fsError(err, "blob store: stat %s", name)
		}
		blobs[id] = fi.Size()
	}
	for id, size := range blobs {
		if sidecars[id] {
			d.recovery.Blobs++
			d.recovery.Bytes += size
			continue
		}
		leftovers = append(leftovers, id)
		d.recovery.OrphansRemoved++
	}
	for id := range sidecars {
		if _, ok := blobs[id]; !ok {
			leftovers = append(leftovers, id+sidecarExt)
			d.recovery.OrphansRemoved++
		}
	}
	for _, name := range leftovers {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "blob store: remove leftover %s", name)
		}
	}
	if len(leftovers) > 0 {
		return fsError(syncDir(dir), "blob store: sync %s", dir)
	}
	return nil
}

// syncDir makes the entries of dir durable. It is a variable so that tests
// can see which directories a write syncs.
var syncDir = func(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
