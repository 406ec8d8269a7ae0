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
	first := daemontest.Start(t, bin, env)

	// An upload the first coordinator is spooling, which a second one's
	// start would remove with the rest of the spool.
	spooled := filepath.Join(dir, "spool", "upload-1")
	require.NoError(t, os.WriteFile(spooled, []byte("half an upload"), 0o640))

	second := daemontest.StartNoWait(t, bin, env)
	require.Equal(t, 1, second.Wait(t, 10*time.Second))
	require.Contains(t, second.Stderr(), fmt.Sprintf("data directory %s is in use: another coordinator (pid ", dir))
	require.FileExists(t, spooled, "the refused coordinator emptied the first one's spool")
	require.True(t, first.Live(), "the first coordinator goes on serving")
	require.False(t, first.Exited())
}
