//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/testenv"
)

// stopTimeout is what the cluster tests give a process between SIGTERM and
// SIGKILL; the coordinator must exit through its orderly shutdown within it
// whatever its clients are doing.
const stopTimeout = 5 * time.Second

// TestSIGTERMUnderLoad stops a real coordinator while clients hold it busy in
// the ways that used to keep it running past the cluster's stop timeout, and
// requires each stop to be the graceful one: exit status 0 within
// stopTimeout (localcluster kills it otherwise and StopCoordinator fails),
// and "coordinator stopped" as its last word.
func TestSIGTERMUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	redisURL := testenv.RedisURL(t)
	bin := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, localcluster.BuildForTests(t.Context(), bin))
	c, err := localcluster.Start(context.WithoutCancel(t.Context()), localcluster.Options{
		BinDir: bin, DataDir: t.TempDir(), Nodes: 2, StopTimeout: stopTimeout,
		Logger: slog.New(slog.DiscardHandler),
		CoordinatorEnv: []string{
			"REDIS_URL=" + redisURL, "HEALTH_CHECK_INTERVAL=1s", "REPLICATION_FACTOR=2",
			// Automatic rebalances stay off, so the manual one below has
			// the third node's share to move, slowly.
			"REBALANCE_ON_MEMBERSHIP_CHANGE=false", "REBALANCE_BANDWIDTH=64KB", "REBALANCE_PARALLELISM=1",
		},
		NodeEnv: []string{"REGISTRATION_INTERVAL=1s", "STORAGE_SYNC_MODE=file"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	require.NoError(t, c.WaitAdmitted(t.Context()))
	base := c.CoordinatorURL()

	big := upload(t, base, 24<<20)
	var small []string
	for range 20 {
		small = append(small, upload(t, base, 256<<10))
	}
	third, err := c.AddNode(t.Context())
	require.NoError(t, err)
	require.NoError(t, c.WaitAdmitted(t.Context(), third))

	cases := []struct {
		name string
		// busy puts the load on the coordinator and returns once it is in
		// place; what it leaves open is closed by the test's cleanup.
		busy func(t *testing.T, logged func() string)
	}{
		{"a connection that never sends a request", func(t *testing.T, _ func() string) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close() })
		}},
		{"a download the client stopped reading", func(t *testing.T, _ func() string) {
			resp, err := http.Get(base + "/api/files/" + big)
			require.NoError(t, err)
			t.Cleanup(func() { resp.Body.Close() })
			require.Equal(t, http.StatusOK, resp.StatusCode)
			_, err = io.ReadFull(resp.Body, make([]byte, 64<<10))
			require.NoError(t, err)
		}},
		{"an upload whose body stalls", func(t *testing.T, _ func() string) {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.Close() })
			mw := multipart.NewWriter(pw)
			req, err := http.NewRequest(http.MethodPost, base+"/api/files", pr)
			require.NoError(t, err)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			go func() {
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			part, err := mw.CreateFormFile("file", "stalled.bin")
			require.NoError(t, err)
			_, err = part.Write(make([]byte, 1<<20))
			require.NoError(t, err)
		}},
		{"a manual rebalance moving files", func(t *testing.T, logged func() string) {
			go func() {
				if resp, err := http.Post(base+"/api/admin/rebalance", "", nil); err == nil {
					resp.Body.Close()
				}
			}()
			require.Eventually(t, func() bool {
				return strings.Contains(logged(), "rebalance started")
			}, 10*time.Second, 20*time.Millisecond, "the rebalance did not start")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(coordinatorLog(t, c))
			tc.busy(t, func() string { return coordinatorLog(t, c)[before:] })
			stopErr := c.StopCoordinator()
			run := coordinatorLog(t, c)[before:]
			// The next case needs a coordinator, whatever became of this one.
			require.NoError(t, c.StartCoordinator(t.Context()))
			require.NoError(t, stopErr, "the coordinator must exit with status 0 within %s of SIGTERM", stopTimeout)
			require.Contains(t, run, "coordinator shutting down")
			lines := strings.Split(strings.TrimSpace(run), "\n")
			require.GreaterOrEqual(t, len(lines), 2, run)
			require.Contains(t, lines[len(lines)-1], "ended: exit status 0 ===", run)
			require.Contains(t, lines[len(lines)-2], "coordinator stopped", "the coordinator's last word:\n%s", run)
		})
	}
	require.NoError(t, c.WaitAdmitted(t.Context()))
	for _, id := range append(small, big) {
		resp, err := http.Get(base + "/api/files/" + id + "/metadata")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "file %s after the restarts", id)
	}
}

func coordinatorLog(t *testing.T, c *localcluster.Cluster) string {
	b, err := os.ReadFile(c.LogPath(localcluster.CoordinatorName))
	require.NoError(t, err)
	return string(b)
}

// upload stores size random bytes and returns the file's id.
func upload(t *testing.T, base string, size int) string {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", "f.bin")
	require.NoError(t, err)
	_, err = io.CopyN(part, rand.Reader, int64(size))
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	resp, err := http.Post(base+"/api/files", mw.FormDataContentType(), &body)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(b))
	var res struct {
		FileID string `json:"fileId"`
	}
	require.NoError(t, json.Unmarshal(b, &res))
	require.NotEmpty(t, res.FileID, string(b))
	return res.FileID
}
