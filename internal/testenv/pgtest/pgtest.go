//go:build linux

// Package pgtest runs a private PostgreSQL server for one test: initdb into a
// fresh directory, postgres on a free loopback port, one empty database. The
// test owns the server outright, so it can stop it (SIGINT, a fast shutdown),
// crash it (SIGKILL of every server process) and start it again on the same
// port and data — the faults the coordinator must survive — without touching
// the shared database other tests use.
//
// The binaries are found as initdb and postgres on PATH, else in the newest
// /usr/lib/postgresql/<version>/bin. Without them a test is skipped, except
// under CI, where it fails. initdb refuses to run as root, so when the test
// runs as root the server runs as the "postgres" user, in a directory under
// the system temporary directory that it owns.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dfs-project/dfs/internal/testenv"
)

// Database is the name of the database Start creates; URL points at it.
const Database = "dfs"

// Bounds on the server's own steps. Crash recovery after a SIGKILL replays
// the WAL, which on a test-sized cluster takes well under a second.
const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	pollInterval = 20 * time.Millisecond
)

// Server is one private PostgreSQL server. Its methods are safe for
// concurrent use and fail the test on error.
type Server struct {
	t      testing.TB
	bin    string // directory holding initdb and postgres
	root   string // owns data/, the socket and the log
	port   int
	cred   *syscall.Credential // the server's user when the test runs as root
	logLen int64               // log size when the current run started

	mu  sync.Mutex
	cur *run // nil while stopped
}

type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the postmaster is reaped
}

// Start initialises a cluster, starts the server, creates Database and
// returns once it accepts connections. The server is killed and its files
// removed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("pgtest: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	s := &Server{t: t, bin: bin}
	// Not t.TempDir: its parent directories are private to the test's user,
	// and the server may run as another one.
	if s.root, err = os.MkdirTemp("", "pgtest-"); err != nil {
		t.Fatalf("pgtest: create a directory: %v", err)
	}
	t.Cleanup(s.cleanup)
	if os.Geteuid() == 0 {
		if s.cred, err = ServerUser(); err != nil {
			t.Fatalf("pgtest: running as root: %v", err)
		}
		if err := os.Chown(s.root, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatalf("pgtest: hand %s to the postgres user: %v", s.root, err)
		}
	}
	if err := s.initdb(); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	// Another process may take the port between our probe and the server's
	// bind; a few attempts make that harmless.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if err = s.start(); err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("pgtest: %v", err)
		}
	}
	if err := s.exec(context.Background(), "postgres", "CREATE DATABASE "+Database); err != nil {
		t.Fatalf("pgtest: create database %s: %v", Database, err)
	}
	return s
}

// URL is the URL of Database, for DATABASE_URL.
func (s *Server) URL() string { return s.urlOf(Database) }

// Port is the server's TCP port on 127.0.0.1; it stays the same across
// restarts.
func (s *Server) Port() int { return s.port }

func (s *Server) urlOf(db string) string {
	return "postgres://postgres@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) + "/" + db + "?sslmode=disable"
}

// Running reports whether the server process is up (it may still be
// recovering and not yet accept connections).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Stop shuts the server down the way an operator would (SIGINT: a fast
// shutdown that ends every session) and returns once it has exited, which
// the postmaster does only after every backend.
func (s *Server) Stop() {
	s.t.Helper()
	r := s.take("Stop")
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-r.done:
	case <-time.After(stopTimeout):
		r.kill()
		s.t.Fatalf("pgtest: the server did not stop within %v of SIGINT; killed it", stopTimeout)
	}
}

// Kill crashes the server: SIGKILL to the postmaster and every backend at
// once, as an out-of-memory kill or a lost machine would. It returns once no
// server process is left.
func (s *Server) Kill() {
	s.t.Helper()
	s.take("Kill").kill()
}

// Restart starts a stopped or killed server again on the same port and data
// directory and returns once it accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Running() {
		s.t.Fatalf("pgtest: Restart: the server is running; Stop or Kill it first")
	}
	// The port was ours a moment ago; a failed bind is a socket in
	// TIME_WAIT or a thief, and only the former goes away by waiting.
	var err error
	for deadline := time.Now().Add(readyTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = s.start(); err == nil {
			return
		}
	}
	s.t.Fatalf("pgtest: Restart: %v", err)
}

// take detaches the current run for a method that ends it.
func (s *Server) take(op string) *run {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		s.t.Fatalf("pgtest: %s: the server is not running", op)
	}
	r := s.cur
	s.cur = nil
	return r
}

func (s *Server) dataDir() string { return filepath.Join(s.root, "data") }
func (s *Server) logPath() string { return filepath.Join(s.root, "postgres.log") }

func (s *Server) initdb() error {
	out, err := s.command(filepath.Join(s.bin, "initdb"),
		"-D", s.dataDir(), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C",
		"--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// command prepares a server program to run as the server's user, with an
// environment of its own (nothing from the test's, such as PGDATA, leaks in).
func (s *Server) command(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "TZ=UTC"}
	cmd.Dir = s.root
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// The kernel ends the postmaster if the test binary dies first
		// (its backends follow on their own). The death signal is tied to
		// the thread that started the child; the Go runtime ends a thread
		// only when a goroutine exits while locked to it, which this
		// package never does. A group of its own keeps a Ctrl-C at the
		// terminal from reaching it.
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: s.cred,
	}
	return cmd
}

func (s *Server) start() error {
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the server log: %w", err)
	}
	defer logf.Close()
	if st, err := logf.Stat(); err == nil {
		s.logLen = st.Size()
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"),
		"-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.root,
		"-c", "listen_addresses=127.0.0.1",
		// Durability against a machine crash is not what these tests are
		// about: a killed server keeps what reached the kernel either way.
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=60")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.done) }()
	if err := s.awaitReady(r); err != nil {
		r.kill()
		return fmt.Errorf("postgres on port %d: %w; log:\n%s", s.port, err, s.logTail())
	}
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
	return nil
}

// awaitReady waits until the server answers a query on its maintenance
// database.
func (s *Server) awaitReady(r *run) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-r.done:
			return errors.New("exited at start")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.exec(ctx, "postgres", "SELECT 1")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting connections after %v: %w", readyTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

func (s *Server) exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, s.urlOf(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// kill crashes the server: the postmaster and every process it started die
// by SIGKILL at once, and kill returns once none is left.
func (r *run) kill() { KillTree(r.cmd.Process.Pid, r.done) }

// KillTree crashes the process pid and every process below it, as a lost
// machine would: each is stopped (SIGSTOP) from the top down, so that none
// can start another meanwhile, then all die by SIGKILL at once. Backends
// call setsid, so a process group does not hold them; they are found by
// their parent in /proc instead. KillTree returns once every one is gone:
// pid once reaped is closed (the caller's Wait on it returned), or, with
// reaped nil, once pid is no longer running. This process adopts the
// orphans (see adoptOrphans) and reaps them, so that no zombie is left to an
// init that may never reap it.
func KillTree(pid int, reaped <-chan struct{}) {
	adoptOrphans()
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	procs := descendants(pid)
	for _, p := range append(procs, pid) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if reaped != nil {
		<-reaped
	} else {
		procs = append(procs, pid)
	}
	reap(procs)
}

// descendants stops and returns every process below pid, parents before
// their children.
func descendants(pid int) []int {
	var out []int
	for _, c := range children(pid) {
		_ = syscall.Kill(c, syscall.SIGSTOP)
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	return out
}

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

var subreaper sync.Once

// adoptOrphans makes this process the one that inherits the orphans of its
// descendants (a killed postmaster's backends) instead of init.
func adoptOrphans() {
	subreaper.Do(func() {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	})
}

// children returns the processes whose parent is pid, read from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// procStat reads a process's state letter and parent from /proc/<pid>/stat.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) state ppid …", where comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return fields[0][0], ppid, err == nil
}

// reap waits until every process of procs has ended and reaps those this
// process inherited.
func reap(procs []int) {
	left := slices.Clone(procs)
	for deadline := time.Now().Add(stopTimeout); len(left) > 0 && time.Now().Before(deadline); time.Sleep(pollInterval) {
		left = slices.DeleteFunc(left, func(p int) bool {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
			if got == p {
				return true
			}
			// Not ours to reap: gone, or a zombie of another parent, holds
			// nothing.
			state, _, ok := procStat(p)
			return err != nil && (!ok || state == 'Z')
		})
	}
}

// logTail returns the last lines the current run wrote to the server log.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	if int64(len(b)) >= s.logLen {
		b = b[s.logLen:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func (s *Server) cleanup() {
	s.mu.Lock()
	r := s.cur
	s.cur = nil
	s.mu.Unlock()
	if r != nil {
		// The data is thrown away next, so there is nothing to shut down
		// cleanly for.
		r.kill()
	}
	if s.t.Failed() {
		s.t.Logf("pgtest: last lines of the postgres log:\n%s", s.logTail())
	}
	if err := os.RemoveAll(s.root); err != nil {
		s.t.Logf("pgtest: remove %s: %v", s.root, err)
	}
}

// BinDir returns the directory holding initdb and postgres.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest version first: "15" sorts after "9.6" only numerically.
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) are neither on PATH nor in /usr/lib/postgresql/*/bin")
}

// versionOf reads the major version out of /usr/lib/postgresql/<v>/bin.
func versionOf(dir string) int {
	v, _, _ := strings.Cut(filepath.Base(filepath.Dir(dir)), ".")
	n, _ := strconv.Atoi(v)
	return n
}

// ServerUser is the account a server runs as when the test is root: initdb
// refuses root.
func ServerUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("initdb refuses root and there is no postgres user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user id %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres group id %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
