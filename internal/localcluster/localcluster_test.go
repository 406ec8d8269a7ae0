//go:build linux

package localcluster

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/testenv"
	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	buildRoot string // the temporary directory this test run created, if any
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildRoot != "" {
		os.RemoveAll(buildRoot)
	}
	os.Exit(code)
}

// binaries builds the module's binaries once per test run and returns their
// directory. The storage node is required; the coordinator is used if it has
// been written.
func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	buildOnce.Do(func() {
		if buildRoot, buildErr = os.MkdirTemp("", "localcluster-bin-"); buildErr != nil {
			return
		}
		binDir = filepath.Join(buildRoot, "bin")
		var res BuildResult
		res, buildErr = Build(context.Background(), binDir)
		if buildErr == nil && checkBinary(binDir, StorageNodeBinary) != nil {
			buildErr = errs.E(errs.NotFound, "cmd/storage-node has no source (built %v, skipped %v)", res.Built, res.Skipped)
		}
	})
	require.NoError(t, buildErr)
	return binDir
}

var probe = &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}

// readyStatus returns the status of GET base/health/ready, or 0 if nothing
// answered.
func readyStatus(base string) int {
	resp, err := probe.Get(base + "/health/ready")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// procField reads one field of /proc/<pid>/status, such as State or VmHWM.
func procField(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + field + `:\s*(.*)$`).FindSubmatch(b)
	require.NotNil(t, m, "no %s in /proc/%d/status", field, pid)
	return string(m[1])
}

// procEnv returns one variable of a running process's environment.
func procEnv(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == key {
			return v
		}
	}
	return ""
}

func TestClusterProcessControl(t *testing.T) {
	bin := binaries(t)
	ctx := t.Context()
	data := t.TempDir()
	var tee testenv.SyncBuffer
	exits := make(chan string, 10)
	c, err := Start(ctx, Options{
		BinDir:         bin,
		DataDir:        data,
		Nodes:          3,
		CoordinatorEnv: []string{"HEALTH_CHECK_INTERVAL=1s"},
		NodeEnv:        []string{"REGISTRATION_INTERVAL=1s"},
		Tee:            &tee,
		StopTimeout:    5 * time.Second,
		OnExit:         func(name string, _ error) { exits <- name },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })

	require.Equal(t, []string{"node-1", "node-2", "node-3"}, c.Nodes())
	for _, name := range c.Nodes() {
		require.Equal(t, http.StatusOK, readyStatus(c.NodeURL(name)), name)
		require.NotZero(t, c.PID(name), name)
		require.Equal(t, filepath.Join(data, name), c.DataDir(name))
		require.Equal(t, name, procEnv(t, c.PID(name), "STORAGE_NODE_ID"))
		require.Equal(t, c.CoordinatorURL(), procEnv(t, c.PID(name), "COORDINATOR_URL"))
	}
	if c.HasCoordinator() {
		require.Equal(t, http.StatusOK, readyStatus(c.CoordinatorURL()))
		require.Equal(t, filepath.Join(data, CoordinatorName), procEnv(t, c.PID(CoordinatorName), "DATA_DIRECTORY"))
	} else {
		t.Log("no coordinator binary yet: tested the storage nodes only")
	}

	// SIGKILL: the node stops answering; a restart brings it back on the
	// same port with the same data directory.
	n2 := NodeName(2)
	oldPID, url := c.PID(n2), c.NodeURL(n2)
	require.NoError(t, c.KillNode(n2))
	require.True(t, processGone(oldPID), "pid %d still exists after KillNode", oldPID)
	require.Zero(t, c.PID(n2))
	require.Zero(t, readyStatus(url), "a killed node must not answer")
	require.Equal(t, errs.Conflict, errs.KindOf(c.KillNode(n2)), "killing a dead node is a mistake")
	require.Equal(t, errs.Conflict, errs.KindOf(c.PauseNode(n2)))

	require.NoError(t, c.StartNode(ctx, n2))
	newPID := c.PID(n2)
	require.NotZero(t, newPID)
	require.NotEqual(t, oldPID, newPID)
	require.Equal(t, url, c.NodeURL(n2))
	require.Equal(t, http.StatusOK, readyStatus(url))
	require.Equal(t, filepath.Join(data, n2), procEnv(t, newPID, "STORAGE_DATA_DIRECTORY"))
	require.Equal(t, errs.Conflict, errs.KindOf(c.StartNode(ctx, n2)), "a running node cannot be started twice")
	log, err := os.ReadFile(c.LogPath(n2))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(log), "=== localcluster: starting "+n2), "both runs append to one log")

	// SIGSTOP freezes the process; SIGCONT brings it back.
	n3 := NodeName(3)
	require.NoError(t, c.PauseNode(n3))
	require.True(t, strings.HasPrefix(procField(t, c.PID(n3), "State"), "T"), "a paused process is stopped")
	require.Zero(t, readyStatus(c.NodeURL(n3)), "a paused node must not answer")
	require.NoError(t, c.ResumeNode(n3))
	require.Equal(t, http.StatusOK, readyStatus(c.NodeURL(n3)))

	// A crash nobody asked for is reported to OnExit; an asked-for one
	// (KillNode above) was not.
	n1 := NodeName(1)
	require.NoError(t, syscall.Kill(c.PID(n1), syscall.SIGKILL))
	require.Equal(t, n1, <-exits)
	require.NoError(t, c.StartNode(ctx, n1))

	// StopNode on a paused node still stops it gracefully.
	require.NoError(t, c.PauseNode(n3))
	pid3 := c.PID(n3)
	require.NoError(t, c.StopNode(n3), "the storage node must exit with status 0 on SIGTERM")
	require.True(t, processGone(pid3))

	name, err := c.AddNode(ctx)
	require.NoError(t, err)
	require.Equal(t, "node-4", name)
	require.Equal(t, http.StatusOK, readyStatus(c.NodeURL(name)))
	require.Equal(t, []string{"node-1", "node-2", "node-3", "node-4"}, c.Nodes())

	var pids []int
	for _, name := range append(c.Nodes(), CoordinatorName) {
		if pid := c.PID(name); pid != 0 {
			pids = append(pids, pid)
		}
	}
	require.NoError(t, c.Stop())
	for _, pid := range pids {
		require.True(t, processGone(pid), "pid %d outlived Stop", pid)
	}
	for _, name := range c.Nodes() {
		require.Zero(t, readyStatus(c.NodeURL(name)), name)
	}
	require.NoError(t, c.Stop(), "a second Stop does nothing")
	require.Equal(t, errs.Conflict, errs.KindOf(c.StartNode(ctx, n1)), "a stopped cluster stays stopped")
	_, err = c.AddNode(ctx)
	require.Equal(t, errs.Conflict, errs.KindOf(err))
	require.Empty(t, exits, "no process exited unasked after the crash")

	out := tee.String()
	require.Contains(t, out, "[node-4] === localcluster: starting node-4")
	require.Contains(t, out, "[node-1] === localcluster: node-1 (pid ")
}

func TestCancellingTheContextEndsEveryProcess(t *testing.T) {
	bin := binaries(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c, err := Start(ctx, Options{BinDir: bin, DataDir: t.TempDir(), Nodes: 1, StopTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	var pids []int
	for _, name := range append(c.Nodes(), CoordinatorName) {
		if pid := c.PID(name); pid != 0 {
			pids = append(pids, pid)
		}
	}

	cancel()
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if !processGone(pid) {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every process ends when the context is cancelled")
	require.Equal(t, errs.Unavailable, errs.KindOf(c.StartNode(context.Background(), NodeName(1))))
}

// endedPIDs returns the pids named in the end banners of every log in dir.
func endedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	var pids []int
	for _, path := range logs {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`\(pid (\d+)\) ended`).FindAllSubmatch(b, -1) {
			pid, err := strconv.Atoi(string(m[1]))
			require.NoError(t, err)
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestFailedStartLeavesNothingRunning(t *testing.T) {
	bin := binaries(t)
	data := t.TempDir()
	// The contract makes a bad configuration value stop a daemon at start
	// with a message naming the variable.
	_, err := Start(t.Context(), Options{
		BinDir:  bin,
		DataDir: data,
		Nodes:   2,
		NodeEnv: []string{"REGISTRATION_INTERVAL=soon"},
	})
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.Contains(t, err.Error(), "exited before it was ready")
	require.Contains(t, err.Error(), "REGISTRATION_INTERVAL", "the error quotes the log that names the cause")

	pids := endedPIDs(t, filepath.Join(data, "logs"))
	require.NotEmpty(t, pids)
	for _, pid := range pids {
		require.True(t, processGone(pid), "pid %d outlived a failed Start", pid)
	}
}

func TestStartGivesUpAfterReadyTimeout(t *testing.T) {
	bin := binaries(t)
	data := t.TempDir()
	_, err := Start(t.Context(), Options{BinDir: bin, DataDir: data, Nodes: 1, ReadyTimeout: time.Nanosecond})
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.Contains(t, err.Error(), "did not answer")
	require.Contains(t, err.Error(), "last lines of")
	for _, pid := range endedPIDs(t, filepath.Join(data, "logs")) {
		require.True(t, processGone(pid), "pid %d outlived a failed Start", pid)
	}
}

// A process whose freely picked port another program takes before it can
// listen on it (here a server that answers every readiness probe, the way a
// process of another cluster would) is started again on a new port, and
// Start is not fooled by the other program's answers. When the coordinator
// moves, the nodes are told its new address.
func TestAProcessWhosePortWasTakenMovesToAnother(t *testing.T) {
	bin := binaries(t)
	squatters := map[string]*httptest.Server{}
	beforeStart = func(name string, port, attempt int) {
		if (name != NodeName(1) && name != CoordinatorName) || attempt != 1 {
			return
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		require.NoError(t, err)
		s := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"status":"UP"}`))
		})}}
		s.Start()
		squatters[name] = s
	}
	t.Cleanup(func() {
		beforeStart = nil
		for _, s := range squatters {
			s.Close()
		}
	})
	c, err := Start(t.Context(), Options{BinDir: bin, DataDir: t.TempDir(), Nodes: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	require.Len(t, squatters, 2, "the hook ran for the coordinator and node-1")

	for _, name := range []string{CoordinatorName, NodeName(1)} {
		taken := squatters[name].Listener.Addr().(*net.TCPAddr).Port
		u, err := url.Parse(c.NodeURL(name))
		require.NoError(t, err)
		require.NotEqual(t, strconv.Itoa(taken), u.Port(), "%s moved off the taken port", name)
		pid := c.PID(name)
		require.Equal(t, u.Port(), procEnv(t, pid, "SERVER_PORT"), name)
		require.True(t, holdsPort(pid, mustAtoi(t, u.Port())), "%s itself listens there", name)
		require.Equal(t, http.StatusOK, readyStatus(c.NodeURL(name)), name)
		log, err := os.ReadFile(c.LogPath(name))
		require.NoError(t, err)
		require.Contains(t, string(log), "address already in use", "the first start of %s met the taken port", name)
	}
	require.Equal(t, c.CoordinatorURL(), c.NodeURL(CoordinatorName))
	for _, n := range c.Nodes() {
		require.Equal(t, c.CoordinatorURL(), procEnv(t, c.PID(n), "COORDINATOR_URL"), n)
	}
	u, _ := url.Parse(c.NodeURL(NodeName(1)))
	require.Equal(t, u.Port(), procEnv(t, c.PID(NodeName(1)), "STORAGE_ADVERTISED_PORT"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.WaitAdmitted(ctx, c.Nodes()...), "both nodes found the coordinator at its new address")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
