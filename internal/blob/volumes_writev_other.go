//go:build !linux

package blob

import "os"

// writeAtv writes bufs one after the other at off; without pwritev they are
// joined first.
func writeAtv(f *os.File, bufs [][]byte, off int64) (int, error) {
	if len(bufs) == 1 {
		return f.WriteAt(bufs[0], off)
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	joined := make([]byte, 0, n)
	for _, b := range bufs {
		joined = append(joined, b...)
	}
	return f.WriteAt(joined, off)
}
