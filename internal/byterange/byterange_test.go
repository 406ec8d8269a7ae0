package byterange_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
)

// TestSelect is the specification of what both the coordinator and the
// storage node send for a Range and If-Range: a range, the whole
// representation (ignored), or 416 (unsatisfiable).
func TestSelect(t *testing.T) {
	const etag = `"4e1243bd22c66e76c2ba9eddc1f91394e57f9f83"`
	modified := time.Date(2026, 3, 1, 12, 30, 45, 0, time.UTC)
	v := byterange.Validators{ETag: etag, LastModified: modified.Add(300 * time.Millisecond)}
	type outcome int
	const (
		whole outcome = iota
		part
		unsat
	)
	for _, tc := range []struct {
		name, rng, ifRange string
		size               int64
		want               outcome
		start, length      int64
	}{
		{name: "no header", rng: "", size: 100, want: whole},
		{name: "closed", rng: "bytes=0-9", size: 100, want: part, start: 0, length: 10},
		{name: "one byte", rng: "bytes=7-7", size: 100, want: part, start: 7, length: 1},
		{name: "open", rng: "bytes=90-", size: 100, want: part, start: 90, length: 10},
		{name: "open from 0 is the whole representation as a range", rng: "bytes=0-", size: 100, want: part, start: 0, length: 100},
		{name: "last position past the end is cut", rng: "bytes=50-1000", size: 100, want: part, start: 50, length: 50},
		{name: "last position beyond int64 is invalid", rng: "bytes=0-99999999999999999999", size: 100, want: whole},
		{name: "reversed is invalid", rng: "bytes=5-1", size: 100, want: whole},
		{name: "first position at the end", rng: "bytes=100-", size: 100, want: unsat},
		{name: "first position past the end", rng: "bytes=5000-6000", size: 100, want: unsat},
		{name: "largest first position", rng: "bytes=9223372036854775807-", size: 100, want: unsat},
		{name: "empty representation", rng: "bytes=0-", size: 0, want: unsat},

		{name: "suffix", rng: "bytes=-5", size: 100, want: part, start: 95, length: 5},
		{name: "suffix of the whole size", rng: "bytes=-100", size: 100, want: part, start: 0, length: 100},
		{name: "suffix larger than the size is all of it", rng: "bytes=-500", size: 100, want: part, start: 0, length: 100},
		{name: "suffix of 0", rng: "bytes=-0", size: 100, want: unsat},
		{name: "suffix of an empty representation", rng: "bytes=-1", size: 0, want: unsat},
		{name: "suffix beyond int64 is invalid", rng: "bytes=-9223372036854775808", size: 100, want: whole},
		{name: "negative suffix is invalid", rng: "bytes=--1", size: 100, want: whole},

		{name: "+ on the first position is not 1*DIGIT", rng: "bytes=+5-", size: 100, want: whole},
		{name: "+ on the last position is not 1*DIGIT", rng: "bytes=0-+5", size: 100, want: whole},
		{name: "+ on a suffix is not 1*DIGIT", rng: "bytes=-+5", size: 100, want: whole},
		{name: "- on the last position", rng: "bytes=1--2", size: 100, want: whole},
		{name: "hex", rng: "bytes=0x1-2", size: 100, want: whole},
		{name: "letters", rng: "bytes=a-b", size: 100, want: whole},
		{name: "no dash", rng: "bytes=5", size: 100, want: whole},
		{name: "no positions", rng: "bytes=-", size: 100, want: whole},
		{name: "empty range set", rng: "bytes=", size: 100, want: whole},
		{name: "NUL", rng: "bytes=\x00-1", size: 100, want: whole},

		{name: "several ranges are served whole", rng: "bytes=0-1,5-6", size: 100, want: whole},
		{name: "several ranges with a space", rng: "bytes=0-1, 5-6", size: 100, want: whole},
		{name: "several unsatisfiable ranges are served whole", rng: "bytes=200-300,400-", size: 100, want: whole},
		{name: "a trailing comma is several", rng: "bytes=0-1,", size: 100, want: whole},

		{name: "space around the range set", rng: "bytes= 10-19 ", size: 100, want: part, start: 10, length: 10},
		{name: "space around the header", rng: "  bytes=10-19\t", size: 100, want: part, start: 10, length: 10},
		{name: "space inside a range", rng: "bytes=1 - 2", size: 100, want: whole},
		{name: "space before =", rng: "bytes =0-1", size: 100, want: whole},

		{name: "other unit", rng: "items=0-1", size: 100, want: whole},
		{name: "unit in capitals", rng: "BYTES=0-1", size: 100, want: whole},
		{name: "no unit", rng: "0-1", size: 100, want: whole},

		{name: "If-Range with the ETag", rng: "bytes=0-1", ifRange: etag, size: 100, want: part, start: 0, length: 2},
		{name: "If-Range with another ETag", rng: "bytes=0-1", ifRange: `"old"`, size: 100, want: whole},
		{name: "If-Range with the ETag made weak", rng: "bytes=0-1", ifRange: "W/" + etag, size: 100, want: whole},
		{name: "If-Range with the ETag unquoted", rng: "bytes=0-1", ifRange: etag[1 : len(etag)-1], size: 100, want: whole},
		{name: "If-Range with the Last-Modified date", rng: "bytes=0-1", ifRange: modified.Format(http.TimeFormat), size: 100, want: part, start: 0, length: 2},
		{name: "If-Range with the date in RFC 850 form", rng: "bytes=0-1", ifRange: modified.Format(time.RFC850), size: 100, want: part, start: 0, length: 2},
		{name: "If-Range with an earlier date", rng: "bytes=0-1", ifRange: modified.Add(-time.Second).Format(http.TimeFormat), size: 100, want: whole},
		{name: "If-Range with a later date", rng: "bytes=0-1", ifRange: modified.Add(time.Second).Format(http.TimeFormat), size: 100, want: whole},
		{name: "If-Range that is neither", rng: "bytes=0-1", ifRange: "yesterday", size: 100, want: whole},
		{name: "stale If-Range ignores an unsatisfiable range", rng: "bytes=500-", ifRange: `"old"`, size: 100, want: whole},
		{name: "matching If-Range keeps an unsatisfiable range", rng: "bytes=500-", ifRange: etag, size: 100, want: unsat},
		{name: "If-Range without a Range", rng: "", ifRange: etag, size: 100, want: whole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok, err := byterange.Request{Range: tc.rng, IfRange: tc.ifRange}.Select(v, tc.size)
			switch tc.want {
			case unsat:
				require.False(t, ok)
				require.True(t, errs.Is(err, errs.Unsatisfiable), "%v", err)
				var ue *byterange.UnsatisfiableError
				require.True(t, errors.As(err, &ue))
				require.Equal(t, tc.size, ue.Size)
			case whole:
				require.NoError(t, err)
				require.False(t, ok)
			case part:
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, byterange.Range{Start: tc.start, Length: tc.length}, r)
			}
		})
	}
}

func TestValidatorsWithoutDate(t *testing.T) {
	modified := time.Date(2026, 3, 1, 12, 30, 45, 0, time.UTC)
	q := byterange.Request{Range: "bytes=0-1", IfRange: modified.Format(http.TimeFormat)}
	_, ok, err := q.Select(byterange.Validators{ETag: `"x"`}, 100)
	require.NoError(t, err)
	require.False(t, ok, "a date matches nothing where there is no Last-Modified")
}

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	h.Set("Range", "bytes=1-2")
	h.Set("If-Range", `"x"`)
	require.Equal(t, byterange.Request{Range: "bytes=1-2", IfRange: `"x"`}, byterange.FromHeader(h))
}

func TestHeaders(t *testing.T) {
	r := byterange.Range{Start: 18, Length: 983}
	require.Equal(t, int64(1000), r.Last())
	require.Equal(t, "bytes=18-1000", r.Header())
	require.Equal(t, "bytes 18-1000/1001", r.ContentRange(1001))
	require.Equal(t, "bytes */20", (&byterange.UnsatisfiableError{Size: 20}).ContentRange())

	got, ok, err := byterange.Parse(r.Header(), 1001)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, r, got, "Parse reads what Header writes")
}

func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		v             string
		ok            bool
		start, length int64
		size          int64
	}{
		{"bytes 4-8/20", true, 4, 5, 20},
		{"bytes 0-0/1", true, 0, 1, 1},
		{"bytes 4-8/*", true, 4, 5, -1},
		{"bytes 4-20/20", false, 0, 0, 0},
		{"bytes 8-4/20", false, 0, 0, 0},
		{"bytes */20", false, 0, 0, 0},
		{"bytes 4-8", false, 0, 0, 0},
		{"bytes +4-8/20", false, 0, 0, 0},
		{"items 4-8/20", false, 0, 0, 0},
		{"", false, 0, 0, 0},
	} {
		r, size, ok := byterange.ParseContentRange(tc.v)
		require.Equal(t, tc.ok, ok, tc.v)
		if tc.ok {
			require.Equal(t, byterange.Range{Start: tc.start, Length: tc.length}, r, tc.v)
			require.Equal(t, tc.size, size, tc.v)
		}
	}
	r := byterange.Range{Start: 3, Length: 4}
	got, size, ok := byterange.ParseContentRange(r.ContentRange(10))
	require.True(t, ok)
	require.Equal(t, r, got)
	require.Equal(t, int64(10), size, "ParseContentRange reads what ContentRange writes")
}
