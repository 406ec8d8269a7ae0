// Package blobfault damages and inspects the copies a data directory holds,
// in either layout, for tests that give a storage node a real disk fault:
// the bytes on disk change, as a failing disk would change them, and the
// node finds out as it would in production. It uses blob.LocateCopy, so it
// works on a stopped node and beside a running one.
package blobfault

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/errs"
)

// Locate is where dir keeps the data of blob id; the test fails if it holds
// no copy.
func Locate(t testing.TB, dir, id string) blob.CopyLocation {
	t.Helper()
	loc, err := blob.LocateCopy(dir, id)
	require.NoError(t, err, "find the copy of %s in %s", id, dir)
	return loc
}

// Holds reports whether dir keeps a copy of blob id.
func Holds(t testing.TB, dir, id string) bool {
	t.Helper()
	_, err := blob.LocateCopy(dir, id)
	if errs.KindOf(err) == errs.NotFound {
		return false
	}
	require.NoError(t, err, "find the copy of %s in %s", id, dir)
	return true
}

// Read returns the data of dir's copy of blob id as it lies on disk, and
// false if dir holds none.
func Read(t testing.TB, dir, id string) ([]byte, bool) {
	t.Helper()
	loc, err := blob.LocateCopy(dir, id)
	if errs.KindOf(err) == errs.NotFound {
		return nil, false
	}
	require.NoError(t, err, "find the copy of %s in %s", id, dir)
	f, err := os.Open(loc.Path)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, loc.Size)
	_, err = f.ReadAt(b, loc.Offset)
	require.NoError(t, err, "read the copy of %s in %s", id, dir)
	return b, true
}

// FlipByte inverts the byte in the middle of the data of dir's copy of blob
// id, in place, leaving its recorded checksum (sidecar or record header)
// alone: the copy no longer matches its SHA-256, as after bit rot. A running
// node sees it at its next read of the copy, a stopped one also at start (a
// record that fails its checksum is set aside then).
func FlipByte(t testing.TB, dir, id string) {
	t.Helper()
	loc := Locate(t, dir, id)
	require.Positive(t, loc.Size, "an empty copy has no byte to flip")
	flipAt(t, loc.Path, loc.Offset+loc.Size/2)
}

// FlipByteAt inverts the byte at offset off of the data of dir's copy of
// blob id, as FlipByte does in the middle.
func FlipByteAt(t testing.TB, dir, id string, off int64) {
	t.Helper()
	loc := Locate(t, dir, id)
	require.Less(t, off, loc.Size, "offset %d is past the copy's %d bytes", off, loc.Size)
	require.GreaterOrEqual(t, off, int64(0))
	flipAt(t, loc.Path, loc.Offset+off)
}

// Destroy makes dir lose its copy of blob id: a blob kept in a file of its
// own loses that file (its sidecar stays, an orphan, as after a crash); a
// record in a volume gets a byte of its header inverted and the index
// checkpoint is lost with it, so that the node, at its next start, scans
// every record, finds this one damaged and sets it aside (or cuts it off, if
// it was the volume's last). A running node that indexed the record keeps
// serving it from memory until it restarts, so stop the node first for a
// record.
func Destroy(t testing.TB, dir, id string) {
	t.Helper()
	loc := Locate(t, dir, id)
	if loc.Sidecar != "" {
		require.NoError(t, os.Remove(loc.Path))
		return
	}
	// The last byte of the id, just before the header's CRC and the data,
	// is covered by that CRC.
	flipAt(t, loc.Path, loc.Offset-4-1)
	if err := os.Remove(loc.Checkpoint); !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}
}

func flipAt(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	var b [1]byte
	_, err = f.ReadAt(b[:], off)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b[:], off)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
}
