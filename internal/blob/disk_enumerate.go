// Disk's listing: a walk of the tree in id order (layout.go says why the
// tree's order is the ids' order).

package blob

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

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
