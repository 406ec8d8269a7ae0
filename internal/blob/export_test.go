package blob

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// CorruptVolumesBlob flips a byte in the middle of the stored bytes of id in
// v, leaving its recorded checksum alone, whether a volume or a file holds
// it.
func CorruptVolumesBlob(t *testing.T, v *Volumes, id string) {
	t.Helper()
	e, file, ok := v.entryFile(id)
	if !ok {
		p := filepath.Join(v.root, id[0:2], id[2:4], id)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[len(b)/2] ^= 0xff
		require.NoError(t, os.WriteFile(p, b, 0o640))
		return
	}
	require.Positive(t, e.size, "an empty blob has no byte to corrupt")
	var b [1]byte
	at := e.dataOff() + e.size/2
	defer file.release()
	_, err := file.f.ReadAt(b[:], at)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = file.f.WriteAt(b[:], at)
	require.NoError(t, err)
}
