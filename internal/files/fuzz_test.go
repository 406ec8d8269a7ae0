package files_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
)

// FuzzParseRange feeds Range headers a client controls to the shared parser
// (internal/byterange) as a download reads them: whatever the header, parsing
// never panics, refuses only with errs.Unsatisfiable carrying the file's size,
// and a range it returns is non-empty, lies inside the file and is not the
// whole file (which is answered as a plain 200).
func FuzzParseRange(f *testing.F) {
	seeds := []struct {
		header string
		size   int64
	}{
		{"", 10}, {"bytes=0-0", 10}, {"bytes=0-9", 10}, {"bytes=5-", 10}, {"bytes=-3", 10},
		{"bytes=-0", 10}, {"bytes=10-", 10}, {"bytes=9-9", 10}, {"bytes=3-2", 10},
		{"bytes=0-1,3-4", 10}, {"bytes=0-99999999999999999999", 10}, {"bytes=-9223372036854775808", 10},
		{"bytes=9223372036854775807-", 9223372036854775807}, {"bytes=0-", 0}, {"bytes=-1", 0},
		{"bytes= 1 - 2 ", 10}, {"bytes=--1", 10}, {"bytes=1--2", 10}, {"items=0-1", 10},
		{"bytes=+1-2", 10}, {"bytes=0x1-2", 10}, {"BYTES=0-1", 10}, {"bytes=\x00-1", 10},
	}
	for _, s := range seeds {
		f.Add(s.header, s.size)
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if size < 0 {
			size = -(size + 1) // file sizes are never negative; keep the input useful
		}
		rng, err := files.DownloadRange(byterange.Request{Range: header}, meta.File{SizeBytes: size})
		if err != nil {
			if rng != nil {
				t.Fatalf("DownloadRange(%q, %d) returned both a range and an error", header, size)
			}
			if errs.KindOf(err) != errs.Unsatisfiable {
				t.Fatalf("DownloadRange(%q, %d): error of kind %v, want Unsatisfiable: %v", header, size, errs.KindOf(err), err)
			}
			var ue *byterange.UnsatisfiableError
			if !errors.As(err, &ue) || ue.Size != size {
				t.Fatalf("DownloadRange(%q, %d): the error does not carry the size: %v", header, size, err)
			}
			return
		}
		if rng == nil {
			return
		}
		if rng.Start < 0 || rng.Length <= 0 || rng.Start >= size || rng.Length > size-rng.Start {
			t.Fatalf("DownloadRange(%q, %d) = [%d, +%d): outside [0, %d) or empty", header, size, rng.Start, rng.Length, size)
		}
		if rng.Start == 0 && rng.Length == size {
			t.Fatalf("DownloadRange(%q, %d) returned the whole file as a range", header, size)
		}
		if !strings.HasPrefix(strings.TrimSpace(header), "bytes=") {
			t.Fatalf("DownloadRange(%q, %d) found a range in a header that is not a bytes range", header, size)
		}
	})
}

// maxMessage bounds an error message about an untrusted id: the id is cut
// to 80 bytes and quoted, which may spell each byte as \xNN.
const maxMessage = 600

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// FuzzValidateFileID feeds file ids taken from URLs: only the canonical
// lower-case UUID form is accepted, anything else is errs.Invalid with a
// message that stays short however long the input.
func FuzzValidateFileID(f *testing.F) {
	for _, s := range []string{
		uuid.NewString(), strings.ToUpper(uuid.NewString()), "", "..", "../../etc/passwd", "%2e%2e%2f",
		"{" + uuid.NewString() + "}", "urn:uuid:" + uuid.NewString(), strings.ReplaceAll(uuid.NewString(), "-", ""),
		uuid.NewString() + "\x00", uuid.NewString() + "/", strings.Repeat("a", 10000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := files.ValidateFileID(id)
		if err == nil {
			if !canonicalUUID.MatchString(id) {
				t.Fatalf("ValidateFileID accepted %q, which is not a canonical lower-case UUID", id)
			}
			return
		}
		if errs.KindOf(err) != errs.Invalid {
			t.Fatalf("ValidateFileID(%q): error of kind %v, want Invalid", id, errs.KindOf(err))
		}
		if canonicalUUID.MatchString(id) {
			t.Fatalf("ValidateFileID refused the canonical UUID %q: %v", id, err)
		}
		if len(err.Error()) > maxMessage {
			t.Fatalf("ValidateFileID's message for a %d-byte id is %d bytes long", len(id), len(err.Error()))
		}
	})
}
