package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer the command's goroutines may write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestClusterUpWithoutBinariesFails(t *testing.T) {
	bin := t.TempDir()
	code, stdout, stderr := runDFS(t, "", "cluster", "up", "-build=false", "-bin", bin, "-data", t.TempDir(), "-port", "0", "-node-port", "0")
	require.Equal(t, 1, code)
	require.Contains(t, stdout, "starting storage nodes only; the coordinator is not built yet")
	require.Contains(t, stderr, "storage-node binary not found")
}

// TestClusterUpRunsUntilInterrupted runs `dfs cluster up` in-process on free
// ports; cancelling its context stands in for Ctrl-C.
func TestClusterUpRunsUntilInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "bin")
	_, err := localcluster.Build(t.Context(), bin)
	require.NoError(t, err)
	data := t.TempDir()

	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"cluster", "up", "-build=false", "-bin", bin, "-data", data, "-nodes", "2", "-port", "0", "-node-port", "0"},
			stdio{in: strings.NewReader(""), out: &stdout, err: &stderr})
	}()

	var code int
	require.Eventually(t, func() bool {
		select {
		case code = <-exit:
			return true
		default:
			return strings.Contains(stdout.String(), "press Ctrl-C to stop")
		}
	}, 60*time.Second, 20*time.Millisecond)
	require.Zero(t, code, "exited early:\n%s\n%s", stdout.String(), stderr.String())

	out := stdout.String()
	urls := regexp.MustCompile(`(?m)^  node-\d+\s+(http://\S+)$`).FindAllStringSubmatch(out, -1)
	require.Len(t, urls, 2, out)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, u := range urls {
		resp, err := client.Get(u[1] + "/health/ready")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, u[1])
	}
	require.Contains(t, out, filepath.Join(data, "logs", "<name>.log"))

	interrupt()
	require.Equal(t, 0, <-exit, "stderr:\n%s", stderr.String())
	require.Contains(t, stdout.String(), "stopped")
	for _, u := range urls {
		_, err := client.Get(u[1] + "/health/ready")
		require.Error(t, err, "%s still answers after the cluster stopped", u[1])
	}
}
