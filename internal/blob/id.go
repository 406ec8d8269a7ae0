// Shared by every store: what a blob id, a listing cursor and a checksum may
// be.

package blob

import (
	"strconv"

	"github.com/dfs-project/dfs/internal/errs"
)

// Id limits. Ids become file names, so the alphabet is deliberately small: no
// dots, slashes, upper case or anything a file system treats specially. A
// canonical UUID (36 characters) fits, and so does a chunk id such as
// "<uuid>-c000001".
const (
	MinIDLen = 4
	MaxIDLen = 128
)

// ValidateID reports, as an errs.Invalid error, whether id is not a valid blob
// id: 4 to 128 characters from [a-z0-9_-], the first a letter or digit. Every
// store method validates its id before touching any storage.
func ValidateID(id string) error {
	if len(id) < MinIDLen || len(id) > MaxIDLen {
		return errs.E(errs.Invalid, "blob id %s: must be %d to %d characters", quote(id), MinIDLen, MaxIDLen)
	}
	if !isIDStart(id[0]) {
		return errs.E(errs.Invalid, "blob id %s: must start with a lower-case letter or a digit", quote(id))
	}
	for i := 1; i < len(id); i++ {
		if !isIDChar(id[i]) {
			return errs.E(errs.Invalid, "blob id %s: only a-z, 0-9, '-' and '_' are allowed", quote(id))
		}
	}
	return nil
}

// ValidateCursor reports whether after can be an Enumerate cursor: empty, or
// at most MaxIDLen characters of the id alphabet. A cursor need not be the id
// of a stored blob, nor a complete id.
func ValidateCursor(after string) error {
	if len(after) > MaxIDLen {
		return errs.E(errs.Invalid, "cursor %s: longer than %d characters", quote(after), MaxIDLen)
	}
	for i := 0; i < len(after); i++ {
		if !isIDChar(after[i]) {
			return errs.E(errs.Invalid, "cursor %s: only a-z, 0-9, '-' and '_' are allowed", quote(after))
		}
	}
	return nil
}

// ValidateChecksum checks that sum is a SHA-256 in hex (either case) and
// returns it in lower case.
func ValidateChecksum(sum string) (string, error) {
	if len(sum) != 64 {
		return "", errs.E(errs.Invalid, "checksum %s: must be 64 hex digits (SHA-256)", quote(sum))
	}
	b := []byte(sum)
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			b[i] = c + ('a' - 'A')
		default:
			return "", errs.E(errs.Invalid, "checksum %s: must be 64 hex digits (SHA-256)", quote(sum))
		}
	}
	return string(b), nil
}

func isIDStart(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }

func isIDChar(c byte) bool { return isIDStart(c) || c == '-' || c == '_' }

// quote renders untrusted input for an error message, bounded so a huge value
// cannot bloat logs.
func quote(s string) string {
	const max = 80
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
