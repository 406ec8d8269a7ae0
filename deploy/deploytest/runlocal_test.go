package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/testenv"
)

// runLocal drives scripts/run-local.sh over binaries built for the test, with
// its data under a temporary directory and ports nobody else holds.
type runLocal struct {
	t         *testing.T
	script    string
	env       []string
	runDir    string
	coordPort int
	nodeBase  int
}

// scriptResult is one run of the script.
type scriptResult struct {
	code           int
	stdout, stderr string
}

// newRunLocal builds the binaries and picks the ports. extraEnv reaches the
// script and, through it, every process it starts.
func newRunLocal(t *testing.T, nodes int, extraEnv ...string) *runLocal {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster of real processes; skipped under -short")
	}
	root := repoRoot(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"./cmd/"+coordinatorBin, "./cmd/"+storageNodeBin, "./cmd/"+probeBin)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	r := &runLocal{t: t, script: filepath.Join(root, "scripts", "run-local.sh"), runDir: t.TempDir()}
	r.coordPort, r.nodeBase = freePorts(t, nodes)
	// Only what the script needs: a DATABASE_URL or REDIS_URL in the shell
	// running the tests must not reach the cluster.
	r.env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"DFS_BIN_DIR=" + bin,
		"DFS_RUN_DIR=" + r.runDir,
		"DFS_PORT=" + strconv.Itoa(r.coordPort),
		"DFS_NODE_BASE_PORT=" + strconv.Itoa(r.nodeBase),
		"DFS_READY_TIMEOUT=60",
		// Nodes join after two good probes: one at registration, one a sweep later.
		"HEALTH_CHECK_INTERVAL=1s",
	}, extraEnv...)
	t.Cleanup(r.cleanup)
	return r
}

// freePorts returns a free port for the coordinator and the first of n
// consecutive free ports for the nodes. Another program may take one before
// the script binds it; the script then says so and the test fails loudly.
func freePorts(t *testing.T, n int) (int, int) {
	t.Helper()
	hold := func(port int) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)) }
	coord, err := hold(0)
	require.NoError(t, err)
	defer coord.Close()
	for range 50 {
		first, err := hold(0)
		require.NoError(t, err)
		base := first.Addr().(*net.TCPAddr).Port
		held := []net.Listener{first}
		for i := 1; i < n; i++ {
			l, err := hold(base + i)
			if err != nil {
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		if len(held) == n {
			return coord.Addr().(*net.TCPAddr).Port, base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0, 0
}

func (r *runLocal) run(args ...string) scriptResult {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{r.script}, args...)...)
	cmd.Env = r.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := scriptResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.code = exit.ExitCode()
	} else {
		require.NoError(r.t, err, "run-local.sh %v", args)
	}
	return res
}

// ok runs the script and requires success.
func (r *runLocal) ok(args ...string) string {
	r.t.Helper()
	res := r.run(args...)
	require.Equal(r.t, 0, res.code, "run-local.sh %v\nstdout:\n%s\nstderr:\n%s", args, res.stdout, res.stderr)
	return res.stdout
}

// statusLine is one line of `status`.
type statusLine struct {
	pid   string
	port  int
	state string
}

func (r *runLocal) status() map[string]statusLine {
	r.t.Helper()
	out := map[string]statusLine{}
	for _, line := range strings.Split(strings.TrimSpace(r.ok("status")), "\n") {
		f := strings.Fields(line)
		require.Len(r.t, f, 4, "status line %q: name, pid, port, state", line)
		port, err := strconv.Atoi(f[2])
		require.NoError(r.t, err, line)
		require.Contains(r.t, []string{"UP", "DOWN"}, f[3], line)
		out[f[0]] = statusLine{pid: f[1], port: port, state: f[3]}
	}
	return out
}

// pids lists the pids in the run directory's pid files.
func (r *runLocal) pids() []int {
	files, _ := filepath.Glob(filepath.Join(r.runDir, "pids", "*.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cleanup stops the cluster, and kills whatever a failed test left behind.
func (r *runLocal) cleanup() {
	left := r.pids()
	r.run("stop")
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// alive reports whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 20*time.Millisecond, "pid %d still runs", pid)
}

// ringNodes asks the coordinator which nodes are on its ring.
func ringNodes(t *testing.T, port int) []string {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/api/nodes")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var nodes []struct {
		NodeID string `json:"nodeId"`
		OnRing bool   `json:"onRing"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&nodes))
	var on []string
	for _, n := range nodes {
		if n.OnRing {
			on = append(on, n.NodeID)
		}
	}
	return on
}

// TestRunLocal walks the script's whole interface on the embedded store:
// start, status, kill-node, restart-node, add-node, a second start refused,
// stop twice.
func TestRunLocal(t *testing.T) {
	r := newRunLocal(t, 4)
	out := r.ok("start", "3")
	require.Contains(t, out, "cluster ready at http://127.0.0.1:"+strconv.Itoa(r.coordPort)+" with 3 nodes")
	require.Contains(t, out, "metadata in "+filepath.Join(r.runDir, "coordinator"))
	// start returns once every node is on the ring.
	require.ElementsMatch(t, []string{"node-1", "node-2", "node-3"}, ringNodes(t, r.coordPort))

	st := r.status()
	require.Len(t, st, 4)
	require.Equal(t, r.coordPort, st["coordinator"].port)
	for i, name := range []string{"node-1", "node-2", "node-3"} {
		require.Equal(t, r.nodeBase+i, st[name].port, name)
	}
	for name, s := range st {
		require.Equal(t, "UP", s.state, name)
		pid, err := strconv.Atoi(s.pid)
		require.NoError(t, err, name)
		require.True(t, alive(pid), name)
	}

	killed, err := strconv.Atoi(st["node-2"].pid)
	require.NoError(t, err)
	require.Contains(t, r.ok("kill-node", "2"), "node-2 killed (SIGKILL, pid "+st["node-2"].pid+")")
	requireGone(t, killed)
	after := r.status()
	require.Equal(t, statusLine{pid: "-", port: r.nodeBase + 1, state: "DOWN"}, after["node-2"])
	require.Equal(t, "UP", after["node-1"].state)
	require.Contains(t, r.ok("kill-node", "2"), "node-2 is not running", "killing a dead node is no error")

	require.Contains(t, r.ok("restart-node", "2"), "node-2 restarted")
	after = r.status()
	require.Equal(t, "UP", after["node-2"].state)
	require.NotEqual(t, st["node-2"].pid, after["node-2"].pid)

	require.Contains(t, r.ok("add-node", "4"), "node-4 started")
	require.Equal(t, "UP", r.status()["node-4"].state)
	require.Contains(t, ringNodes(t, r.coordPort), "node-4")

	again := r.run("start")
	require.Equal(t, 1, again.code, again.stdout)
	require.Contains(t, again.stderr, "a cluster is already running")

	bad := r.run("kill-node", "x")
	require.Equal(t, 1, bad.code)
	require.Contains(t, bad.stderr, "want a node number")
	require.Equal(t, 2, r.run("frobnicate").code)

	pids := r.pids()
	require.Len(t, pids, 5)
	out = r.ok("stop")
	require.True(t, strings.HasPrefix(out, "coordinator stopped\n"), "the coordinator stops first:\n%s", out)
	for _, pid := range pids {
		requireGone(t, pid)
	}
	require.Equal(t, "nothing running\n", r.ok("stop"), "stop is idempotent")
	require.Contains(t, r.ok("status"), "no cluster started")
}

// TestRunLocalRefusesBusyPorts: a port in use stops start before anything
// runs, with a message that names the port and the way out.
func TestRunLocalRefusesBusyPorts(t *testing.T) {
	r := newRunLocal(t, 2)
	for _, tt := range []struct{ port int }{{r.coordPort}, {r.nodeBase + 1}} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(tt.port))
		require.NoError(t, err)
		res := r.run("start", "2")
		l.Close()
		require.Equal(t, 1, res.code, res.stdout)
		require.Contains(t, res.stderr, "port "+strconv.Itoa(tt.port)+" for ")
		require.Contains(t, res.stderr, "DFS_PORT and DFS_NODE_BASE_PORT")
		require.Empty(t, r.pids(), "nothing left running")
		require.Contains(t, r.ok("status"), "no cluster started")
	}
}

// TestRunLocalPostgres: with DATABASE_URL set, the coordinator keeps its
// metadata in PostgreSQL, not in its data directory.
func TestRunLocalPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real processes; skipped under -short")
	}
	dbURL := testenv.NewPostgresDB(t)
	r := newRunLocal(t, 1, "DATABASE_URL="+dbURL)
	require.Contains(t, r.ok("start", "1"), "metadata in PostgreSQL from DATABASE_URL")
	_, err := os.Stat(filepath.Join(r.runDir, "coordinator", "metadata.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "no embedded store")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var status string
	require.NoError(t, conn.QueryRow(ctx, "SELECT status FROM storage_nodes WHERE node_id = 'node-1'").Scan(&status))
	require.Equal(t, "HEALTHY", status)
	r.ok("stop")
}
