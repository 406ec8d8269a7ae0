package localcluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// holdsPort reports whether process pid has a TCP socket listening on port:
// the inodes of the listening sockets on that port (/proc/net/tcp and tcp6)
// against the sockets among the process's open files.
func holdsPort(pid, port int) bool {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(table, port, inodes)
	}
	if len(inodes) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true
		}
	}
	return false
}

// listeningInodes adds to into the inodes of the sockets in table (the
// format of /proc/net/tcp) that listen on port.
func listeningInodes(table string, port int, into map[string]bool) {
	f, err := os.Open(table)
	if err != nil {
		return
	}
	defer f.Close()
	suffix := ":" + strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for len(suffix) < 5 {
		suffix = ":0" + suffix[1:]
	}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		const listen = "0A"
		if len(fields) >= 10 && fields[3] == listen && strings.HasSuffix(fields[1], suffix) {
			into[fields[9]] = true
		}
	}
}
