// Package daemontest runs a dfs daemon's built binary, as a user would, to
// check its command line and its hold on its data directory.
package daemontest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/testenv"
)

// Build compiles the main package in the test's working directory into a
// temporary directory and returns the binary's path.
func Build(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// Result is how a finished run went.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs bin with args and env (on top of a minimal environment) to its
// end, which must come within ten seconds.
func Run(t *testing.T, bin string, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			require.NoError(t, err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %q still running after 10s; stderr:\n%s", bin, args, stderr.String())
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
}

// CheckCommandLine runs bin with each request for help or the version and
// with arguments it must refuse, with dataDirVar pointed at a directory that
// does not exist yet, and checks the answers, their exit codes, and that
// the directory was never created: asking must touch nothing.
func CheckCommandLine(t *testing.T, bin, name, dataDirVar string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	port := FreePort(t)
	env := []string{dataDirVar + "=" + dir, "SERVER_HOST=127.0.0.1", fmt.Sprintf("SERVER_PORT=%d", port)}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout []string // substrings
		stderr string   // substring; "" means empty
	}{
		{[]string{"-h"}, 0, []string{name + ": ", "environment variables", dataDirVar, "README.md", "\nversion "}, ""},
		{[]string{"-help"}, 0, []string{name + ": ", dataDirVar, "\nversion "}, ""},
		{[]string{"--help"}, 0, []string{name + ": ", dataDirVar, "\nversion "}, ""},
		{[]string{"--version"}, 0, []string{name + " "}, ""},
		{[]string{"-version"}, 0, []string{name + " "}, ""},
		{[]string{"-port", "9"}, 2, nil, `unexpected argument "-port"`},
		{[]string{"serve"}, 2, nil, `unexpected argument "serve"`},
	} {
		res := Run(t, bin, env, tc.args...)
		require.Equal(t, tc.code, res.Code, "%s %q: stdout %q, stderr %q", name, tc.args, res.Stdout, res.Stderr)
		for _, want := range tc.stdout {
			require.Contains(t, res.Stdout, want, "%s %q", name, tc.args)
		}
		if tc.stdout == nil {
			require.Empty(t, res.Stdout, "%s %q: a usage error prints nothing on stdout", name, tc.args)
		}
		if tc.stderr == "" {
			require.Empty(t, res.Stderr, "%s %q", name, tc.args)
		} else {
			require.Contains(t, res.Stderr, tc.stderr, "%s %q", name, tc.args)
		}
		if len(tc.args) == 1 && strings.HasSuffix(tc.args[0], "version") {
			require.Equal(t, 1, strings.Count(res.Stdout, "\n"), "%s %q prints one line", name, tc.args)
		}
		require.NoDirExists(t, dir, "%s %q touched %s", name, tc.args, dataDirVar)
		// Nothing was listening: the port is still free.
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		require.NoError(t, err, "%s %q left a listener", name, tc.args)
		l.Close()
	}
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago.
func FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Daemon is a started daemon process.
type Daemon struct {
	URL    string
	stderr testenv.SyncBuffer // read while the process writes it
	cmd    *exec.Cmd
	done   chan struct{}
}

// Stderr is what the process has written to stderr so far.
func (d *Daemon) Stderr() string { return d.stderr.String() }

// Start starts bin with env on a free port and waits until its /health/live
// answers. The process is stopped at the test's end.
func Start(t *testing.T, bin string, env []string) *Daemon {
	t.Helper()
	d := StartNoWait(t, bin, env)
	require.Eventually(t, func() bool {
		if d.Exited() {
			return true
		}
		resp, err := http.Get(d.URL + "/health/live")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 15*time.Second, 50*time.Millisecond)
	require.False(t, d.Exited(), "%s exited at start:\n%s", bin, d.Stderr())
	return d
}

// StartNoWait starts bin with env on a free port without waiting for it.
func StartNoWait(t *testing.T, bin string, env []string) *Daemon {
	t.Helper()
	port := FreePort(t)
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "SERVER_HOST=127.0.0.1",
		fmt.Sprintf("SERVER_PORT=%d", port)}, env...)
	d := &Daemon{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &d.stderr
	require.NoError(t, cmd.Start())
	go func() {
		cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.done
	})
	return d
}

// Exited reports whether the process has ended.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Wait waits at most timeout for the process to end and returns its exit
// code.
func (d *Daemon) Wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-d.done:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("still running after %s; stderr:\n%s", timeout, d.Stderr())
		return -1
	}
}

// Live reports whether the daemon answers /health/live.
func (d *Daemon) Live() bool {
	resp, err := http.Get(d.URL + "/health/live")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// SecondOnOneDirectory describes a daemon's directory-lock check: two runs
// on one data directory Dir with their environments, and a file of the
// first run's (Planted, written after it started) that a second run's start
// would remove if it got as far as tidying the directory.
type SecondOnOneDirectory struct {
	// Name is the daemon as its refusal names it ("coordinator").
	Name                string
	Dir                 string
	FirstEnv, SecondEnv []string
	Planted             string
}

// CheckSecondOnOneDirectoryStops starts bin on c.Dir, plants c.Planted, and
// checks that a second start on the same directory exits 1 at once naming
// the first, leaves the planted file, and that the first goes on serving.
func CheckSecondOnOneDirectoryStops(t *testing.T, bin string, c SecondOnOneDirectory) {
	t.Helper()
	first := Start(t, bin, c.FirstEnv)
	require.NoError(t, os.MkdirAll(filepath.Dir(c.Planted), 0o750))
	require.NoError(t, os.WriteFile(c.Planted, []byte("half written"), 0o640))

	second := StartNoWait(t, bin, c.SecondEnv)
	require.Equal(t, 1, second.Wait(t, 10*time.Second))
	require.Contains(t, second.Stderr(), fmt.Sprintf("data directory %s is in use: another %s (pid ", c.Dir, c.Name))
	require.FileExists(t, c.Planted, "the refused %s removed the first one's file", c.Name)
	require.True(t, first.Live(), "the first %s goes on serving", c.Name)
	require.False(t, first.Exited())
}
