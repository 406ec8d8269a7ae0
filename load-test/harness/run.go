package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/localcluster"
)

// DefaultCoordinatorEnv is the coordinator's settings when the harness starts
// its own cluster: a failure detector and repair loop fast enough that a
// fault of a few seconds is noticed and healed within a short run. Their
// product defaults are 10s, 2s (half the interval, at most) and 60s.
var DefaultCoordinatorEnv = []string{
	"HEALTH_CHECK_INTERVAL=1s",
	"HEALTH_PROBE_TIMEOUT=500ms",
	"REPAIR_INTERVAL=2s",
	"LOG_LEVEL=warn",
}

// DefaultNodeEnv is every storage node's settings when the harness starts
// its own cluster (REGISTRATION_INTERVAL's product default is 15s).
var DefaultNodeEnv = []string{"REGISTRATION_INTERVAL=1s", "LOG_LEVEL=warn"}

// Options describe one run.
type Options struct {
	// URL targets a running coordinator instead of starting a cluster; the
	// harness then controls no process and Plan is not run.
	URL string
	// BinDir holds the coordinator and storage-node binaries; empty builds
	// them from the module into a temporary directory.
	BinDir string
	// DataDir is the cluster's state; empty uses a temporary directory that
	// is removed after a run that found nothing wrong.
	DataDir string
	// Keep keeps DataDir even after a clean run.
	Keep bool
	// Nodes is how many storage nodes the cluster starts with. Default 3.
	Nodes int
	// CoordinatorEnv and NodeEnv are appended to DefaultCoordinatorEnv (and
	// the plan's own settings, see SoakPlan.CoordinatorEnv) and to
	// DefaultNodeEnv; a later KEY wins.
	CoordinatorEnv, NodeEnv []string
	// Redis starts a private redis-server and gives its URL to the
	// coordinator; it fails the run when redis-server is not on PATH.
	Redis bool
	// Duration is how long the traffic runs. Default 30s.
	Duration time.Duration
	Traffic  TrafficOptions
	Final    FinalOptions
	// Plan is the faults made while the traffic runs; nil makes none.
	Plan Plan
	// Repair checks, after the final pass, that one repair pass leaves every
	// acknowledged file ACTIVE with replication-factor verified copies.
	Repair bool
	// RepairWait bounds the wait for files to become ACTIVE after the
	// repair pass. Default 60s.
	RepairWait time.Duration
	// Invariant checks, after the final pass and before any repair pass,
	// that the cluster comes on its own to the invariant of package
	// clustercheck: placement by the ring, every copy on disk, no orphan.
	// Local cluster only.
	Invariant bool
	// InvariantQuiet bounds how long the cluster may take to get there once
	// the traffic has stopped. Default 90s.
	InvariantQuiet time.Duration
	// Log receives progress lines. Default os.Stderr.
	Log io.Writer
	// Progress is how often a progress line is written. Default 5s.
	Progress time.Duration
}

// Plan makes faults while the traffic runs. Run starts it together with the
// traffic and waits for it: Run must return soon after stop ends, and before
// returning put back every process it stopped, so that the closing checks
// see a whole cluster (env.Members lists the nodes it should have).
type Plan interface {
	Describe() string
	Run(stop context.Context, env *Env)
}

// coordinatorEnver is a Plan that needs coordinator settings of its own;
// they come after DefaultCoordinatorEnv and before Options.CoordinatorEnv,
// which can still override them.
type coordinatorEnver interface {
	CoordinatorEnv() []string
}

// Env is what a Plan acts on.
type Env struct {
	Cluster *localcluster.Cluster
	Client  *client.Client
	Redis   *Redis // nil without Options.Redis
	Events  *EventLog
	Rec     *Recorder
	Rand    *rand.Rand
	Logf    func(format string, args ...any)

	mu      sync.Mutex
	members []string
	notes   []string
}

// Note records an observation for the report: something worth knowing that
// is neither a failed request nor a broken promise.
func (e *Env) Note(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notes = append(e.notes, s)
}

// Members returns the storage nodes the cluster should have: those started,
// plus those a plan added, minus those it removed.
func (e *Env) Members() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.members)
}

// AddMember records that node belongs to the cluster now.
func (e *Env) AddMember(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.members, node) {
		e.members = append(e.members, node)
	}
}

// RemoveMember records that node has left the cluster.
func (e *Env) RemoveMember(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.members = slices.DeleteFunc(e.members, func(n string) bool { return n == node })
}

// Run starts a cluster (or uses Options.URL), runs the traffic and the plan
// for Options.Duration, puts the cluster back together, reads back every
// acknowledged file and, with Options.Repair, checks the repaired state. The
// error is for a run that could not be made at all; what the run found is in
// the report (see Report.OK).
func Run(ctx context.Context, opts Options) (*Report, error) {
	opts = opts.withDefaults()
	logf := func(format string, args ...any) {
		fmt.Fprintf(opts.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
	rep := &Report{Mode: "local cluster", Duration: opts.Duration, Traffic: opts.Traffic.withDefaults()}

	var (
		cl      *localcluster.Cluster
		redis   *Redis
		baseURL = opts.URL
		cleanup []func()
	)
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	if opts.URL != "" {
		rep.Mode = "existing cluster at " + opts.URL + " (no faults)"
		opts.Plan = nil
	} else {
		var err error
		cl, redis, err = startLocal(ctx, opts, rep, logf, &cleanup)
		if err != nil {
			return nil, err
		}
		baseURL = cl.CoordinatorURL()
	}

	cli, err := NewClient(baseURL, rep.Traffic.Workers+opts.Final.withDefaults().Concurrency)
	if err != nil {
		return nil, err
	}
	env := &Env{Cluster: cl, Client: cli, Redis: redis, Rand: rand.New(rand.NewPCG(rep.Traffic.Seed, 0xfa017)), Logf: logf}
	if cl != nil {
		env.members = cl.Nodes()
		if err := waitMembersHealthy(ctx, env, 60*time.Second); err != nil {
			return nil, err
		}
	}
	if opts.Plan != nil {
		rep.Plan = opts.Plan.Describe()
	}

	rec := NewRecorder()
	env.Rec, env.Events = rec, NewEventLog(rec)
	led := &Ledger{}
	logf("running %d workers for %s against %s; plan: %s", rep.Traffic.Workers, opts.Duration, baseURL, orNone(rep.Plan))
	stop, cancel := context.WithTimeout(ctx, opts.Duration)
	var wg sync.WaitGroup
	wg.Go(func() { RunTraffic(stop, cli, opts.Traffic, rec, led) })
	if opts.Plan != nil {
		wg.Go(func() { opts.Plan.Run(stop, env) })
	}
	wg.Go(func() { progress(stop, rec, led, opts.Progress, logf) })
	wg.Wait()
	cancel()
	trafficSnap := rec.Snapshot()
	if err := ctx.Err(); err != nil {
		return nil, errs.Wrap(errs.Other, err, "interrupted after %s", trafficSnap.Elapsed.Round(time.Millisecond))
	}
	logf("traffic stopped after %s: %d files acknowledged", trafficSnap.Elapsed.Round(time.Millisecond), led.Len())

	if cl != nil {
		restoreMembers(ctx, env)
		if err := waitMembersHealthy(ctx, env, 60*time.Second); err != nil {
			logf("the cluster is not whole before the final pass: %v", err)
			env.Note("before the final pass: " + err.Error())
		}
	}
	files := led.Files()
	logf("final pass: reading back %d acknowledged files", len(files))
	rep.Final = FinalPass(ctx, cli, files, rec, opts.Final)
	if opts.Invariant && cl != nil {
		// Before the repair pass: its rebalance would do the work the
		// cluster must be shown to do by itself.
		logf("invariant: waiting up to %s for the cluster to settle on its own", opts.InvariantQuiet)
		inv := InvariantCheck(ctx, env, files, opts.InvariantQuiet, opts.Final.withDefaults().Concurrency)
		logf("invariant after %s: %s%s", inv.Waited.Round(time.Millisecond), inv.Summary, inv.Error)
		rep.Invariant = &inv
	}
	if opts.Repair && cl != nil {
		logf("repair pass: rebalance, then wait for every file to be ACTIVE, then verify each")
		r := RepairCheck(ctx, env, files, opts.RepairWait, opts.Final.withDefaults().Concurrency)
		rep.Repair = &r
	}
	env.mu.Lock()
	rep.Notes = append(rep.Notes, env.notes...)
	env.mu.Unlock()
	rep.fill(rec.Snapshot(), trafficSnap.Elapsed, env.Events.Events(), files)
	return rep, nil
}

// startLocal starts the run's own cluster (and Redis) in a data directory,
// appending to cleanup what undoes each step, in order.
func startLocal(ctx context.Context, opts Options, rep *Report, logf func(string, ...any), cleanup *[]func()) (*localcluster.Cluster, *Redis, error) {
	dataDir, removeData, err := prepareDataDir(opts.DataDir)
	if err != nil {
		return nil, nil, err
	}
	rep.DataDir = dataDir
	*cleanup = append(*cleanup, func() {
		// The logs of a run that found something wrong are kept for the
		// post-mortem; an interrupted run found nothing.
		if removeData && !opts.Keep && (rep.OK() || ctx.Err() != nil) {
			_ = os.RemoveAll(dataDir)
			rep.DataDir = ""
			return
		}
		logf("cluster data and logs kept in %s", dataDir)
	})
	binDir := opts.BinDir
	if binDir == "" {
		binDir = filepath.Join(dataDir, "bin")
		logf("building coordinator and storage-node into %s", binDir)
		if _, err := localcluster.Build(ctx, binDir); err != nil {
			return nil, nil, err
		}
	}
	coordEnv := slices.Clone(DefaultCoordinatorEnv)
	if p, ok := opts.Plan.(coordinatorEnver); ok {
		coordEnv = append(coordEnv, p.CoordinatorEnv()...)
	}
	coordEnv = append(coordEnv, opts.CoordinatorEnv...)
	var redis *Redis
	if opts.Redis {
		if redis, err = StartRedis(ctx, filepath.Join(dataDir, "redis")); err != nil {
			return nil, nil, err
		}
		*cleanup = append(*cleanup, redis.Stop)
		coordEnv = append(coordEnv, "REDIS_URL="+redis.URL())
		logf("redis-server at %s", redis.URL())
	}
	nodeEnv := append(slices.Clone(DefaultNodeEnv), opts.NodeEnv...)
	rep.CoordinatorEnv, rep.NodeEnv = coordEnv, nodeEnv
	logf("starting coordinator and %d storage nodes", opts.Nodes)
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: binDir, DataDir: dataDir, Nodes: opts.Nodes,
		CoordinatorEnv: coordEnv, NodeEnv: nodeEnv,
		Logger: slog.New(slog.NewTextHandler(opts.Log, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnExit: func(name string, err error) { rep.addExit(name, err) },
	})
	if err != nil {
		return nil, nil, err
	}
	*cleanup = append(*cleanup, func() {
		if err := c.Stop(); err != nil {
			logf("stopping the cluster: %v", err)
		}
	})
	return c, redis, nil
}

func (o Options) withDefaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = localcluster.DefaultNodes
	}
	if o.Duration <= 0 {
		o.Duration = 30 * time.Second
	}
	if o.RepairWait <= 0 {
		o.RepairWait = 60 * time.Second
	}
	if o.InvariantQuiet <= 0 {
		o.InvariantQuiet = 90 * time.Second
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.Progress <= 0 {
		o.Progress = 5 * time.Second
	}
	return o
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// prepareDataDir returns dir, created, or a new temporary directory that the
// caller may remove (remove is true only then).
func prepareDataDir(dir string) (path string, remove bool, err error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "dfs-load-test-")
		if err != nil {
			return "", false, errs.Wrap(errs.Other, err, "create a temporary directory")
		}
		return d, true, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, errs.Wrap(errs.Other, err, "create %s", dir)
	}
	return dir, false, nil
}

func progress(stop context.Context, rec *Recorder, led *Ledger, every time.Duration, logf func(string, ...any)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		snap := rec.Snapshot()
		line := fmt.Sprintf("t=%s acked=%d", snap.Elapsed.Round(time.Second), led.Len())
		for _, k := range snap.Kinds {
			line += fmt.Sprintf(" %s=%d/%d failed", k.Kind, k.Failures, k.Requests)
		}
		logf("%s", line)
	}
}

// restoreMembers starts every member node that is not running, and the
// coordinator, so that the closing checks see the whole cluster.
func restoreMembers(ctx context.Context, env *Env) {
	for _, name := range append([]string{localcluster.CoordinatorName}, env.Members()...) {
		if env.Cluster.PID(name) != 0 {
			continue
		}
		_ = env.Events.Do("restart (closing)", name, false, func() error { return env.Cluster.StartNode(ctx, name) })
	}
}

// waitMembersHealthy waits until every member node is HEALTHY and on the
// ring. It only watches: forcing probe sweeps would change the very
// behaviour under test.
func waitMembersHealthy(ctx context.Context, env *Env, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last string
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		nodes, err := env.Client.Nodes(rctx)
		rcancel()
		if err == nil {
			ready := map[string]bool{}
			for _, n := range nodes {
				ready[n.NodeID] = n.Status == client.NodeHealthy && n.OnRing
			}
			var waiting []string
			for _, m := range env.Members() {
				if !ready[m] {
					waiting = append(waiting, m)
				}
			}
			if len(waiting) == 0 {
				return nil
			}
			last = fmt.Sprintf("not yet healthy on the ring: %v", waiting)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return errs.E(errs.Unavailable, "the cluster was not whole within %s: %s", limit, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
