package blob_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/blob/blobtest"
)

func TestDiskConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T, opts blob.Options) blobtest.Subject {
		dir := t.TempDir()
		d, err := blob.OpenDisk(dir, opts)
		require.NoError(t, err)
		return blobtest.Subject{Store: d, Corrupt: func(t *testing.T, id string) { corruptFile(t, dir, id) }}
	})
}

func TestMemoryConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T, opts blob.Options) blobtest.Subject {
		m := blob.NewMemory(opts)
		return blobtest.Subject{Store: m, Corrupt: func(t *testing.T, id string) { require.True(t, m.Corrupt(id)) }}
	})
}

// corruptFile flips a byte of a blob on disk (or adds one to an empty blob),
// leaving its sidecar alone.
func corruptFile(t *testing.T, dir, id string) {
	t.Helper()
	p := filepath.Join(dir, id[0:2], id[2:4], id)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	if len(b) == 0 {
		b = []byte{0}
	} else {
		b[len(b)/2] ^= 0xff
	}
	require.NoError(t, os.WriteFile(p, b, 0o640))
}
