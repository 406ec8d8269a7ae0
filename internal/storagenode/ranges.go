package storagenode

import (
	"strconv"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

// byteRange is the part of a blob a GET answers with.
type byteRange struct {
	start, length int64
	partial       bool
}

// parseRange decides what part of a blob of size bytes to send for a Range
// header. Only a single range is honoured: a header the node does not
// understand, a multi-range request, or an If-Range that does not match etag
// is ignored and the whole blob is sent (as RFC 9110 allows). A single range
// that no byte satisfies is errs.Unsatisfiable.
func parseRange(header, ifRange, etag string, size int64) (byteRange, error) {
	full := byteRange{start: 0, length: size}
	spec, ok := strings.CutPrefix(header, "bytes=")
	if !ok || strings.Contains(spec, ",") || (ifRange != "" && ifRange != etag) {
		return full, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return full, nil
	}
	unsatisfiable := errs.E(errs.Unsatisfiable, "range %q is outside the blob's %d bytes", header, size)
	if first == "" { // a suffix: the last n bytes
		n, ok := parseOffset(last)
		if !ok {
			return full, nil
		}
		if n == 0 || size == 0 {
			return byteRange{}, unsatisfiable
		}
		n = min(n, size)
		return byteRange{start: size - n, length: n, partial: true}, nil
	}
	start, ok := parseOffset(first)
	if !ok {
		return full, nil
	}
	end := size - 1
	if last != "" {
		if end, ok = parseOffset(last); !ok || end < start {
			return full, nil
		}
	}
	if start >= size {
		return byteRange{}, unsatisfiable
	}
	end = min(end, size-1)
	return byteRange{start: start, length: end - start + 1, partial: true}, nil
}

func parseOffset(s string) (int64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}
