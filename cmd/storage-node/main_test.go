package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/daemonargs/daemontest"
	"github.com/dfs-project/dfs/internal/dirlock"
)

// TestBinary runs the built binary; it is built once for both checks.
func TestBinary(t *testing.T) {
	bin := daemontest.Build(t, "storage-node")
	t.Run("command line", func(t *testing.T) {
		daemontest.CheckCommandLine(t, bin, "storage-node", "STORAGE_DATA_DIRECTORY")
	})
	t.Run("second on one directory", func(t *testing.T) { testSecondNodeOnOneDirectoryStops(t, bin) })
}

// testSecondNodeOnOneDirectoryStops: a second node on a running node's
// directory stops at once and cleans up nothing of the first one's, which
// goes on serving.
func testSecondNodeOnOneDirectoryStops(t *testing.T, bin string) {
	if !dirlock.Supported {
		t.Skip("no directory lock on this system")
	}
	dir := t.TempDir()
	first := daemontest.Start(t, bin, []string{"STORAGE_NODE_ID=node-1", "STORAGE_DATA_DIRECTORY=" + dir})

	// A write in progress of the first node's, which a second node's
	// recovery at start would delete as a crash's leftover.
	inFlight := filepath.Join(dir, "01", "23", ".tmp-0123abcd-1")
	require.NoError(t, os.MkdirAll(filepath.Dir(inFlight), 0o750))
	require.NoError(t, os.WriteFile(inFlight, []byte("half a write"), 0o640))

	second := daemontest.StartNoWait(t, bin, []string{"STORAGE_NODE_ID=node-2", "STORAGE_DATA_DIRECTORY=" + dir})
	require.Equal(t, 1, second.Wait(t, 10*time.Second))
	require.Contains(t, second.Stderr(), fmt.Sprintf("data directory %s is in use: another storage node (pid ", dir))
	require.FileExists(t, inFlight, "the refused node cleaned up the first one's write")
	require.True(t, first.Live(), "the first node goes on serving")
	require.False(t, first.Exited())
}
