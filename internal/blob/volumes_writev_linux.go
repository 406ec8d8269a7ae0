package blob

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writeAtv writes bufs one after the other at off with pwritev(2), straight
// from the records' own buffers, resuming after a short write.
func writeAtv(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	for len(bufs) > 0 {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), bufs, off)
			return werr != unix.EAGAIN
		}); err != nil {
			return total, err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		total += n
		off += int64(n)
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
			} else {
				bufs[0] = bufs[0][n:]
				n = 0
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return total, nil
}
