//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package dirlock

import (
	"errors"
	"os"
)

// On other systems the lock is not taken: the directory is unguarded, as it
// was before this package.
var errWouldBlock = errors.New("unreachable")

func lock(*os.File) error { return nil }
