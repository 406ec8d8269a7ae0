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

	"github.com/dfs-project/dfs/internal/errs"
)

// Disk is a Store kept in a local directory tree (layout.go).
//
// A write publishes the sidecar before the blob, each step durable before the
// next:
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
// A blob counts as present only when both the blob and its sidecar exist. A
// crash before step 4 therefore leaves no blob (at worst a temp file and a
// sidecar without its blob), and after it a blob whose sidecar matches it.
// Removal unlinks the blob before the sidecar, so a crash in between also
// leaves an absent blob. OpenDisk deletes what a crash left behind: temp files,
// sidecars without a blob and blobs without a sidecar (which no sequence above
// produces; such a blob cannot be verified, so it is dropped like the rest).
//
// Writers and removers of one id are serialised; readers never wait. The
// number of blobs and bytes is counted once by OpenDisk and kept up to date,
// so Usage does not walk the tree.
type Disk struct {
	root string
	// rootDir stays open so that the root's inode cannot be reused while the
	// store runs: Check can then tell the directory it opened from one that
	// replaced it.
	rootDir  *os.File
	rootInfo fs.FileInfo
	acct     accounting
	locks    idLocks
	closed   atomic.Bool
	recovery Recovery

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

// OpenDisk opens (creating it if needed) a store rooted at dir. It walks the
// tree once to count the blobs and to delete what interrupted writes and
// removals left behind.
func OpenDisk(dir string, opts Options) (*Disk, error) {
	if dir == "" {
		return nil, errs.E(errs.Invalid, "blob store: no data directory given")
	}
	if opts.CapacityBytes < 0 {
		return nil, errs.E(errs.Invalid, "blob store: capacity %d is negative", opts.CapacityBytes)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "blob store: data directory %q", dir)
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		return nil, fsError(err, "blob store: create data directory %s", root)
	}
	rootDir, err := os.Open(root)
	if err != nil {
		return nil, fsError(err, "blob store: data directory %s", root)
	}
	fi, err := rootDir.Stat()
	if err == nil && !fi.IsDir() {
		err = errs.E(errs.Invalid, "blob store: %s is not a directory", root)
	}
	if err != nil {
		rootDir.Close()
		return nil, fsError(err, "blob store: data directory %s", root)
	}
	d := &Disk{root: root, rootDir: rootDir, rootInfo: fi, acct: accounting{capacity: opts.CapacityBytes}}
	if err := d.recoverTree(); err != nil {
		rootDir.Close()
		return nil, err
	}
	d.acct.blobs, d.acct.used = d.recovery.Blobs, d.recovery.Bytes
	return d, nil
}

// Dir returns the store's absolute root directory.
func (d *Disk) Dir() string { return d.root }

// Recovery reports what OpenDisk found and cleaned up.
func (d *Disk) Recovery() Recovery { return d.recovery }

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

// write runs the publication sequence described on Disk.
func (d *Disk) write(ctx context.Context, id, sum string, size int64, r io.Reader, cur held) (info Info, err error) {
	dir, err := d.ensureShard(id)
	if err != nil {
		return Info{}, err
	}
	tmp, err := os.CreateTemp(dir, tempPattern(id))
	if err != nil {
		return Info{}, fsError(err, "blob %s: create temp file", id)
	}
	w := &reservingWriter{w: tmp, acct: &d.acct}
	published, crashed := false, false
	defer func() {
		if published || crashed {
			return
		}
		d.acct.release(w.reserved)
		_ = tmp.Close() // may already be closed; the file is going away either way
		_ = os.Remove(tmp.Name())
	}()
	crash := func(step string) bool {
		crashed = d.crashAt == step
		return crashed
	}

	n, actual, err := receiveCopy(ctx, w, r, size)
	if err != nil {
		return Info{}, fsError(err, "blob %s: write", id)
	}
	if actual != sum {
		return Info{}, errs.E(errs.Corrupt, "blob %s: body hashes to %s but %s was declared", id, actual, sum)
	}
	if err := tmp.Sync(); err != nil {
		return Info{}, fsError(err, "blob %s: sync", id)
	}
	if err := tmp.Close(); err != nil {
		return Info{}, fsError(err, "blob %s: close", id)
	}
	if crash("blob-synced") {
		return Info{}, errSimulatedCrash
	}
	if cur.present {
		if err := os.Remove(blobPath(d.root, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Info{}, fsError(err, "blob %s: remove corrupt copy", id)
		}
		d.acct.drop(cur.size)
		if err := syncDir(dir); err != nil {
			return Info{}, fsError(err, "blob %s: sync directory", id)
		}
		if crash("old-removed") {
			return Info{}, errSimulatedCrash
		}
	}
	if err := writeSidecar(dir, id, sum); err != nil {
		return Info{}, err
	}
	if crash("sidecar-published") {
		return Info{}, errSimulatedCrash
	}
	if err := os.Rename(tmp.Name(), blobPath(d.root, id)); err != nil {
		_ = os.Remove(sidecarPath(d.root, id)) // leave no sidecar without its blob
		return Info{}, fsError(err, "blob %s: publish", id)
	}
	published = true
	d.acct.publish(w.reserved)
	info = Info{ID: id, Size: n, Checksum: sum}
	if err := syncDir(dir); err != nil {
		return info, fsError(err, "blob %s: sync directory", id)
	}
	return info, nil
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

// ensureShard creates the directories of id's shard, making each new entry
// durable in its parent.
func (d *Disk) ensureShard(id string) (string, error) {
	a, b := shard(id)
	l1 := filepath.Join(d.root, a)
	dir := filepath.Join(l1, b)
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir, nil
	}
	for _, step := range []struct{ dir, parent string }{{l1, d.root}, {dir, l1}} {
		err := os.Mkdir(step.dir, 0o750)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fsError(err, "blob %s: create directory", id)
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
	h, err := d.present(id)
	if err != nil {
		return nil, Info{}, err
	}
	if h.sumErr != nil {
		return nil, Info{}, h.sumErr
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
	return f, Info{ID: id, Size: fi.Size(), Checksum: h.sum}, nil
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
	if removed {
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
	return nil
}

// Close marks the store closed: later calls fail with errs.Unavailable.
// Calls in flight finish.
func (d *Disk) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	return d.rootDir.Close()
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

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
