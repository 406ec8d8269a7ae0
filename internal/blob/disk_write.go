// Disk's write path: Receive, the two publication sequences (file mode's
// fsyncs, batch mode's shared syncs) and the shard directories a write
// creates.

package blob

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dfs-project/dfs/internal/errs"
)

// errSimulatedCrash is returned at a crashAt step.
var errSimulatedCrash = errors.New("simulated crash")

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
	d.seen.add(id) // before any file of id exists (heldFilter)
	mode := d.copyMode(size)
	dir, err := d.ensureShard(id, mode)
	if err != nil {
		return Info{}, err
	}
	t, err := d.receiveTemp(ctx, dir, id, sum, size, r, mode)
	if err != nil {
		return Info{}, err
	}
	var info Info
	if mode == SyncBatch {
		info, err = d.publishBatched(ctx, t, cur)
	} else {
		info, err = d.publishSynced(t, cur)
	}
	if err == nil && t.size > WholeCheckMax {
		// Best effort: a blob without its sums reads as one written
		// before they existed, checked whole by its reader.
		_ = writeBlockSums(dir, id, BlockSums{Checksum: sum, Size: t.size, Sums: t.sums})
	}
	return info, err
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
	sums               []uint32 // the body's block sums
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
	w := &reservingWriter{w: f, acct: d.acct}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close() // may already be closed; the file is going away either way
			d.discard(tempBlob{path: f.Name(), reserved: w.reserved})
		}
	}()
	var summer blockSummer
	n, actual, err := receiveCopy(ctx, io.MultiWriter(w, &summer), r, size)
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
	return tempBlob{id: id, sum: sum, dir: dir, path: f.Name(), size: n, sums: summer.finish(), reserved: w.reserved}, nil
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
