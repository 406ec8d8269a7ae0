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
