// Package localcluster runs a dfs cluster as real operating-system processes on
// the loopback interface: a coordinator and any number of storage nodes, each
// with its own port, data directory and log file.
//
// `dfs cluster up` uses it for development; end-to-end fault tests, the demo
// and the benchmarks use it to stop, kill (SIGKILL), pause (SIGSTOP), resume
// and restart single processes, because those are the failures the system is
// built to survive and only real processes show them faithfully.
//
// Every child runs in a process group of its own, so a Ctrl-C at the terminal
// reaches only the parent, which then stops the children in order. A child
// never outlives its cluster: Stop ends every process, cancelling the context
// given to Start does too, and on Linux the kernel kills a child whose parent
// died without stopping it.
package localcluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// The defaults `dfs cluster up` starts with. The zero Options differ only in
// the ports: a zero port means "pick a free one", which tests need.
const (
	DefaultCoordinatorPort = 8080
	DefaultNodeBasePort    = 9001
	DefaultNodes           = 3
	DefaultHost            = "127.0.0.1"
	DefaultDataDir         = "data"
	DefaultReadyTimeout    = 30 * time.Second
	DefaultStopTimeout     = 10 * time.Second
)

// CoordinatorName is the coordinator's name wherever a method takes a process
// name; storage nodes are named by NodeName.
const CoordinatorName = "coordinator"

// NodeName returns the name (and STORAGE_NODE_ID) of the i-th storage node,
// counting from 1: node-1, node-2, …
func NodeName(i int) string { return "node-" + strconv.Itoa(i) }

// Options describe a local cluster. Only BinDir is required.
type Options struct {
	// BinDir holds the coordinator and storage-node binaries (see Build). The
	// storage-node binary must exist; without a coordinator binary only the
	// storage nodes start.
	BinDir string
	// DataDir is the root of all state: DataDir/coordinator (the
	// coordinator's DATA_DIRECTORY), DataDir/node-<i> (each node's
	// STORAGE_DATA_DIRECTORY) and DataDir/logs/<name>.log. Default "data"
	// in the working directory.
	DataDir string
	// Nodes is how many storage nodes Start starts. Default 3.
	Nodes int
	// Coordinators is how many coordinators Start starts. Default 1. More
	// than one share the PostgreSQL of CoordinatorEnv's DATABASE_URL (or,
	// with InheritEnv, the environment's), which must be set; each gets a
	// free port and a DATA_DIRECTORY of its own, and Debian's haproxy runs
	// in front of them (HAProxyName): on CoordinatorPort for their REST
	// listeners, and on the S3_PORT that CoordinatorEnv sets, if any, for
	// their S3 listeners. CoordinatorURL, and every node's COORDINATOR_URL,
	// is then the front's.
	Coordinators int
	// Host is the address every process binds to and advertises. Default
	// 127.0.0.1.
	Host string
	// CoordinatorPort is the coordinator's port; 0 picks a free one.
	CoordinatorPort int
	// NodeBasePort is node-1's port; node-i listens on NodeBasePort+i-1.
	// 0 picks a free port for every node.
	NodeBasePort int
	// CoordinatorEnv and NodeEnv are extra KEY=VALUE settings for the
	// coordinator and for every storage node (DATABASE_URL, REDIS_URL,
	// HEALTH_CHECK_INTERVAL=1s, CLUSTER_TOKEN, LOG_LEVEL, …). They cannot
	// override what the cluster itself sets: ports, node ids, data
	// directories and COORDINATOR_URL.
	CoordinatorEnv, NodeEnv []string
	// NodeEnvs are extra KEY=VALUE settings of single storage nodes, by
	// node name (node-1, …), after NodeEnv so that they win over it: what
	// one node alone has, such as its STORAGE_ZONE or STORAGE_WEIGHT. A
	// node AddNode adds later gets the settings of its name too. Like
	// NodeEnv they cannot override what the cluster itself sets.
	NodeEnvs map[string][]string
	// InheritEnv starts every child from the parent's whole environment.
	// Otherwise a child sees only PATH, HOME, TMPDIR, TZ and the Go runtime's
	// variables (GODEBUG, GOMAXPROCS, GORACE, GOTRACEBACK, GOCOVERDIR), so
	// that a DATABASE_URL in a developer's shell does not leak into a test.
	InheritEnv bool
	// Tee, when set, also receives every process's output, line by line, each
	// line prefixed with "[name] ". The log files get everything regardless.
	Tee io.Writer
	// ReadyTimeout bounds the wait for a process to answer /health/ready.
	// Default 30s.
	ReadyTimeout time.Duration
	// StopTimeout is how long a process may take to exit after SIGTERM before
	// it is killed. Default 10s.
	StopTimeout time.Duration
	// Logger receives the cluster's own messages (started, ready, exited).
	// Default slog.Default().
	Logger *slog.Logger
	// OnExit, when set, is called from its own goroutine whenever a process
	// exits without having been asked to (a crash, a bad configuration),
	// with the error of its wait (nil for exit status 0).
	OnExit func(name string, err error)
}

func (o Options) withDefaults() (Options, error) {
	if o.BinDir == "" {
		return o, errs.E(errs.Invalid, "localcluster: BinDir is required")
	}
	if o.DataDir == "" {
		o.DataDir = DefaultDataDir
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Coordinators == 0 {
		o.Coordinators = 1
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Nodes < 0:
		return o, errs.E(errs.Invalid, "localcluster: Nodes must not be negative, got %d", o.Nodes)
	case o.Coordinators < 1:
		return o, errs.E(errs.Invalid, "localcluster: Coordinators must be at least 1, got %d", o.Coordinators)
	case o.Coordinators > 1 && o.coordinatorSetting("DATABASE_URL") == "":
		return o, errs.E(errs.Invalid, "localcluster: %d coordinators share one PostgreSQL, and DATABASE_URL is not set: the embedded store belongs to one coordinator", o.Coordinators)
	case o.CoordinatorPort < 0 || o.CoordinatorPort > 65535:
		return o, errs.E(errs.Invalid, "localcluster: CoordinatorPort %d is not a port", o.CoordinatorPort)
	case o.NodeBasePort < 0 || o.NodeBasePort+o.Nodes-1 > 65535:
		return o, errs.E(errs.Invalid, "localcluster: NodeBasePort %d leaves no room for %d nodes", o.NodeBasePort, o.Nodes)
	}
	var err error
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return o, errs.Wrap(errs.Invalid, err, "localcluster: BinDir")
	}
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return o, errs.Wrap(errs.Invalid, err, "localcluster: DataDir")
	}
	return o, nil
}

// Cluster is a running local cluster. Its methods are safe for concurrent use.
type Cluster struct {
	opts Options // defaults applied, paths absolute
	log  *slog.Logger
	// life is the context given to Start. It is kept because it bounds every
	// process of the cluster, including those StartNode and AddNode start
	// long after Start returned.
	life      context.Context
	coordPort int // the coordinator's port, or the front's with several
	// coordinators are the coordinators' names in order; front says
	// HAProxy runs in front of them (there are several).
	coordinators []string
	front        bool
	probe        *http.Client
	teeMu        sync.Mutex // keeps Tee output whole lines across processes

	mu      sync.Mutex
	procs   map[string]*process // by name, the coordinator included
	nodes   []string            // node names in the order they were added
	stopped bool
}

// Start starts the coordinator (when its binary exists), waits for it to be
// ready, then starts opts.Nodes storage nodes and waits for all of them.
// Cancelling ctx later stops every process of the cluster. If any process is
// not ready within opts.ReadyTimeout, Start kills everything it started and
// returns an error that ends with the tail of that process's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkBinary(o.BinDir, StorageNodeBinary); err != nil {
		return nil, err
	}
	hasCoordinator := checkBinary(o.BinDir, CoordinatorBinary) == nil
	if err := os.MkdirAll(filepath.Join(o.DataDir, "logs"), 0o755); err != nil {
		return nil, errs.Wrap(errs.Other, err, "localcluster: create the log directory")
	}

	ports, err := reservePorts(o, hasCoordinator)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		opts:      o,
		log:       o.Logger,
		life:      ctx,
		coordPort: ports[0],
		probe: &http.Client{
			Timeout: 2 * time.Second,
			// A fresh connection per probe: a kept-alive one may lead to a
			// process that has since been killed and restarted.
			Transport: &http.Transport{DisableKeepAlives: true},
		},
		procs: make(map[string]*process),
	}
	for i, port := range ports[1:] {
		c.addNodeLocked(i+1, port)
	}

	if hasCoordinator {
		if err := c.startCoordinators(ctx); err != nil {
			c.abort()
			return nil, err
		}
	} else {
		c.log.Warn("coordinator binary not built yet: starting storage nodes only", "bin_dir", o.BinDir)
	}

	var wg sync.WaitGroup
	failures := make([]error, len(c.nodes))
	for i, name := range c.nodes {
		wg.Go(func() { failures[i] = c.startAndWait(ctx, name) })
	}
	wg.Wait()
	if err := errors.Join(failures...); err != nil {
		c.abort()
		return nil, err
	}
	return c, nil
}

// reservePorts returns the coordinator's port followed by one port per node.
// Fixed ports are checked to be free, so that a cluster already running on
// them is reported instead of being mistaken for this one's processes.
func reservePorts(o Options, hasCoordinator bool) ([]int, error) {
	free := 0
	if o.CoordinatorPort == 0 {
		free++
	}
	if o.NodeBasePort == 0 {
		free += o.Nodes
	}
	picked, err := FreePorts(o.Host, free)
	if err != nil {
		return nil, err
	}
	ports := make([]int, 0, o.Nodes+1)
	if o.CoordinatorPort == 0 {
		ports, picked = append(ports, picked[0]), picked[1:]
	} else {
		if hasCoordinator {
			if err := checkPortFree(o.Host, o.CoordinatorPort, CoordinatorName); err != nil {
				return nil, err
			}
		}
		ports = append(ports, o.CoordinatorPort)
	}
	for i := range o.Nodes {
		if o.NodeBasePort == 0 {
			ports = append(ports, picked[i])
			continue
		}
		port := o.NodeBasePort + i
		if err := checkPortFree(o.Host, port, NodeName(i+1)); err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePorts returns n distinct ports on host that were free a moment ago.
// All n listeners are open at once so that the kernel cannot hand out one
// port twice.
func FreePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "localcluster: pick a free port on %s", host)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// PortInUseError reports that a fixed port the cluster was asked to use is
// taken by another program. Process names the cluster member that wanted it
// (CoordinatorName or a node), so that a caller can name the setting that
// moves it.
// Its kind is errs.Conflict.
type PortInUseError struct {
	Host    string
	Port    int
	Process string
	err     error // the kinded error wrapping the listen failure
}

func (e *PortInUseError) Error() string { return e.err.Error() }
func (e *PortInUseError) Unwrap() error { return e.err }

func checkPortFree(host string, port int, process string) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return &PortInUseError{Host: host, Port: port, Process: process,
			err: errs.Wrap(errs.Conflict, err, "localcluster: port %d on %s for %s is in use", port, host, process)}
	}
	return l.Close()
}

func checkBinary(binDir, name string) error {
	path := filepath.Join(binDir, name)
	st, err := os.Stat(path)
	if err != nil {
		return errs.Wrap(errs.NotFound, err, "localcluster: %s binary not found (build it first)", name)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return errs.E(errs.Invalid, "localcluster: %s is not an executable file", path)
	}
	return nil
}

// baseEnv is the environment every child starts from (see Options.InheritEnv).
func (c *Cluster) baseEnv() []string {
	if c.opts.InheritEnv {
		return os.Environ()
	}
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "TZ", "GODEBUG", "GOMAXPROCS", "GORACE", "GOTRACEBACK", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// childEnv joins the base environment, the caller's extras and the settings
// the cluster owns, in that order: os/exec keeps the last value of a
// repeated key, so the cluster's own settings always win.
func (c *Cluster) childEnv(extra []string, owned ...string) []string {
	env := append(c.baseEnv(), extra...)
	return append(env, owned...)
}

// newCoordinator is the coordinator called name on port; s3Port, when not
// 0, replaces CoordinatorEnv's S3_PORT.
func (c *Cluster) newCoordinator(name string, port, s3Port int, movable bool) *process {
	dir := filepath.Join(c.opts.DataDir, name)
	owned := []string{"SERVER_HOST=" + c.opts.Host, "SERVER_PORT=" + strconv.Itoa(port), "DATA_DIRECTORY=" + dir}
	if s3Port != 0 {
		owned = append(owned, "S3_PORT="+strconv.Itoa(s3Port))
	}
	return &process{
		name:    name,
		binary:  filepath.Join(c.opts.BinDir, CoordinatorBinary),
		host:    c.opts.Host,
		port:    port,
		dataDir: dir,
		logPath: c.logPath(name),
		movable: movable,
		env:     c.childEnv(c.opts.CoordinatorEnv, owned...),
	}
}

// addNodeLocked registers storage node i on port without starting it.
func (c *Cluster) addNodeLocked(i, port int) *process {
	name := NodeName(i)
	dir := filepath.Join(c.opts.DataDir, name)
	p := &process{
		name:    name,
		binary:  filepath.Join(c.opts.BinDir, StorageNodeBinary),
		host:    c.opts.Host,
		port:    port,
		dataDir: dir,
		logPath: c.logPath(name),
		movable: c.opts.NodeBasePort == 0,
		env: c.childEnv(append(append([]string(nil), c.opts.NodeEnv...), c.opts.NodeEnvs[name]...),
			"SERVER_HOST="+c.opts.Host,
			"SERVER_PORT="+strconv.Itoa(port),
			"STORAGE_NODE_ID="+name,
			"STORAGE_DATA_DIRECTORY="+dir,
			"STORAGE_ADVERTISED_HOST="+c.opts.Host,
			"STORAGE_ADVERTISED_PORT="+strconv.Itoa(port),
			"COORDINATOR_URL="+c.CoordinatorURL(),
		),
	}
	c.procs[name] = p
	c.nodes = append(c.nodes, name)
	return p
}

func (c *Cluster) logPath(name string) string {
	return filepath.Join(c.opts.DataDir, "logs", name+".log")
}

// abort kills every running process after a failed Start.
func (c *Cluster) abort() {
	c.mu.Lock()
	c.stopped = true
	var runs []*run
	for _, p := range c.procs {
		if p.cur != nil && p.cur.running() {
			runs = append(runs, p.cur)
		}
	}
	c.mu.Unlock()
	for _, r := range runs {
		r.kill()
	}
}

// Stop stops the coordinators (and the HAProxy in front of several) first,
// so that they do not take the nodes' departure for failures and start
// repairs, then every storage node at once.
// Each gets SIGTERM and Options.StopTimeout to exit before SIGKILL. Stop
// returns only when every process has exited; its error names each process
// that had to be killed or exited with a failure status. After Stop no process
// can be started again; a second Stop does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	c.stopped = true
	var coords []target
	for _, name := range append(slices.Clone(c.coordinators), HAProxyName) {
		if r := c.runningLocked(name); r != nil {
			coords = append(coords, target{c.procs[name], r})
		}
	}
	var nodes []target
	for _, name := range c.nodes {
		if r := c.runningLocked(name); r != nil {
			nodes = append(nodes, target{c.procs[name], r})
		}
	}
	c.mu.Unlock()

	return errors.Join(c.stopAll(coords), c.stopAll(nodes))
}

// stopAll stops every target at once and joins their errors.
func (c *Cluster) stopAll(ts []target) error {
	failures := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() { failures[i] = c.stopRun(t.p, t.r) })
	}
	wg.Wait()
	return errors.Join(failures...)
}

// target is one run of one process, taken under the lock and acted on
// without it.
type target struct {
	p *process
	r *run
}

// runningLocked returns the named process's current run, or nil if the
// process is unknown or not running.
func (c *Cluster) runningLocked(name string) *run {
	p := c.procs[name]
	if p == nil || p.cur == nil || !p.cur.running() {
		return nil
	}
	return p.cur
}

// CoordinatorURL is the coordinator's base URL, such as http://127.0.0.1:8080.
// It is defined (and given to every node as COORDINATOR_URL) even when no
// coordinator runs.
func (c *Cluster) CoordinatorURL() string {
	return "http://" + net.JoinHostPort(c.opts.Host, strconv.Itoa(c.coordPort))
}

// Coordinators returns the names of the coordinators, the first being
// CoordinatorName; empty when the cluster has none.
func (c *Cluster) Coordinators() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.coordinators)
}

// HasCoordinator reports whether the cluster has a coordinator process,
// running or not (it has none when its binary did not exist).
func (c *Cluster) HasCoordinator() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[CoordinatorName] != nil
}

// NodeURL returns the base URL of the named process, such as
// http://127.0.0.1:9001, or "" if the cluster has no process of that name.
func (c *Cluster) NodeURL(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil {
		return p.url()
	}
	return ""
}

// Nodes returns the names of every storage node, running or not, in the order
// they were added.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.nodes...)
}

// PID returns the process id of the named process (a node or
// CoordinatorName), or 0 if it is not running or unknown. A paused process is
// running.
func (c *Cluster) PID(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.runningLocked(name); r != nil {
		return r.cmd.Process.Pid
	}
	return 0
}

// LogPath returns the log file of the named process, or "" if it is unknown.
// Every run of a process appends to the same file.
func (c *Cluster) LogPath(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil {
		return p.logPath
	}
	return ""
}

// DataDir returns the data directory of the named process, or "" if it is
// unknown.
func (c *Cluster) DataDir(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil {
		return p.dataDir
	}
	return ""
}
