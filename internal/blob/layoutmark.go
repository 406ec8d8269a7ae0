// Shared by every layout: the record of which layout a data directory holds,
// so that a node started with another one stops instead of mixing them.

package blob

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

// Layout names how a data directory keeps its blobs.
type Layout string

const (
	// LayoutFiles keeps each blob in a file of its own with a checksum
	// sidecar, under two levels of shard directories (Disk).
	LayoutFiles Layout = "files"
	// LayoutVolumes appends small blobs to large volume files and keeps the
	// large ones as LayoutFiles does (Volumes).
	LayoutVolumes Layout = "volumes"
)

const (
	layoutName        = "layout"
	layoutTempPattern = tempPrefix + layoutName + "-*"
)

// LayoutError is a data directory opened with a layout other than the one
// it holds.
type LayoutError struct {
	Dir      string
	Recorded Layout
	Wanted   Layout
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("data directory %s holds the %q layout, not %q: a directory keeps the layout it was created with (to move a node to another layout, drain it and start it on a fresh directory)",
		e.Dir, e.Recorded, e.Wanted)
}

// DirectoryLayout returns the layout of the data directory dir: the one it
// recorded at its first start, LayoutFiles for a directory that holds an
// identity or a shard directory but no record (it was created before
// layouts were recorded, by the files layout), and "" for a directory that
// is new (absent, or holding neither).
func DirectoryLayout(dir string) (Layout, error) {
	recorded, err := readLayout(dir)
	if err != nil || recorded != "" {
		return recorded, err
	}
	if _, err := os.Stat(filepath.Join(dir, identityName)); err == nil {
		return LayoutFiles, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fsError(err, "blob store: stat %s", identityName)
	}
	shards, err := shardNames(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fsError(err, "blob store: read %s", dir)
	}
	if len(shards) > 0 {
		return LayoutFiles, nil
	}
	return "", nil
}

// checkLayout compares the layout of root (DirectoryLayout) with want,
// recording want when the directory is new or predates the record.
func checkLayout(root string, want Layout) error {
	recorded, err := readLayout(root)
	if err != nil {
		return err
	}
	if recorded == "" {
		if recorded, err = DirectoryLayout(root); err != nil {
			return err
		}
		if recorded == "" || recorded == want {
			if err := removeTemps(root, layoutTempPattern); err != nil {
				return err
			}
			if err := writeFileDurably(root, layoutName, layoutTempPattern, []byte(string(want)+"\n")); err != nil {
				return errs.Wrap(errs.KindOf(err), err, "blob store: record the layout of %s", root)
			}
			return nil
		}
	}
	if recorded != want {
		return errs.Wrap(errs.Invalid, &LayoutError{Dir: root, Recorded: recorded, Wanted: want}, "blob store")
	}
	return nil
}

// readLayout returns the layout recorded in root, "" if none is.
func readLayout(root string) (Layout, error) {
	p := filepath.Join(root, layoutName)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fsError(err, "blob store: read %s", p)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return "", fsError(err, "blob store: read %s", p)
	}
	switch l := Layout(strings.TrimSuffix(string(b), "\n")); l {
	case LayoutFiles, LayoutVolumes:
		return l, nil
	}
	return "", errs.E(errs.Invalid, "blob store: %s holds %q, not a layout (%s or %s)", p, b, LayoutFiles, LayoutVolumes)
}

// removeTemps deletes the files in dir matching pattern, which an
// interrupted writeFileDurably left.
func removeTemps(dir, pattern string) error {
	temps, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return errs.Wrap(errs.Other, err, "blob store: look for temp files")
	}
	for _, p := range temps {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fsError(err, "blob store: remove leftover %s", p)
		}
	}
	return nil
}
