//go:build !linux

package blob

import (
	"errors"
	"os"
)

func syncFS(*os.File) error { return errors.ErrUnsupported }

func batchSupport() error {
	return errors.New("batch sync mode relies on Linux's syncfs")
}

// fdatasync is fsync where the system has no fdatasync of its own.
func fdatasync(f *os.File) error { return f.Sync() }
