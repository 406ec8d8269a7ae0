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

// TestZonesAndWeightsAgainstALocalCluster sets a node's zone and weight on
// a real coordinator, sees the ring follow in dfs nodes and dfs nodes ring,
// and resets them.
func TestZonesAndWeightsAgainstALocalCluster(t *testing.T) {
	url := startCluster(t)
	nodes := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runDFS(t, "", append(append([]string{"nodes"}, args...), "-url", url)...)
		require.Equal(t, exitOK, code, "%s%s", stdout, stderr)
		return stdout
	}

	out := nodes("set", "node-1", "zone=rack-1", "weight=2")
	require.Regexp(t, `(?m)^zone\s+rack-1 \(set by an operator; the node reports no zone\)$`, out)
	require.Regexp(t, `(?m)^weight\s+2 \(set by an operator; the node reports 1\)$`, out)
	require.Regexp(t, `(?m)^ring\s+200 points, \d+\.\d\d % of the keyspace$`, out)

	out = nodes()
	require.Contains(t, out, "the ring has 3 nodes × 100 virtual nodes per unit of weight, 400 points")
	require.Regexp(t, `(?m)^node-1\s+HEALTHY\s+yes\s+rack-1\*\s+2\*\s+200\s`, out)
	require.Regexp(t, `(?m)^node-2\s+HEALTHY\s+yes\s+-\s+1\s+100\s`, out)
	require.Contains(t, out, "* set by an operator")

	out = nodes("ring")
	require.Regexp(t, `(?m)^node-1\s+rack-1\s+2\s+200\s+\d+\.\d\d %$`, out)
	require.Regexp(t, `(?m)^rack-1\s+1\s+\d+\.\d\d %$`, out)
	require.Contains(t, out, "of no zone, each a zone of its own: ")
	require.Less(t, strings.Index(out, "node-1 "), strings.Index(out, "node-2 "), "node-1 has the largest share at twice the weight")

	out = nodes("set", "node-1", "-reset", "zone,weight")
	require.Regexp(t, `(?m)^zone\s+no zone \(the node's own\)$`, out)
	require.Regexp(t, `(?m)^ring\s+100 points, `, out)
	require.Contains(t, nodes("ring"), "no node has a zone: each node is a zone of its own")

	code, _, stderr := runDFS(t, "", "nodes", "set", "-url", url, "node-9", "weight=2")
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "NODE_NOT_FOUND")
}
