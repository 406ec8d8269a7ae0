//go:build linux

package blob

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system holding f and waits for the writes to
// complete (syncfs(2)). From Linux 5.8 it also reports a write-back error
// that happened since the last syncfs through the same open file, which is
// why f must stay open from before the first write it is to cover.
func syncFS(f *os.File) error { return onFD(f, "syncfs", unix.Syncfs) }

// onFD runs the system call fn, named name, on f's descriptor.
func onFD(f *os.File, name string, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = fn(int(fd)) }); err != nil {
		return err
	}
	return os.NewSyscallError(name, serr)
}

// batchSupport checks the kernel once: before 5.8, syncfs flushed but did not
// report write-back errors, so a sync could succeed over lost data.
var batchSupport = sync.OnceValue(func() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("cannot read the kernel version: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	major, minor, ok := kernelVersion(release)
	if !ok {
		return fmt.Errorf("cannot read the kernel version from %q", release)
	}
	if major < 5 || major == 5 && minor < 8 {
		return fmt.Errorf("kernel %s is older than 5.8, whose syncfs does not report write-back errors", release)
	}
	return nil
})

// kernelVersion reads the major and minor numbers of a kernel release such
// as "6.8.0-45-generic".
func kernelVersion(release string) (major, minor int, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0, 0, false
	}
	digits := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if digits == -1 {
		digits = len(parts[1])
	}
	minor, err = strconv.Atoi(parts[1][:digits])
	if err != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// fdatasync flushes a file's data, and the metadata needed to read it back
// (its length), to stable storage.
func fdatasync(f *os.File) error { return onFD(f, "fdatasync", unix.Fdatasync) }
