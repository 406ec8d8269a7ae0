package blob_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/errs"
)

// maxMessage bounds an error message about an untrusted id: the id is cut
// to 80 bytes and quoted, which may spell each byte as \xNN.
const maxMessage = 600

// FuzzValidateID feeds blob ids taken from a node's URLs. An accepted id
// becomes a file name under the data directory, so it must be 4 to 128
// characters and hold nothing a file system gives meaning to: no '/', '\\',
// '.' or NUL, and it must name itself (no path element to clean away).
// Anything refused is errs.Invalid with a short message.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{
		"abcd", "abc", "0123456789abcdef0123456789abcdef01234567", "..", "../../etc", "ab/cd", `ab\cd`,
		"ab.cd", "abc\x00d", "-abc", "_abc", "ABCD", "ab%2fcd", strings.Repeat("a", 128), strings.Repeat("a", 129),
		"3f2b1c9e-0d4a-4b8e-9c1f-2a3b4c5d6e7f-c000001", "abcd\n", "ab cd", "ábcd",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := blob.ValidateID(id)
		if err != nil {
			if errs.KindOf(err) != errs.Invalid {
				t.Fatalf("ValidateID(%q): error of kind %v, want Invalid", id, errs.KindOf(err))
			}
			if len(err.Error()) > maxMessage {
				t.Fatalf("ValidateID's message for a %d-byte id is %d bytes long", len(id), len(err.Error()))
			}
			return
		}
		if len(id) < blob.MinIDLen || len(id) > blob.MaxIDLen {
			t.Fatalf("ValidateID accepted %q of length %d", id, len(id))
		}
		if strings.ContainsAny(id, "/\\.\x00") {
			t.Fatalf("ValidateID accepted %q, which holds a path separator, a dot or NUL", id)
		}
		for _, c := range []byte(id) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("ValidateID accepted %q with the byte %q outside [a-z0-9_-]", id, c)
			}
		}
		if filepath.Base(id) != id || filepath.Clean(id) != id {
			t.Fatalf("ValidateID accepted %q, which is not a plain file name", id)
		}
		if err := blob.ValidateCursor(id); err != nil {
			t.Fatalf("an accepted id %q is not a valid listing cursor: %v", id, err)
		}
	})
}
