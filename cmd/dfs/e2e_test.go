//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
)

// startCluster builds the binaries and starts a coordinator with three
// storage nodes on free ports, then brings every node onto the ring with
// explicit health sweeps instead of waiting for the detector.
func startCluster(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "bin")
	_, err := localcluster.Build(t.Context(), bin)
	require.NoError(t, err)
	c, err := localcluster.Start(context.WithoutCancel(t.Context()), localcluster.Options{
		BinDir:  bin,
		DataDir: t.TempDir(),
		Nodes:   3,
		Logger:  slog.New(slog.DiscardHandler),
		// These tests are about the CLI, not durability. In batch mode a
		// node's delete waits for a sync of the whole file system, which
		// other packages' tests fill with dirty data (a 1 GiB upload runs
		// beside this one in CI) until it outlasts the coordinator's 5 s
		// node-call timeout; per-file syncs do not wait for them.
		NodeEnv: []string{"STORAGE_SYNC_MODE=file"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })

	api, err := client.New(c.CoordinatorURL(), client.Options{})
	require.NoError(t, err)
	// Nodes register on their own schedule after they are ready, and
	// HEALTH_SUCCESS_THRESHOLD (2) good probes then put each on the ring:
	// sweep until all three are there rather than wait for the detector.
	require.Eventually(t, func() bool {
		res, err := api.HealthCheck(t.Context())
		if err != nil {
			return false
		}
		onRing := 0
		for _, n := range res.Nodes {
			if n.OnRing {
				onRing++
			}
		}
		return onRing == 3
	}, 30*time.Second, 100*time.Millisecond, "the nodes did not join the ring")
	return c.CoordinatorURL()
}

// TestAgainstALocalCluster runs the client commands against real processes:
// put → info → get (byte for byte) → verify → ls → rm.
func TestAgainstALocalCluster(t *testing.T) {
	url := startCluster(t)
	dir := t.TempDir()
	content := make([]byte, 3<<20+17) // larger than the coordinator's 1 MiB download buffer
	_, err := rand.Read(content)
	require.NoError(t, err)
	src := filepath.Join(dir, "payload.bin")
	require.NoError(t, os.WriteFile(src, content, 0o644))

	code, stdout, stderr := dfs(t, url, "", "health")
	require.Equal(t, exitOK, code, "%s%s", stdout, stderr)
	code, stdout, stderr = dfs(t, url, "", "nodes")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "the ring has 3 nodes × 100 virtual nodes")
	require.Equal(t, 3, strings.Count(stdout, " HEALTHY  yes "), stdout)

	code, stdout, stderr = dfs(t, url, "", "put", "-json", src)
	require.Equal(t, exitOK, code, stderr)
	var up client.UploadResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &up))
	require.Equal(t, client.FileActive, up.Status)
	require.Equal(t, "payload.bin", up.FileName)
	require.Equal(t, int64(len(content)), up.SizeBytes)
	require.Len(t, up.Replicas, 2)
	id := up.FileID

	code, stdout, stderr = dfs(t, url, "", "info", id)
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^status\s+ACTIVE$`, stdout)
	require.Regexp(t, `(?m)^primary\s+`+up.PrimaryNode+`$`, stdout)
	require.Equal(t, 3, strings.Count(stdout, "  ACTIVE  "), "three ACTIVE copies:\n%s", stdout)

	out := filepath.Join(dir, "copy.bin")
	code, stdout, stderr = dfs(t, url, "", "get", id, "-o", out)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "SHA-256 verified")
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(content, got), "the downloaded bytes differ from the uploaded ones")

	code, stdout, stderr = dfs(t, url, "", "verify", id)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "ACTIVE, 3 good copies")
	require.Equal(t, 3, strings.Count(stdout, "  OK  "), stdout)

	code, stdout, stderr = dfs(t, url, "", "ls")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^`+id+`\s+ACTIVE\s+3\.0 MiB\s.*payload\.bin$`, stdout)

	code, stdout, stderr = dfs(t, url, "", "rm", id)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "deleted "+id+"\n", stdout)

	code, _, stderr = dfs(t, url, "", "info", id)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "404 FILE_NOT_FOUND")
	code, _, stderr = dfs(t, url, "", "get", id, "-o", filepath.Join(dir, "gone"))
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "FILE_NOT_FOUND")
	require.NoFileExists(t, filepath.Join(dir, "gone"))
}
