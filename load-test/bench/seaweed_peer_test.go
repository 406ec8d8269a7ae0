//go:build peer

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSeaweedfsQuick runs the seaweedfs phase on its own in -quick mode
// against the weed binary WEED names. CI has no weed binary, so the test is
// built only with the tag peer (`make test-peer WEED=/path/to/weed`), and
// fails when WEED is unset.
func TestSeaweedfsQuick(t *testing.T) {
	weed := os.Getenv("WEED")
	if weed == "" {
		t.Fatal("WEED is not set: give the weed binary to run the seaweedfs phase against (make test-peer WEED=/path/to/weed)")
	}
	if _, err := exec.LookPath(weed); err != nil {
		t.Fatalf("WEED=%s: %v", weed, err)
	}
	out := filepath.Join(t.TempDir(), "results.json")
	code := run([]string{"-quick", "-only", "seaweedfs", "-large-size", "16MiB", "-json", out})
	require.Zero(t, code, "the seaweedfs phase failed")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	for _, key := range []string{peerUploadSynced, peerUpload, peerDownload, peerBigUp, peerBigDown, peerBigUpSynced} {
		require.Contains(t, string(data), `"`+key+`"`)
	}
	require.Contains(t, string(data), "holds at least the")
}
