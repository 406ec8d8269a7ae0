//go:build linux

// Package patronitest runs highly available PostgreSQL for one test the way
// operators run it: one etcd, and PostgreSQL servers each managed by its own
// Patroni, all Debian's binaries, on private loopback ports in a directory of
// their own. One member bootstraps the cluster and becomes the primary; the
// others clone it and stream from it. Patroni runs in synchronous mode, so a
// commit is acknowledged only once a standby has it, and only that standby
// may be promoted.
//
// A test kills a member outright (Patroni and every PostgreSQL process, as a
// lost machine would) or stops it as an operator would, and asks the
// members' REST APIs which one leads. Without patroni, etcd or the PostgreSQL binaries a test is skipped,
// except under CI, where it fails.
//
// A test binary that dies takes etcd and every Patroni with it (the kernel
// kills them), but not PostgreSQL: Patroni starts the postmaster the way
// pg_ctl does, detached, and only the test's cleanup kills it.
package patronitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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

	"github.com/jackc/pgx/v5"

	"github.com/dfs-project/dfs/internal/testenv"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

// Database is the name of the database Start creates; URL points at it.
const Database = "dfs"

// Patroni's timing (its dynamic configuration). A leader that stops renewing
// its key in etcd loses it after TTL; the standby sees that within LoopWait
// and promotes itself. The rule loop_wait + 2 × retry_timeout ≤ ttl keeps a
// leader that merely had a slow etcd call from being replaced.
const (
	TTL          = 10 * time.Second
	LoopWait     = time.Second
	RetryTimeout = 4 * time.Second
)

// Bounds on the harness's own waits.
const (
	readyTimeout = 90 * time.Second
	stopTimeout  = 30 * time.Second
	pollInterval = 100 * time.Millisecond
)

// Cluster is a running etcd and its Patroni members. Its methods are safe
// for concurrent use and fail the test on error.
type Cluster struct {
	t       testing.TB
	root    string
	cred    *syscall.Credential
	etcd    *proc
	members []*Member
	http    *http.Client
}

// Member is one Patroni and the PostgreSQL server it manages.
type Member struct {
	Name    string
	PGPort  int // PostgreSQL on 127.0.0.1
	APIPort int // Patroni's REST API on 127.0.0.1
	dir     string

	mu  sync.Mutex
	cur *proc // nil once killed
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped
	log  string
}

// Start runs etcd and n Patroni members (n ≥ 2), waits until one is the
// primary and every other streams from it as a synchronous standby
// candidate, and creates Database. Everything is killed and its files
// removed when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin, err := serverBinDir()
	if err == nil {
		err = need("patroni", "etcd")
	}
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("patronitest: %v (.ci/run installs them)", err)
		}
		t.Skipf("skipping: %v", err)
	}
	// A transport of its own, whose idle connections the cleanup closes.
	c := &Cluster{t: t, http: &http.Client{Transport: &http.Transport{}, Timeout: 2 * time.Second}}
	// Not t.TempDir: its parents are private to the test's user, and the
	// servers may run as another one.
	if c.root, err = os.MkdirTemp("", "patronitest-"); err != nil {
		t.Fatalf("patronitest: create a directory: %v", err)
	}
	t.Cleanup(c.cleanup)
	if os.Geteuid() == 0 {
		// Patroni runs initdb, which refuses root.
		if c.cred, err = pgtest.ServerUser(); err != nil {
			t.Fatalf("patronitest: running as root: %v", err)
		}
		if err := os.Chown(c.root, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatalf("patronitest: hand %s to the postgres user: %v", c.root, err)
		}
	}
	ports, err := freePorts(2 + 2*n)
	if err != nil {
		t.Fatalf("patronitest: %v", err)
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	c.startEtcd(etcdURL, "http://127.0.0.1:"+strconv.Itoa(ports[1]))
	for i := range n {
		m := &Member{Name: "pg" + strconv.Itoa(i), PGPort: ports[2+2*i], APIPort: ports[3+2*i]}
		m.dir = filepath.Join(c.root, m.Name)
		c.members = append(c.members, m)
		c.startMember(m, bin, etcdURL)
	}
	leader := c.WaitLeader(readyTimeout, "")
	c.WaitSyncStandby(readyTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.exec(ctx, leader, "CREATE DATABASE "+Database); err != nil {
		t.Fatalf("patronitest: create database %s: %v", Database, err)
	}
	// A standby acknowledges a commit once the WAL is on its disk, and may
	// replay it later; until it has, it refuses connections to Database, and
	// pgx stops at that refusal instead of trying the next host.
	for _, m := range c.members {
		c.awaitDatabase(ctx, m)
	}
	t.Logf("patronitest: %d members up in %s, %s leads", n, c.root, leader.Name)
	return c
}

// URL is a multi-host URL of Database naming every member, for
// DATABASE_URL: pgx tries the hosts in order and keeps the first that
// takes writes, so a client follows the primary across a failover.
func (c *Cluster) URL() string {
	hosts := make([]string, len(c.members))
	for i, m := range c.members {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PGPort))
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/" + Database +
		"?sslmode=disable&target_session_attrs=read-write"
}

// URLOf is the URL of Database on m alone.
func (m *Member) URLOf() string { return m.urlOf(Database) }

func (m *Member) urlOf(db string) string {
	return "postgres://postgres@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PGPort)) + "/" + db + "?sslmode=disable"
}

// Members returns every member, killed ones included.
func (c *Cluster) Members() []*Member { return c.members }

// Leader returns the member that leads, or nil: its Patroni answers GET
// /primary with 200 (it holds the leader key) and its PostgreSQL has left
// recovery. Patroni answers 200 as soon as it takes the key, while the
// promotion it then asks for may still be under way.
func (c *Cluster) Leader() *Member {
	for _, m := range c.members {
		if m.alive() && c.status(m, "/primary") == http.StatusOK && m.writable() {
			return m
		}
	}
	return nil
}

func (m *Member) writable() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, m.urlOf("postgres"))
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var recovering bool
	return conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering) == nil && !recovering
}

// WaitLeader waits until a member other than the one named not leads, and
// returns it.
func (c *Cluster) WaitLeader(timeout time.Duration, not string) *Member {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := c.Leader(); m != nil && m.Name != not {
			return m
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("patronitest: no leader other than %q after %v; patroni logs:\n%s", not, timeout, c.logTails())
		}
		time.Sleep(pollInterval)
	}
}

// WaitSyncStandby waits until some member answers GET /sync with 200: it
// streams from the primary and is the standby whose acknowledgement every
// commit waits for, the only one Patroni may promote.
func (c *Cluster) WaitSyncStandby(timeout time.Duration) *Member {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range c.members {
			if m.alive() && c.status(m, "/sync") == http.StatusOK {
				return m
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("patronitest: no synchronous standby after %v; patroni logs:\n%s", timeout, c.logTails())
		}
		time.Sleep(pollInterval)
	}
}

// Stop shuts m down the way an operator would (SIGTERM to Patroni): Patroni
// stops PostgreSQL, gives up the leader key if it holds it, so that a
// standby may take over at once, and exits. Stop returns once it has; a
// Patroni still running after stopTimeout is killed and fails the test.
func (c *Cluster) Stop(m *Member) {
	c.t.Helper()
	p := m.take()
	if p == nil {
		c.t.Fatalf("patronitest: Stop %s: not running", m.Name)
	}
	pm := m.postmaster()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	// Once this process adopts orphans (pgtest.KillTree makes it do so),
	// the postmaster is its child, and Patroni, waiting for it to exit,
	// would wait on a zombie forever: it is reaped here.
	deadline := time.After(stopTimeout)
	for stopped := false; !stopped; {
		select {
		case <-p.done:
			stopped = true
		case <-deadline:
			m.kill(p)
			c.t.Fatalf("patronitest: Patroni %s did not stop within %v of SIGTERM; killed it", m.Name, stopTimeout)
		case <-time.After(pollInterval):
			if pm > 0 {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pm, &ws, syscall.WNOHANG, nil)
			}
		}
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PGPort)), time.Second); err == nil {
		conn.Close()
		if pid := m.postmaster(); pid > 0 {
			pgtest.KillTree(pid, nil)
		}
		c.t.Fatalf("patronitest: Patroni %s exited and left PostgreSQL running; killed it", m.Name)
	}
}

// Kill crashes m: its Patroni and every PostgreSQL process die by SIGKILL,
// as on a lost machine, and Kill returns once none is left. Patroni's leader
// key outlives it in etcd until TTL runs out.
func (c *Cluster) Kill(m *Member) {
	c.t.Helper()
	p := m.take()
	if p == nil {
		c.t.Fatalf("patronitest: Kill %s: not running", m.Name)
	}
	m.kill(p)
}

// take detaches m's Patroni for a method that ends it, or returns nil.
func (m *Member) take() *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.cur
	m.cur = nil
	return p
}

// postmaster is the pid in m's postmaster.pid, or 0.
func (m *Member) postmaster() int {
	b, err := os.ReadFile(filepath.Join(m.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// kill stops Patroni first, so that it cannot start PostgreSQL again, then
// crashes the postmaster with its backends, then Patroni. Patroni starts
// the postmaster the way pg_ctl does, through a process that exits at once,
// so the postmaster is not below Patroni: it is found by its pid file.
func (m *Member) kill(p *proc) {
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGSTOP)
	if pid := m.postmaster(); pid > 0 {
		pgtest.KillTree(pid, nil)
	}
	pgtest.KillTree(p.cmd.Process.Pid, p.done)
}

func (m *Member) alive() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur != nil
}

// status is the HTTP status of GET path on m's REST API, or 0.
func (c *Cluster) status(m *Member, path string) int {
	resp, err := c.http.Get("http://127.0.0.1:" + strconv.Itoa(m.APIPort) + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (c *Cluster) startEtcd(clientURL, peerURL string) {
	dir := filepath.Join(c.root, "etcd")
	c.etcd = c.spawn("etcd", filepath.Join(c.root, "etcd.log"), nil,
		"--name", "etcd0", "--data-dir", dir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcd0="+peerURL, "--initial-cluster-state", "new")
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := c.http.Get(clientURL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-c.etcd.done:
			c.t.Fatalf("patronitest: etcd exited at start:\n%s", tail(c.etcd.log))
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("patronitest: etcd not healthy after %v:\n%s", readyTimeout, tail(c.etcd.log))
		}
		time.Sleep(pollInterval)
	}
}

func (c *Cluster) startMember(m *Member, bin, etcdURL string) {
	if err := os.Mkdir(m.dir, 0o700); err != nil {
		c.t.Fatalf("patronitest: %v", err)
	}
	cfgPath := filepath.Join(m.dir, "patroni.yml")
	// YAML is a superset of JSON, so the configuration is written as JSON.
	cfg, err := json.MarshalIndent(config(m, bin, etcdURL), "", "  ")
	if err != nil {
		c.t.Fatalf("patronitest: %v", err)
	}
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		c.t.Fatalf("patronitest: %v", err)
	}
	if c.cred != nil {
		for _, p := range []string{m.dir, cfgPath} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				c.t.Fatalf("patronitest: %v", err)
			}
		}
	}
	p := c.spawn("patroni", filepath.Join(m.dir, "patroni.log"), c.cred, cfgPath)
	m.mu.Lock()
	m.cur = p
	m.mu.Unlock()
}

// config is m's Patroni configuration. The bootstrap section is written to
// etcd by the member that initialises the cluster and holds for all.
func config(m *Member, bin, etcdURL string) map[string]any {
	pgAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(m.PGPort))
	apiAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(m.APIPort))
	return map[string]any{
		"scope": "dfs",
		"name":  m.Name,
		"log":   map[string]any{"level": "INFO"},
		"restapi": map[string]any{
			"listen": apiAddr, "connect_address": apiAddr,
		},
		"etcd3": map[string]any{"hosts": []string{strings.TrimPrefix(etcdURL, "http://")}},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl":           int(TTL.Seconds()),
				"loop_wait":     int(LoopWait.Seconds()),
				"retry_timeout": int(RetryTimeout.Seconds()),
				// Every acknowledged commit is on the synchronous standby,
				// and only that standby is promoted. Not strict: with no
				// standby left, the primary goes on alone rather than
				// refusing writes.
				"synchronous_mode":        true,
				"synchronous_mode_strict": false,
				"postgresql": map[string]any{
					"use_pg_rewind": false,
					"parameters": map[string]any{
						"max_connections": 100, "max_wal_senders": 5, "max_replication_slots": 5,
						"wal_level": "replica", "hot_standby": "on",
					},
				},
			},
			"initdb": []any{map[string]any{"encoding": "UTF8"}, map[string]any{"locale": "C"},
				map[string]any{"auth": "trust"}},
			"pg_hba": []string{
				"local all all trust",
				"host all all 127.0.0.1/32 trust",
				"host replication all 127.0.0.1/32 trust",
			},
		},
		"postgresql": map[string]any{
			"listen": pgAddr, "connect_address": pgAddr,
			"data_dir": filepath.Join(m.dir, "data"),
			"bin_dir":  bin,
			"pgpass":   filepath.Join(m.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]any{"username": "postgres"},
				"replication": map[string]any{"username": "postgres"},
			},
			"parameters": map[string]any{
				"unix_socket_directories": m.dir,
				// The faults here kill processes, not the machine: what
				// reached the kernel survives either way, and a standby
				// acknowledges from its WAL on disk all the same.
				"fsync": "off", "full_page_writes": "off",
				"shared_buffers": "16MB",
			},
		},
	}
}

// spawn starts a child in a process group of its own (a Ctrl-C at the
// terminal does not reach it), killed by the kernel if the test binary dies
// first, with its output in logPath.
func (c *Cluster) spawn(name, logPath string, cred *syscall.Credential, args ...string) *proc {
	logf, err := os.Create(logPath)
	if err != nil {
		c.t.Fatalf("patronitest: %v", err)
	}
	defer logf.Close()
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "TZ=UTC", "HOME=" + c.root}
	cmd.Dir = c.root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("patronitest: start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

func (c *Cluster) awaitDatabase(ctx context.Context, m *Member) {
	for {
		conn, err := pgx.Connect(ctx, m.urlOf(Database))
		if err == nil {
			_ = conn.Close(ctx)
			return
		}
		if ctx.Err() != nil {
			c.t.Fatalf("patronitest: %s does not serve database %s: %v", m.Name, Database, err)
		}
		time.Sleep(pollInterval)
	}
}

func (c *Cluster) exec(ctx context.Context, m *Member, sql string) error {
	conn, err := pgx.Connect(ctx, m.urlOf("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// logTails returns the end of every member's Patroni log.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, m := range c.members {
		fmt.Fprintf(&b, "--- %s:\n%s\n", m.Name, tail(filepath.Join(m.dir, "patroni.log")))
	}
	return b.String()
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

func (c *Cluster) cleanup() {
	c.http.CloseIdleConnections()
	for _, m := range c.members {
		if p := m.take(); p != nil {
			m.kill(p)
		}
	}
	if c.etcd != nil {
		pgtest.KillTree(c.etcd.cmd.Process.Pid, c.etcd.done)
	}
	if c.t.Failed() {
		c.t.Logf("patronitest: patroni logs:\n%s", c.logTails())
	}
	if err := os.RemoveAll(c.root); err != nil {
		c.t.Logf("patronitest: remove %s: %v", c.root, err)
	}
}

// serverBinDir is the directory of the PostgreSQL installation itself:
// Patroni runs its tools (pg_controldata, pg_basebackup, …) from there, and
// a PATH may hold links to only a few of them.
func serverBinDir() (string, error) {
	bin, err := pgtest.BinDir()
	if err != nil {
		return "", err
	}
	initdb, err := filepath.EvalSymlinks(filepath.Join(bin, "initdb"))
	if err != nil {
		return "", err
	}
	return filepath.Dir(initdb), nil
}

func need(programs ...string) error {
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return errors.New(p + " is not installed (Debian: apt-get install patroni etcd-server)")
		}
	}
	return nil
}

// freePorts returns n loopback ports that were free a moment ago, all
// different: their listeners are held until every one is found. Patroni
// binds them seconds later, after initdb or a base backup, so they are taken
// below the kernel's ephemeral range (32768 and up on Linux), where no
// outgoing connection or other test's port 0 can land meanwhile.
func freePorts(n int) ([]int, error) {
	const lo, hi = 20000, 32768
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("find %d free ports in [%d, %d): only %d found", n, lo, hi, len(ports))
		}
		port := lo + rand.IntN(hi-lo)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}
