// Package byterange is the one reading of HTTP byte ranges (RFC 9110 §14) in
// dfs. The coordinator's download and the storage node's blob GET both decide
// here what part of a representation a Range and If-Range ask for, and the
// coordinator's node client writes its Range header here, so the two sides
// cannot drift apart. It knows nothing of files or blobs: a representation is
// a size and its validators.
package byterange

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// Range is Length bytes from offset Start. A Range that Parse returns is
// never empty and lies inside the representation.
type Range struct {
	Start, Length int64
}

// Last is the offset of the range's last byte.
func (r Range) Last() int64 { return r.Start + r.Length - 1 }

// Header is the value of a Range request header that asks for r.
func (r Range) Header() string { return fmt.Sprintf("bytes=%d-%d", r.Start, r.Last()) }

// ContentRange is the Content-Range of a 206 answer that carries r out of a
// representation of size bytes.
func (r Range) ContentRange(size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", r.Start, r.Last(), size)
}

// UnsatisfiableError is the cause of the errs.Unsatisfiable error Parse
// returns. It carries the representation's size, which the 416 answer must
// name, so the answering side need not look the size up again.
type UnsatisfiableError struct {
	Size int64
}

func (e *UnsatisfiableError) Error() string {
	return fmt.Sprintf("range not satisfiable for %d bytes", e.Size)
}

// ContentRange is the Content-Range of the 416 answer.
func (e *UnsatisfiableError) ContentRange() string { return fmt.Sprintf("bytes */%d", e.Size) }

// Parse reads a Range header for a representation of size bytes. Only one
// range of the bytes unit is honoured; ok is false when the header is to be
// ignored and the whole representation sent, as RFC 9110 §14.2 allows: no
// header, another unit (matched case-sensitively), several ranges, or a range
// that is not valid — a position that is not 1*DIGIT (so "+5" is refused),
// one too large for an int64, or a last position before the first. A last
// position past the end is cut at the end, and a suffix longer than the
// representation covers all of it. A valid range that no byte satisfies (a
// first position at or past the end, a suffix of 0, any range of an empty
// representation) is an errs.Unsatisfiable error whose cause is an
// *UnsatisfiableError.
func Parse(header string, size int64) (r Range, ok bool, err error) {
	spec, isBytes := strings.CutPrefix(strings.TrimSpace(header), "bytes=")
	if !isBytes || strings.Contains(spec, ",") {
		return Range{}, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return Range{}, false, nil
	}
	if first == "" { // a suffix: the last n bytes
		n, valid := position(last)
		if !valid {
			return Range{}, false, nil
		}
		if n == 0 || size == 0 {
			return Range{}, false, unsatisfiable(size)
		}
		n = min(n, size)
		return Range{Start: size - n, Length: n}, true, nil
	}
	start, valid := position(first)
	if !valid {
		return Range{}, false, nil
	}
	end := size - 1
	if last != "" {
		if end, valid = position(last); !valid || end < start {
			return Range{}, false, nil
		}
	}
	if start >= size {
		return Range{}, false, unsatisfiable(size)
	}
	end = min(end, size-1)
	return Range{Start: start, Length: end - start + 1}, true, nil
}

// position reads a first-pos, last-pos or suffix-length: 1*DIGIT that fits
// an int64.
func position(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func unsatisfiable(size int64) error {
	return errs.Wrap(errs.Unsatisfiable, &UnsatisfiableError{Size: size}, "")
}

// Validators are a representation's current validators, which an If-Range
// is compared with.
type Validators struct {
	// ETag is the ETag field value, quotes included; empty for none. A weak
	// tag never matches, since If-Range compares strongly.
	ETag string
	// LastModified is the Last-Modified time. Set it only where it is a
	// strong validator (the bytes cannot change within its second, as for
	// content that never changes); zero, no date matches.
	LastModified time.Time
}

// Request is what a client asks for: its Range and If-Range header values.
type Request struct {
	Range, IfRange string
}

// FromHeader reads a Request from a request's header.
func FromHeader(h http.Header) Request {
	return Request{Range: h.Get("Range"), IfRange: h.Get("If-Range")}
}

// Select decides what part of a representation of size bytes with the
// validators v to send, as Parse does, after the If-Range precondition: an
// If-Range that does not match v means the Range is ignored (RFC 9110
// §13.1.5), so the whole representation is sent, even for a range that would
// not be satisfiable.
func (q Request) Select(v Validators, size int64) (r Range, ok bool, err error) {
	if q.IfRange != "" && !v.match(q.IfRange) {
		return Range{}, false, nil
	}
	return Parse(q.Range, size)
}

// match evaluates an If-Range value: an entity tag matches an equal strong
// ETag, an HTTP-date the Last-Modified time to the second (the precision the
// header carries).
func (v Validators) match(ifRange string) bool {
	if strings.HasPrefix(ifRange, `"`) || strings.HasPrefix(ifRange, "W/") {
		return ifRange == v.ETag && !strings.HasPrefix(ifRange, "W/")
	}
	if v.LastModified.IsZero() {
		return false
	}
	t, err := http.ParseTime(ifRange)
	return err == nil && t.Unix() == v.LastModified.Unix()
}

// ParseContentRange reads the Content-Range of a 206 answer, "bytes
// first-last/size". size is -1 when the answer gives it as "*".
func ParseContentRange(v string) (r Range, size int64, ok bool) {
	spec, isBytes := strings.CutPrefix(v, "bytes ")
	span, total, found := strings.Cut(spec, "/")
	if !isBytes || !found {
		return Range{}, 0, false
	}
	first, last, found := strings.Cut(span, "-")
	start, okFirst := position(first)
	end, okLast := position(last)
	if !found || !okFirst || !okLast || end < start {
		return Range{}, 0, false
	}
	size = -1
	if total != "*" {
		var valid bool
		if size, valid = position(total); !valid || end >= size {
			return Range{}, 0, false
		}
	}
	return Range{Start: start, Length: end - start + 1}, size, true
}
