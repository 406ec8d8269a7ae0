//go:build linux || darwin

package blob

import "syscall"

// diskSpace reports the bytes available to an unprivileged writer and the
// size of the file system holding path.
func diskSpace(path string) (free, total int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, nil
}

// accessible reports whether this process may list, read and create entries in dir.
func accessible(dir string) error {
	const rwx = 0x4 | 0x2 | 0x1 // R_OK | W_OK | X_OK
	return syscall.Access(dir, rwx)
}
