// Disk's read path: what is held under an id (a blob counts only with its
// sidecar), Stat, Fetch and Rehash.

package blob

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

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
	if !d.seen.mayHold(id) {
		return held{}, nil
	}
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
	if actual == h.sum && n > WholeCheckMax {
		// An intact blob written before block sums existed gains them.
		if _, ok, err := d.BlockSums(ctx, id); err == nil && !ok {
			_ = d.addBlockSums(ctx, id, h.sum)
		}
	}
	return Check{ID: id, Size: n, Stored: h.sum, Actual: actual}, nil
}
