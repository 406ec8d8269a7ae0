//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// Supported reports whether Acquire takes a lock on this system.
const Supported = true

var errWouldBlock = syscall.EWOULDBLOCK

func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
