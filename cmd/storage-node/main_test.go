package main

import (
	"path/filepath"
	"testing"

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
	// The planted file is a write in progress of the first node's, which a
	// second node's recovery at start would delete as a crash's leftover.
	daemontest.CheckSecondOnOneDirectoryStops(t, bin, daemontest.SecondOnOneDirectory{
		Name: "storage node", Dir: dir,
		FirstEnv:  []string{"STORAGE_NODE_ID=node-1", "STORAGE_DATA_DIRECTORY=" + dir},
		SecondEnv: []string{"STORAGE_NODE_ID=node-2", "STORAGE_DATA_DIRECTORY=" + dir},
		Planted:   filepath.Join(dir, "01", "23", ".tmp-0123abcd-1"),
	})
}
