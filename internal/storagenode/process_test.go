package storagenode_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/storage-node once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "storage-node-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "storage-node")
		out, err := exec.Command(goTool, "build", "-o", binPath, "github.com/dfs-project/dfs/cmd/storage-node").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitReady waits until the node at base answers ready, showing its log if
// it never does.
func waitReady(t *testing.T, base string, log *testenv.SyncBuffer) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "the node becomes ready; log:\n%s", log)
}

func TestBinaryRejectsBadConfiguration(t *testing.T) {
	cmd := exec.Command(binary(t))
	cmd.Env = []string{"STORAGE_NODE_ID=bad id", "SERVER_PORT=http", "STORAGE_CAPACITY_BYTES=lots", "STORAGE_DATA_DIRECTORY=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.NotZero(t, exit.ExitCode())
	for _, name := range []string{"STORAGE_NODE_ID", "SERVER_PORT", "STORAGE_CAPACITY_BYTES"} {
		require.Contains(t, string(out), name)
	}
}

// TestBinaryServesAndStops runs the real binary: it answers on SERVER_HOST
// and SERVER_PORT, logs in the configured format and level, and exits
// cleanly on SIGTERM.
func TestBinaryServesAndStops(t *testing.T) {
	for _, tc := range []struct {
		level, format string
		check         func(t *testing.T, log string)
	}{
		{"info", "json", func(t *testing.T, log string) {
			sc := bufio.NewScanner(strings.NewReader(log))
			lines := 0
			for sc.Scan() {
				var rec map[string]any
				require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "LOG_FORMAT=json writes JSON lines: %s", sc.Text())
				lines++
			}
			require.Positive(t, lines)
			require.Contains(t, log, `"msg":"storage node stopped"`)
		}},
		{"warn", "text", func(t *testing.T, log string) {
			require.NotContains(t, log, "level=INFO", "LOG_LEVEL=warn hides info lines")
		}},
		{"debug", "text", func(t *testing.T, log string) {
			require.Contains(t, log, "level=DEBUG", "LOG_LEVEL=debug shows debug lines (probes)")
			require.Contains(t, log, `msg="storage node stopped"`)
		}},
	} {
		t.Run(tc.level+"/"+tc.format, func(t *testing.T) {
			port := freePort(t)
			var stderr testenv.SyncBuffer
			cmd := exec.Command(binary(t))
			cmd.Env = []string{
				"SERVER_HOST=127.0.0.1",
				"SERVER_PORT=" + strconv.Itoa(port),
				"STORAGE_DATA_DIRECTORY=" + filepath.Join(t.TempDir(), "data"),
				"LOG_LEVEL=" + tc.level,
				"LOG_FORMAT=" + tc.format,
			}
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
				}
			})

			base := "http://127.0.0.1:" + strconv.Itoa(port)
			waitReady(t, base, &stderr)

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			select {
			case err := <-exited:
				require.NoError(t, err, "SIGTERM stops the node cleanly; log:\n%s", stderr.String())
			case <-time.After(20 * time.Second):
				t.Fatalf("the node did not stop on SIGTERM; log:\n%s", stderr.String())
			}
			tc.check(t, stderr.String())
		})
	}
}
