//go:build unix

// Package redistest runs a private redis-server for a test, on a free
// loopback port and without persistence, so that a test can kill it with
// SIGKILL, pause it, and start it again on the same address — the faults that
// Redis-as-an-optimisation must survive — without touching a shared Redis.
//
// The server is found as redis-server on PATH. Without it a test is skipped,
// except under CI, where it fails.
package redistest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/redisx/redisproc"
	"github.com/dfs-project/dfs/internal/testenv"
)

// startTimeout bounds how long a starting server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one private redis-server. Its methods are safe for concurrent use
// and fail the test on error.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// busPort is the cluster bus port of a cluster node, 0 for a server
	// on its own.
	busPort int

	mu  sync.Mutex
	cur *run // nil while killed
}

type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped
}

// Start starts a server and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, lookPath(t, "redis-server"), false)
}

// lookPath finds a program on PATH, or skips the test (fails it under CI).
func lookPath(t testing.TB, name string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("%s is not on PATH: %v", name, err)
		}
		t.Skipf("skipping: %s is not on PATH", name)
	}
	return bin
}

// start starts a server (a cluster node with its own bus port when cluster
// is set) and stops it when the test ends.
func start(t testing.TB, bin string, cluster bool) *Server {
	t.Helper()
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.cleanup)
	// Another process may take the port between our probe and the server's
	// bind; a few attempts make that harmless.
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		if cluster {
			for s.busPort = freePort(t); s.busPort == s.port; s.busPort = freePort(t) {
			}
		}
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatalf("redistest: %v", err)
		}
	}
}

// URL is the server's redis:// URL (database 0).
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Kill sends SIGKILL and returns once the process is gone. Everything it
// held is lost, as with a crash of a Redis without persistence.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		s.t.Fatalf("redistest: Kill: the server is not running")
	}
	s.cur.kill()
	s.cur = nil
}

// Restart starts a killed server again on the same port and returns once it
// answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	running := s.cur != nil
	s.mu.Unlock()
	if running {
		s.t.Fatalf("redistest: Restart: the server is running; Kill it first")
	}
	// The port was ours a moment ago; a failed bind is a leftover socket
	// or a thief, and only the former goes away by waiting.
	var err error
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = s.start(); err == nil {
			return
		}
	}
	s.t.Fatalf("redistest: Restart: %v", err)
}

// Pause stops the process with SIGSTOP: connections are still accepted by the
// kernel but nothing is answered, like a hung server.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, "T") }

// Resume continues a paused process.
func (s *Server) Resume() { s.signal(syscall.SIGCONT, "") }

func (s *Server) signal(sig syscall.Signal, state string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		s.t.Fatalf("redistest: %v: the server is not running", sig)
	}
	if err := s.cur.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
	// Signals arrive asynchronously; return once the kernel shows the state,
	// so that the test acts on a fact.
	pid := s.cur.cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		got, err := procState(pid)
		if err != nil || (got == "T") == (state == "T") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: process %d did not reach state %q after %v (state %q)", pid, state, sig, got)
		}
	}
}

// procState is the one-letter state of pid from /proc, or an error where
// there is no /proc (the wait is then skipped).
func procState(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return string(b[i+2]), nil
}

func (s *Server) start() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := redisproc.Command(s.bin, s.port, s.dir)
	if s.busPort != 0 {
		cmd = redisproc.ClusterCommand(s.bin, s.port, s.busPort, s.dir, clusterNodeTimeout)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.done) }()
	if err := r.awaitReady(s.Addr()); err != nil {
		r.kill()
		return fmt.Errorf("redis-server on port %d: %w; log:\n%s", s.port, err, s.logTail())
	}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	return nil
}

func (r *run) awaitReady(addr string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-r.done:
			return fmt.Errorf("exited at start")
		default:
		}
		if redisproc.Ping(addr) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING after %v", startTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *run) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func (s *Server) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.cur.kill() // SIGKILL ends a paused process too
		s.cur = nil
	}
	if s.t.Failed() {
		s.t.Logf("redistest: last lines of the redis-server log:\n%s", s.logTail())
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
