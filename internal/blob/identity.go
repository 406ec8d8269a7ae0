// Shared by every layout that keeps a data directory: the directory's
// identity file.

package blob

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
)

// Identifier names the medium a store keeps its blobs on.
type Identifier interface {
	// Identity is a random UUID chosen when the store's medium was first
	// used and kept with its blobs. A node whose data directory was wiped
	// or replaced comes back under its old node id with a new identity,
	// which is how the coordinator tells "the same node, empty" from "the
	// same node, with its copies".
	Identity() string
}

// maxIdentityFile bounds what is read of an identity file: a UUID and a
// newline, with room to quote a wrong one in the error.
const maxIdentityFile = 128

// loadIdentity returns the identity recorded in root, recording a new one
// when there is none (the directory's first start). A file that does not
// hold exactly one canonical UUID is refused: guessing would either hide a
// replaced disk (keeping the old identity) or throw away good copies
// (choosing a new one), and only the operator knows which.
func loadIdentity(root string) (string, error) {
	p := filepath.Join(root, identityName)
	if err := removeIdentityTemps(root); err != nil {
		return "", err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return createIdentity(root)
	}
	if err != nil {
		return "", fsError(err, "blob store: read identity file %s", p)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIdentityFile+1))
	if err != nil {
		return "", fsError(err, "blob store: read identity file %s", p)
	}
	return parseIdentity(p, b)
}

func parseIdentity(path string, b []byte) (string, error) {
	s := strings.TrimSuffix(string(b), "\n")
	if u, err := uuid.Parse(s); err == nil && u.String() == s {
		return s, nil
	}
	shown := string(b)
	if len(shown) > maxIdentityFile {
		shown = shown[:maxIdentityFile] + "…"
	}
	return "", errs.E(errs.Invalid,
		"blob store: identity file %s is malformed (want one lower-case UUID on one line, found %q); "+
			"restore it from a backup of this disk, or delete it to have the node rejoin as a new, empty disk "+
			"whose copies the coordinator rebuilds", path, shown)
}

// createIdentity durably records a new identity: a temp file, synced, then
// renamed into place and the directory synced, so a crash leaves either no
// identity (the next start chooses one; the directory holds nothing yet
// that an identity vouches for) or a whole one.
func createIdentity(root string) (string, error) {
	id := uuid.NewString()
	if err := writeFileDurably(root, identityName, identityTempPattern, []byte(id+"\n")); err != nil {
		return "", errs.Wrap(errs.KindOf(err), err, "blob store: record identity")
	}
	return id, nil
}

// removeIdentityTemps deletes what an interrupted createIdentity left.
func removeIdentityTemps(root string) error { return removeTemps(root, identityTempPattern) }
