package blob_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/blob/blobtest"
	"github.com/dfs-project/dfs/internal/errs"
)

func TestDiskConformance(t *testing.T) {
	for _, mode := range []blob.SyncMode{blob.SyncFile, blob.SyncBatch} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == blob.SyncBatch && blob.BatchSyncSupported() != nil {
				t.Skipf("batch sync mode: %v", blob.BatchSyncSupported())
			}
			blobtest.Run(t, func(t *testing.T, opts blob.Options) blobtest.Subject {
				dir := t.TempDir()
				opts.SyncMode = mode
				d, err := blob.OpenDisk(dir, opts)
				require.NoError(t, err)
				require.Equal(t, mode, d.SyncMode())
				return blobtest.Subject{Store: d, Corrupt: func(t *testing.T, id string) { corruptFile(t, dir, id) }}
			})
		})
	}
}

func TestOpenDiskSyncModes(t *testing.T) {
	d, err := blob.OpenDisk(t.TempDir(), blob.Options{})
	require.NoError(t, err)
	defer d.Close()
	require.Equal(t, blob.DefaultSyncMode(), d.SyncMode(), "no mode asked is the default")

	_, err = blob.OpenDisk(t.TempDir(), blob.Options{SyncMode: "sometimes"})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.ErrorContains(t, err, "sometimes")

	if why := blob.BatchSyncSupported(); why != nil {
		require.Equal(t, blob.SyncFile, blob.DefaultSyncMode())
		_, err := blob.OpenDisk(t.TempDir(), blob.Options{SyncMode: blob.SyncBatch})
		require.Equal(t, errs.Invalid, errs.KindOf(err), "batch mode is refused where it cannot keep its promise")
	} else {
		require.Equal(t, blob.SyncBatch, blob.DefaultSyncMode())
	}
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
	blobtest.CorruptFile(t, filepath.Join(dir, id[0:2], id[2:4], id))
}

// TestVolumesConformance runs the suite over the volumes layout in each sync
// mode (which governs its large blobs), once with the default inline limit
// and once with one small enough that the suite's larger blobs are kept as
// files, so both halves of the store and the moves between them are
// covered.
func TestVolumesConformance(t *testing.T) {
	for _, mode := range []blob.SyncMode{blob.SyncFile, blob.SyncBatch} {
		for _, inline := range []int64{0, 512} {
			t.Run(fmt.Sprintf("%s/inline=%d", mode, inline), func(t *testing.T) {
				if mode == blob.SyncBatch && blob.BatchSyncSupported() != nil {
					t.Skipf("batch sync mode: %v", blob.BatchSyncSupported())
				}
				blobtest.Run(t, func(t *testing.T, opts blob.Options) blobtest.Subject {
					opts.SyncMode, opts.InlineMax, opts.VolumeSize = mode, inline, 64<<10
					if inline == 0 {
						opts.VolumeSize = 4 << 20
					}
					v, err := blob.OpenVolumes(t.TempDir(), opts)
					require.NoError(t, err)
					return blobtest.Subject{Store: v, Corrupt: func(t *testing.T, id string) { blob.CorruptVolumesBlob(t, v, id) }}
				})
			})
		}
	}
}
