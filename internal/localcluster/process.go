package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// readyPoll is how often a starting process is asked whether it is ready.
const readyPoll = 50 * time.Millisecond

// logTail is how many log lines an error about a failed process quotes.
const logTail = 20

// process is one member of the cluster: everything needed to start it again
// with the same identity, port and data.
type process struct {
	name    string
	binary  string
	host    string
	port    int
	dataDir string
	logPath string
	env     []string
	args    []string
	// stop is the signal that asks it to end (zero: sigTerminate).
	stop signal
	cur  *run // the latest run, nil before the first; guarded by Cluster.mu
	// movable: the port was picked free and the process has never been
	// ready, so a start that finds the port taken may move it (guarded by
	// Cluster.mu).
	movable bool
}

func (p *process) url() string {
	return "http://" + net.JoinHostPort(p.host, strconv.Itoa(p.port))
}

// run is one execution of a process, from start to reaping.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // the result of Wait; read it only after done is closed
	// logStart is where this run's part of the log begins.
	logStart int64
	// asked records that the cluster asked this run to end, so that its
	// exit is not reported to Options.OnExit as unexpected.
	asked atomic.Bool
}

func (r *run) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *run) pid() int { return r.cmd.Process.Pid }

// kill sends SIGKILL and waits until the process has been reaped, which is
// prompt: a killed process cannot delay its end, and os/exec stops waiting for
// its output after WaitDelay.
func (r *run) kill() {
	r.asked.Store(true)
	_ = signalGroup(r.pid(), sigKill)
	<-r.done
}

// startLocked starts a new run of p. The caller holds c.mu.
func (c *Cluster) startLocked(p *process) (*run, error) {
	switch {
	case c.stopped:
		return nil, errs.E(errs.Conflict, "localcluster: cannot start %s: the cluster is stopped", p.name)
	case c.life.Err() != nil:
		return nil, errs.Wrap(errs.Unavailable, c.life.Err(), "localcluster: cannot start %s", p.name)
	case p.cur != nil && p.cur.running():
		return nil, errs.E(errs.Conflict, "localcluster: %s is already running (pid %d)", p.name, p.cur.pid())
	}
	if err := os.MkdirAll(p.dataDir, 0o755); err != nil {
		return nil, errs.Wrap(errs.Other, err, "localcluster: create the data directory of %s", p.name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, errs.Wrap(errs.Other, err, "localcluster: open the log of %s", p.name)
	}
	logStart := int64(0)
	if st, err := logf.Stat(); err == nil {
		logStart = st.Size()
	}
	var out io.Writer = logf
	var tee *prefixWriter
	if c.opts.Tee != nil {
		tee = newPrefixWriter(c.opts.Tee, &c.teeMu, "["+p.name+"] ")
		out = io.MultiWriter(logf, tee)
	}
	// Restarts append to the same file; a banner tells the runs apart.
	fmt.Fprintf(out, "=== localcluster: starting %s at %s ===\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.CommandContext(c.life, p.binary, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = newSysProcAttr()
	// Cancelling the cluster's context asks politely first; os/exec kills
	// the process if it is still there after WaitDelay.
	cmd.Cancel = func() error {
		err := signalGroup(cmd.Process.Pid, sigTerminate)
		_ = signalGroup(cmd.Process.Pid, sigResume)
		return err
	}
	cmd.WaitDelay = c.opts.StopTimeout
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, errs.Wrap(errs.Other, err, "localcluster: start %s", p.name)
	}
	r := &run{cmd: cmd, done: make(chan struct{}), logStart: logStart}
	p.cur = r
	c.log.Info("localcluster: started", "name", p.name, "pid", r.pid(), "url", p.url(), "log", p.logPath)
	go c.reap(p, r, logf, tee)
	return r, nil
}

// reap waits for a run to end and reports how it ended.
func (c *Cluster) reap(p *process, r *run, logf *os.File, tee *prefixWriter) {
	err := r.cmd.Wait()
	var out io.Writer = logf
	if tee != nil {
		tee.Flush()
		out = io.MultiWriter(logf, tee)
	}
	status := "exit status 0"
	if err != nil {
		status = err.Error()
	}
	fmt.Fprintf(out, "=== localcluster: %s (pid %d) ended: %s ===\n", p.name, r.pid(), status)
	logf.Close()
	r.err = err
	expected := r.asked.Load() || c.life.Err() != nil
	close(r.done)
	if expected {
		c.log.Info("localcluster: exited", "name", p.name, "pid", r.pid(), "status", status)
		return
	}
	c.log.Warn("localcluster: exited unexpectedly", "name", p.name, "pid", r.pid(), "status", status, "log", p.logPath)
	if c.opts.OnExit != nil {
		c.opts.OnExit(p.name, err)
	}
}

// beforeStart, when set (by tests), runs before each start of a process.
var beforeStart func(name string, port, attempt int)

// portAttempts bounds the starts of a process whose freely picked port
// another program took before the process could listen on it.
const portAttempts = 3

// startAndWait starts the named process and waits until it is ready; a
// process that does not become ready is killed. A process that exits at its
// first start because its freely picked port was taken meanwhile (by another
// cluster starting beside this one, say) is started again on a new one.
func (c *Cluster) startAndWait(ctx context.Context, name string) error {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if p == nil {
		return errs.E(errs.NotFound, "localcluster: no process named %q", name)
	}
	for attempt := 1; ; attempt++ {
		if beforeStart != nil {
			beforeStart(p.name, p.port, attempt)
		}
		c.mu.Lock()
		r, err := c.startLocked(p)
		c.mu.Unlock()
		if err != nil {
			return err
		}
		err = c.waitReady(ctx, p, r)
		if err == nil {
			c.mu.Lock()
			p.movable = false
			c.mu.Unlock()
			return nil
		}
		r.kill()
		if attempt == portAttempts || !exitedOnBusyPort(p, r) {
			return err
		}
		c.mu.Lock()
		old, moveErr := p.port, c.movePortLocked(p)
		c.mu.Unlock()
		if moveErr != nil {
			return errors.Join(err, moveErr)
		}
		c.log.Warn("localcluster: port taken before the process could listen; starting it on another",
			"name", p.name, "port", old, "new_port", p.port)
	}
}

// exitedOnBusyPort reports whether run r of p ended because its port was in
// use.
func exitedOnBusyPort(p *process, r *run) bool {
	select {
	case <-r.done:
	default:
		return false
	}
	return strings.Contains(logSince(p.logPath, r.logStart), "address already in use")
}

// movePortLocked gives a movable process a new free port. The caller holds
// c.mu.
func (c *Cluster) movePortLocked(p *process) error {
	if !p.movable {
		return errs.E(errs.Conflict, "localcluster: the port of %s is fixed", p.name)
	}
	ports, err := FreePorts(p.host, 1)
	if err != nil {
		return err
	}
	port := strconv.Itoa(ports[0])
	setEnv(p.env, "SERVER_PORT=", port)
	setEnv(p.env, "STORAGE_ADVERTISED_PORT=", port)
	p.port = ports[0]
	if p.name == CoordinatorName && !c.front {
		// It moves before any node has started: they are told where it is.
		c.coordPort = p.port
		for _, name := range c.nodes {
			setEnv(c.procs[name].env, "COORDINATOR_URL=", c.CoordinatorURL())
		}
	}
	return nil
}

// setEnv replaces the value of the entry of env that starts with key (such
// as "SERVER_PORT="), if there is one.
func setEnv(env []string, key, value string) {
	for i, kv := range env {
		if strings.HasPrefix(kv, key) {
			env[i] = key + value
		}
	}
}

// logSince returns what the log at path holds from offset on.
func logSince(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

// waitReady polls /health/ready until it answers 200, the process exits, or
// Options.ReadyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context, p *process, r *run) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	url := p.url() + "/health/ready"
	start := time.Now()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		// The answer alone may come from another program that took the
		// port between FreePorts and the process's own listen.
		if c.ready(ctx, url) && holdsPort(r.pid(), p.port) {
			c.log.Info("localcluster: ready", "name", p.name, "url", p.url(), "after", time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-r.done:
			return errs.E(errs.Unavailable, "localcluster: %s exited before it was ready (%v); last lines of %s:\n%s",
				p.name, r.err, p.logPath, tailLines(p.logPath, logTail))
		case <-ctx.Done():
			return errs.Wrap(errs.Unavailable, ctx.Err(), "localcluster: %s did not answer %s with 200 within %s; last lines of %s:\n%s",
				p.name, url, c.opts.ReadyTimeout, p.logPath, tailLines(p.logPath, logTail))
		case <-tick.C:
		}
	}
}

func (c *Cluster) ready(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.probe.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stopRun sends SIGTERM, or the process's own stop signal (and SIGCONT,
// since a paused process acts on it only once it runs again), waits
// Options.StopTimeout, then kills.
func (c *Cluster) stopRun(p *process, r *run) error {
	r.asked.Store(true)
	if err := signalGroup(r.pid(), p.stop); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return errs.Wrap(errs.Other, err, "localcluster: SIGTERM %s", p.name)
	}
	_ = signalGroup(r.pid(), sigResume)
	timer := time.NewTimer(c.opts.StopTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
		if r.err != nil {
			return errs.Wrap(errs.Other, r.err, "localcluster: %s did not exit cleanly after SIGTERM", p.name)
		}
		return nil
	case <-timer.C:
	}
	r.kill()
	return errs.E(errs.Other, "localcluster: %s did not exit within %s of SIGTERM; killed it", p.name, c.opts.StopTimeout)
}

// current returns the named process and its run, which must be running.
func (c *Cluster) current(name string) (*process, *run, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[name]
	if p == nil {
		return nil, nil, errs.E(errs.NotFound, "localcluster: no process named %q", name)
	}
	r := c.runningLocked(name)
	if r == nil {
		return nil, nil, errs.E(errs.Conflict, "localcluster: %s is not running", name)
	}
	return p, r, nil
}

// StopNode stops the named process (a node, or CoordinatorName) the way an
// orchestrator would: SIGTERM, then SIGKILL after Options.StopTimeout. It
// returns once the process has exited, with an error if it had to be killed
// or exited with a failure status.
func (c *Cluster) StopNode(name string) error {
	p, r, err := c.current(name)
	if err != nil {
		return err
	}
	return c.stopRun(p, r)
}

// KillNode kills the named process with SIGKILL, as a crash or an
// out-of-memory kill would, and returns once it has exited.
func (c *Cluster) KillNode(name string) error {
	_, r, err := c.current(name)
	if err != nil {
		return err
	}
	r.kill()
	return nil
}

// PauseNode freezes the named process with SIGSTOP: it keeps its port and
// connections but answers nothing, like a machine stalled in swap or a long
// GC pause. On Linux it returns once the kernel shows the process stopped.
func (c *Cluster) PauseNode(name string) error {
	return c.signal(name, sigPause)
}

// ResumeNode lets a paused process run again (SIGCONT). On Linux it returns
// once the process is no longer stopped.
func (c *Cluster) ResumeNode(name string) error {
	return c.signal(name, sigResume)
}

func (c *Cluster) signal(name string, s signal) error {
	p, r, err := c.current(name)
	if err != nil {
		return err
	}
	if err := signalGroup(r.pid(), s); err != nil {
		return errs.Wrap(errs.Other, err, "localcluster: signal %s", p.name)
	}
	if err := awaitStopState(r.pid(), s == sigPause); err != nil {
		return errs.Wrap(errs.KindOf(err), err, "localcluster: %s", p.name)
	}
	return nil
}

// StartNode starts a stopped or killed process again with the same id, port,
// data directory and log file, and waits until it is ready (bounded by ctx and
// Options.ReadyTimeout; a process that does not become ready is killed).
func (c *Cluster) StartNode(ctx context.Context, name string) error {
	return c.startAndWait(ctx, name)
}

// AddNode adds storage node node-<N+1>, where N is the number of nodes so
// far, on the port after the last node's (a free port when NodeBasePort is 0),
// starts it and waits until it is ready. It returns the new node's name; if
// the node does not become ready, the node stays in the cluster, stopped, and
// the error ends with the tail of its log.
func (c *Cluster) AddNode(ctx context.Context) (string, error) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return "", errs.E(errs.Conflict, "localcluster: cannot add a node: the cluster is stopped")
	}
	i := len(c.nodes) + 1
	var port int
	if c.opts.NodeBasePort != 0 {
		port = c.opts.NodeBasePort + i - 1
		if port > 65535 {
			c.mu.Unlock()
			return "", errs.E(errs.Invalid, "localcluster: no port left for %s", NodeName(i))
		}
		if err := checkPortFree(c.opts.Host, port, NodeName(i)); err != nil {
			c.mu.Unlock()
			return "", err
		}
	} else {
		ports, err := FreePorts(c.opts.Host, 1)
		if err != nil {
			c.mu.Unlock()
			return "", err
		}
		port = ports[0]
	}
	name := c.addNodeLocked(i, port).name
	c.mu.Unlock()
	return name, c.startAndWait(ctx, name)
}

// StopCoordinator is StopNode(CoordinatorName).
func (c *Cluster) StopCoordinator() error { return c.StopNode(CoordinatorName) }

// KillCoordinator is KillNode(CoordinatorName).
func (c *Cluster) KillCoordinator() error { return c.KillNode(CoordinatorName) }

// StartCoordinator starts the coordinator again with the same port and data
// directory, and waits until it is ready. A cluster that started without a
// coordinator binary gets its coordinator here once the binary exists.
func (c *Cluster) StartCoordinator(ctx context.Context) error {
	c.mu.Lock()
	if c.procs[CoordinatorName] == nil {
		if err := checkBinary(c.opts.BinDir, CoordinatorBinary); err != nil {
			c.mu.Unlock()
			return err
		}
		c.procs[CoordinatorName] = c.newCoordinator(CoordinatorName, c.coordPort, 0, c.opts.CoordinatorPort == 0)
		c.coordinators = []string{CoordinatorName}
	}
	c.mu.Unlock()
	return c.startAndWait(ctx, CoordinatorName)
}
