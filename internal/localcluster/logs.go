package localcluster

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
)

// prefixWriter copies a process's output to a shared writer one whole line at
// a time, each line prefixed with the process name, so that the output of
// several processes interleaves by line and not by fragment.
type prefixWriter struct {
	mu     *sync.Mutex // shared by every writer of the same destination
	w      io.Writer
	prefix []byte
	buf    []byte // an incomplete last line
}

func newPrefixWriter(w io.Writer, mu *sync.Mutex, prefix string) *prefixWriter {
	return &prefixWriter{mu: mu, w: w, prefix: []byte(prefix)}
}

// Write never fails: a destination that refuses output must not stop the
// process whose output it mirrors (its log file still has everything).
func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	var out []byte
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		out = append(out, p.prefix...)
		out = append(out, p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
	}
	if len(out) > 0 {
		p.mu.Lock()
		_, _ = p.w.Write(out)
		p.mu.Unlock()
	}
	return len(b), nil
}

// Flush writes an unterminated last line, ended with a newline.
func (p *prefixWriter) Flush() {
	if len(p.buf) == 0 {
		return
	}
	_, _ = p.Write([]byte{'\n'})
}

// tailLines returns at most n of the last lines of the file at path, read from
// its last 8 KiB, for error messages about a process that did not come up.
func tailLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const window = 8 << 10
	st, err := f.Stat()
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	off := max(st.Size()-window, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line of a window is likely cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
