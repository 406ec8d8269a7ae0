package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
	"github.com/stretchr/testify/require"
)

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
	var stdout, stderr testenv.SyncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"cluster", "up", "-build=false", "-bin", bin, "-data", data, "-nodes", "2", "-port", "0", "-node-port", "0", "-s3-port", "0"},
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
	// The banner names the console and Swagger UI, and both are served there.
	for _, page := range []string{"console", "swagger-ui"} {
		m := regexp.MustCompile(`(?m)^  ` + page + `\s+(http://127\.0\.0\.1:\d+/` + page + `/)$`).FindStringSubmatch(out)
		require.NotNil(t, m, "no %s line in\n%s", page, out)
		resp, err := client.Get(m[1])
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, m[1])
	}
	// The S3 endpoint and the root key kept in the data directory.
	require.Regexp(t, `(?m)^  s3\s+http://127\.0\.0\.1:\d+$`, out)
	keyFile, err := os.Stat(filepath.Join(data, "root-key.json"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), keyFile.Mode().Perm(), "the root key is for its owner only")
	require.Regexp(t, `(?m)^try: AWS_ACCESS_KEY_ID=DFS\S+ AWS_SECRET_ACCESS_KEY=\S+ aws --endpoint-url http://\S+ s3 ls$`, out)
	coord := regexp.MustCompile(`(?m)^  coordinator\s+(http://\S+)$`).FindStringSubmatch(out)
	require.NotNil(t, coord, out)
	// "Up" means ready to store a file: every node is already on the ring.
	requireNodes(t, coord[1], map[string]string{"node-1": "HEALTHY on ring", "node-2": "HEALTHY on ring"})

	// Other terminals act on the running cluster through -data.
	code, status, _ := runDFS(t, "", "cluster", "status", "-data", data)
	require.Zero(t, code)
	require.Regexp(t, `(?m)^node-2\s+http://\S+\s+\d+\s+running\s`, status)
	code, stopped, _ := runDFS(t, "", "cluster", "stop-node", "node-2", "-kill", "-data", data)
	require.Zero(t, code)
	require.Contains(t, stopped, "node-2 killed")
	code, status, _ = runDFS(t, "", "cluster", "status", "-data", data)
	require.Zero(t, code)
	require.Regexp(t, `(?m)^node-2\s+http://\S+\s+-\s+stopped\s`, status)
	// The detector evicts it (HEALTH_CHECK_INTERVAL is 1s in a local cluster)…
	require.Eventually(t, func() bool {
		return nodeState(t, coord[1])["node-2"] == "UNHEALTHY off ring"
	}, 30*time.Second, 100*time.Millisecond)
	// … and restart-node returns only once it is back on the ring.
	code, restarted, stderrText := runDFS(t, "", "cluster", "restart-node", "node-2", "-data", data)
	require.Zero(t, code, stderrText)
	require.Contains(t, restarted, "node-2 is running again")
	requireNodes(t, coord[1], map[string]string{"node-1": "HEALTHY on ring", "node-2": "HEALTHY on ring"})

	code, _, stderrText = runDFS(t, "", "cluster", "restart-node", "node-9", "-data", data)
	require.Equal(t, 1, code)
	require.Contains(t, stderrText, `no process named "node-9"`)
	code, _, stderrText = runDFS(t, "", "cluster", "restart-node", "-data", data)
	require.Equal(t, 2, code)
	require.Contains(t, stderrText, "which process?")

	// A second cluster on the same data directory stops before starting
	// anything; one on the same ports names the flag that moves it.
	code, _, stderrText = runDFS(t, "", "cluster", "up", "-build=false", "-bin", bin, "-data", data, "-port", "0", "-node-port", "0", "-s3-port", "0")
	require.Equal(t, 1, code)
	require.Contains(t, stderrText, "a local cluster already runs on "+data)
	port := strings.TrimPrefix(coord[1], "http://127.0.0.1:")
	code, _, stderrText = runDFS(t, "", "cluster", "up", "-build=false", "-bin", bin, "-data", t.TempDir(), "-port", port, "-node-port", "0", "-s3-port", "0")
	require.Equal(t, 1, code)
	require.Contains(t, stderrText, "port "+port+" on 127.0.0.1 for coordinator is in use")
	require.Contains(t, stderrText, "choose another coordinator port with -port")

	interrupt()
	require.Equal(t, 0, <-exit, "stderr:\n%s", stderr.String())
	require.Contains(t, stdout.String(), "stopped")
	code, _, stderrText = runDFS(t, "", "cluster", "status", "-data", data)
	require.Equal(t, 1, code)
	require.Contains(t, stderrText, "no local cluster is running")
	for _, u := range urls {
		_, err := client.Get(u[1] + "/health/ready")
		require.Error(t, err, "%s still answers after the cluster stopped", u[1])
	}
}

// TestClusterUpWithAPIAuthKeys: with API_AUTH=keys the cluster's REST API
// needs the root key, and the wait for the nodes' admission sends it, so
// the cluster comes up instead of timing out on 401s.
func TestClusterUpWithAPIAuthKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	t.Setenv("API_AUTH", "keys")
	bin := filepath.Join(t.TempDir(), "bin")
	_, err := localcluster.Build(t.Context(), bin)
	require.NoError(t, err)
	data := t.TempDir()
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	var stdout, stderr testenv.SyncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"cluster", "up", "-build=false", "-bin", bin, "-data", data, "-nodes", "1", "-port", "0", "-node-port", "0", "-s3-port", "0"},
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

	coord := regexp.MustCompile(`(?m)^  coordinator\s+(http://\S+)$`).FindStringSubmatch(stdout.String())
	require.NotNil(t, coord, stdout.String())
	var key struct{ AccessKey, SecretKey string }
	b, err := os.ReadFile(filepath.Join(data, "root-key.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &key))
	for _, tc := range []struct {
		key, secret string
		want        int
	}{{"", "", http.StatusUnauthorized}, {key.AccessKey, key.SecretKey, http.StatusOK}} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, coord[1]+"/api/nodes", nil)
		require.NoError(t, err)
		if tc.key != "" {
			req.SetBasicAuth(tc.key, tc.secret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.want, resp.StatusCode, "key %q", tc.key)
	}
	interrupt()
	require.Equal(t, 0, <-exit, "stderr:\n%s", stderr.String())
}

// nodeState maps each node the coordinator knows to "STATUS on ring" or
// "STATUS off ring".
func nodeState(t *testing.T, coordinator string) map[string]string {
	resp, err := http.Get(coordinator + "/api/nodes")
	require.NoError(t, err)
	defer resp.Body.Close()
	var nodes []struct {
		NodeID string `json:"nodeId"`
		Status string `json:"status"`
		OnRing bool   `json:"onRing"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&nodes))
	state := make(map[string]string)
	for _, n := range nodes {
		where := "off ring"
		if n.OnRing {
			where = "on ring"
		}
		state[n.NodeID] = n.Status + " " + where
	}
	return state
}

func requireNodes(t *testing.T, coordinator string, want map[string]string) {
	t.Helper()
	require.Equal(t, want, nodeState(t, coordinator))
}

func TestPortHintNamesTheFlag(t *testing.T) {
	err := fmt.Errorf("start: %w", &localcluster.PortInUseError{Host: "127.0.0.1", Port: 8080, Process: localcluster.CoordinatorName})
	require.Equal(t, `stop what listens on 8080, or choose another coordinator port with -port (make run ARGS="-port 18080")`, portHint(err, 8080, 9001))
	err = &localcluster.PortInUseError{Host: "127.0.0.1", Port: 9003, Process: "node-3"}
	require.Equal(t, `stop what listens on 9003, or choose other node ports with -node-port, node-1's port (make run ARGS="-node-port 19001")`, portHint(err, 8080, 9001))
	require.Contains(t, portHint(&localcluster.PortInUseError{Port: 60000, Process: "node-1"}, 8080, 60000), `-node-port 50000`)
	require.Empty(t, portHint(errors.New("other"), 8080, 9001))
}

func TestClusterUsage(t *testing.T) {
	code, stdout, _ := runDFS(t, "", "cluster", "-h")
	require.Zero(t, code)
	for _, sub := range []string{"up", "status", "stop-node", "restart-node"} {
		require.Contains(t, stdout, "  "+sub)
	}
	code, _, stderr := runDFS(t, "", "cluster", "bogus")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown subcommand "bogus"`)
	code, _, stderr = runDFS(t, "", "cluster", "status", "-data", t.TempDir())
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no local cluster is running")
}

func TestControlSocketPathFitsASocket(t *testing.T) {
	short, err := controlSocket("/tmp/d")
	require.NoError(t, err)
	require.Equal(t, "/tmp/d/cluster.sock", short)
	long := "/tmp/" + strings.Repeat("x", 120)
	p1, err := controlSocket(long)
	require.NoError(t, err)
	require.LessOrEqual(t, len(p1), maxSocketPath)
	p2, err := controlSocket(long + "y")
	require.NoError(t, err)
	require.NotEqual(t, p1, p2, "each data directory has its own socket")
}

func TestClusterUpWithSeveralCoordinatorsNeedsPostgreSQL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	code, _, stderr := runDFS(t, "", "cluster", "up", "-build=false", "-bin", t.TempDir(), "-data", t.TempDir(), "-coordinators", "3")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-coordinators 3 needs DATABASE_URL")
	code, _, stderr = runDFS(t, "", "cluster", "up", "-build=false", "-bin", t.TempDir(), "-data", t.TempDir(), "-coordinators", "0")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-coordinators must be at least 1")
}

// TestClusterUpWithThreeCoordinators: `dfs cluster up -coordinators 3` over
// PostgreSQL and Redis puts HAProxy in front of three coordinators; the
// nodes join through it, and it answers while one coordinator is killed.
func TestClusterUpWithThreeCoordinators(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	t.Setenv("DATABASE_URL", pgtest.Start(t).URL())
	t.Setenv("REDIS_URL", redistest.Start(t).URL())
	bin := filepath.Join(t.TempDir(), "bin")
	_, err := localcluster.Build(t.Context(), bin)
	require.NoError(t, err)
	data := t.TempDir()

	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	var stdout, stderr testenv.SyncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"cluster", "up", "-build=false", "-bin", bin, "-data", data, "-nodes", "2", "-coordinators", "3",
			"-port", "0", "-node-port", "0", "-s3-port", "0"}, stdio{in: strings.NewReader(""), out: &stdout, err: &stderr})
	}()
	var code int
	require.Eventually(t, func() bool {
		select {
		case code = <-exit:
			return true
		default:
			return strings.Contains(stdout.String(), "press Ctrl-C to stop")
		}
	}, 90*time.Second, 20*time.Millisecond)
	require.Zero(t, code, "exited early:\n%s\n%s", stdout.String(), stderr.String())
	out := stdout.String()
	front := regexp.MustCompile(`(?m)^  haproxy\s+(http://\S+) \(HAProxy in front of coordinator, coordinator-2, coordinator-3\)$`).FindStringSubmatch(out)
	require.NotNil(t, front, out)
	for _, name := range []string{"coordinator", "coordinator-2", "coordinator-3"} {
		m := regexp.MustCompile(`(?m)^  ` + name + `\s+(http://\S+)$`).FindStringSubmatch(out)
		require.NotNil(t, m, "no %s line in\n%s", name, out)
		requireNodes(t, m[1], map[string]string{"node-1": "HEALTHY on ring", "node-2": "HEALTHY on ring"})
	}
	requireNodes(t, front[1], map[string]string{"node-1": "HEALTHY on ring", "node-2": "HEALTHY on ring"})

	code, status, _ := runDFS(t, "", "cluster", "status", "-data", data)
	require.Zero(t, code)
	for _, name := range []string{"coordinator", "coordinator-2", "coordinator-3", "haproxy", "node-1", "node-2"} {
		require.Regexp(t, `(?m)^`+name+`\s+http://\S+\s+\d+\s+running\s`, status)
	}
	code, _, _ = runDFS(t, "", "cluster", "stop-node", "coordinator-2", "-kill", "-data", data)
	require.Zero(t, code)
	for range 10 {
		requireNodes(t, front[1], map[string]string{"node-1": "HEALTHY on ring", "node-2": "HEALTHY on ring"})
	}
	code, restarted, stderrText := runDFS(t, "", "cluster", "restart-node", "coordinator-2", "-data", data)
	require.Zero(t, code, stderrText)
	require.Contains(t, restarted, "coordinator-2 is running again")

	interrupt()
	require.Equal(t, 0, <-exit, "stderr:\n%s", stderr.String())
}
