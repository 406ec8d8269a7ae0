//go:build linux

package blob

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKernelVersion(t *testing.T) {
	for _, tc := range []struct {
		release      string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v782", 6, 18, true},
		{"5.8.0", 5, 8, true},
		{"5.10", 5, 10, true},
		{"4.19.0-26-amd64", 4, 19, true},
		{"5.15rc1", 5, 15, true},
		{"6", 0, 0, false},
		{"x.1", 0, 0, false},
		{"6.x", 0, 0, false},
	} {
		major, minor, ok := kernelVersion(tc.release)
		require.Equal(t, tc.ok, ok, tc.release)
		if ok {
			require.Equal(t, []int{tc.major, tc.minor}, []int{major, minor}, tc.release)
		}
	}
}

// TestSyncFS runs the real syncfs, and shows a closed store's sync fails
// rather than pretending.
func TestSyncFS(t *testing.T) {
	requireBatch(t)
	d := openDiskMode(t, t.TempDir(), SyncBatch)
	require.NoError(t, syncFS(d.rootDir))
	require.NoError(t, d.Close())
	require.Error(t, syncFS(d.rootDir))
}
