// Disk's recovery at open: counting the blobs and deleting what interrupted
// writes and removals left behind.

package blob

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

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
	var leftovers, sums []string
	for _, e := range entries {
		name := e.Name()
		if isTempName(name) {
			leftovers = append(leftovers, name)
			d.recovery.TempFilesRemoved++
			continue
		}
		if id, ok := strings.CutSuffix(name, blockSumsExt); ok && e.Type().IsRegular() && ValidateID(id) == nil && inShard(id, a, b) {
			sums = append(sums, id)
			continue
		}
		id, isSidecar := strings.CutSuffix(name, sidecarExt)
		if !e.Type().IsRegular() || ValidateID(id) != nil || !inShard(id, a, b) {
			continue // not ours: leave it alone
		}
		d.seen.add(id)
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
	for _, id := range sums {
		// Block sums outlive nothing: without their blob they go.
		if _, ok := blobs[id]; !ok || !sidecars[id] {
			leftovers = append(leftovers, id+blockSumsExt)
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
