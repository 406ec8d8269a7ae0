// File-system helpers for any layout that keeps blobs in files: the kind of
// a file-system error, and a directory's fsync.

package blob

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/dfs-project/dfs/internal/errs"
)

// fsError gives a file-system error its kind: a full device or an exhausted
// quota is errs.NoSpace, anything else an unexpected failure.
func fsError(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if errs.KindOf(err) != errs.Other {
		return err
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return errs.Wrap(errs.NoSpace, err, format, args...)
	}
	return errs.Wrap(errs.Other, err, format, args...)
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

// writeFileDurably publishes data as dir/name so that a crash leaves either
// the old file (or none) or the whole new one: a temp file named after
// pattern, synced, renamed into place, and dir synced.
func writeFileDurably(dir, name, pattern string, data []byte) error {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return fsError(err, "create a temp file for %s in %s", name, dir)
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fsError(err, "write %s", name)
	}
	if err := f.Sync(); err != nil {
		return fsError(err, "sync %s", name)
	}
	if err := f.Close(); err != nil {
		return fsError(err, "close %s", name)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return fsError(err, "publish %s", name)
	}
	done = true
	return fsError(syncDir(dir), "sync %s", dir)
}
