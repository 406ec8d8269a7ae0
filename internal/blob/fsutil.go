// File-system helpers for any layout that keeps blobs in files: the kind of
// a file-system error, and a directory's fsync.

package blob

import (
	"errors"
	"os"
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
