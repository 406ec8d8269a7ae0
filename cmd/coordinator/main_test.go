package main

import (
	"path/filepath"
	"testing"

	"github.com/dfs-project/dfs/internal/daemonargs/daemontest"
	"github.com/dfs-project/dfs/internal/dirlock"
)

// TestBinary runs the built binary; it is built once for both checks.
func TestBinary(t *testing.T) {
	bin := daemontest.Build(t, "coordinator")
	t.Run("command line", func(t *testing.T) {
		daemontest.CheckCommandLine(t, bin, "coordinator", "DATA_DIRECTORY")
	})
	t.Run("second on one directory", func(t *testing.T) { testSecondCoordinatorOnOneDirectoryStops(t, bin) })
}

// testSecondCoordinatorOnOneDirectoryStops: a second coordinator on a
// running one's data directory (embedded store) stops at once, before it
// opens the store or empties the upload spool, and the first goes on
// serving.
func testSecondCoordinatorOnOneDirectoryStops(t *testing.T, bin string) {
	if !dirlock.Supported {
		t.Skip("no directory lock on this system")
	}
	dir := t.TempDir()
	env := []string{"DATA_DIRECTORY=" + dir, "HEALTH_CHECK_INTERVAL=1h", "REPAIR_INTERVAL=1h"}
	// The planted file is an upload the first coordinator is spooling, which
	// a second one's start would remove with the rest of the spool.
	daemontest.CheckSecondOnOneDirectoryStops(t, bin, daemontest.SecondOnOneDirectory{
		Name: "coordinator", Dir: dir, FirstEnv: env, SecondEnv: env,
		Planted: filepath.Join(dir, "spool", "upload-1"),
	})
}
