// Disk's removal: blob before sidecar, so that a crash in between leaves the
// blob absent.

package blob

import (
	"context"
	"errors"
	"io/fs"
	"os"
)

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
	if err := os.Remove(blockSumsPath(d.root, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "blob %s: remove its sums", id)
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
