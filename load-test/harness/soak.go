package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/localcluster"
)

// SoakPlan is the chaos soak: while the traffic runs it makes, one at a time,
// random storage-node kills and restarts, and at fixed points of the run a
// node join, a coordinator kill and restart, a Redis kill and restart (when
// the run has a Redis) and a node leave (deregistration with drain). Before
// each fault it waits until every member node is healthy on the ring, so
// that faults never pile up beyond what replication promises to survive.
// No fault starts in the last 15 % of the run, which the traffic spends on a
// whole cluster.
type SoakPlan struct {
	// Duration is the length of the run, which places the fixed faults.
	Duration time.Duration
	// MinDown and MaxDown bound how long a killed node stays down. Defaults
	// 2s and 6s.
	MinDown, MaxDown time.Duration
	// Gap is the pause after each fault. Default 2s.
	Gap time.Duration
	// RF is the replication factor: no node leaves when that would leave
	// fewer members. Default 3.
	RF int
}

var (
	_ Plan             = SoakPlan{}
	_ coordinatorEnver = SoakPlan{}
)

// CoordinatorEnv bounds DRAIN_TIMEOUT (product default 5m) by the run's
// length — a quarter of it, at least 30s — so that the leave, which waits
// for its drain, cannot hold the soak long past its end; a drain cut short
// is noted in the report and its leftovers are the repair loop's.
//
// The closing invariant check needs the cluster to settle within a quiet
// period of a minute or so, so the anti-entropy sweep runs every 10s (product
// default 10m), an upload the coordinator's kill abandoned is settled after
// 10s (15m), and a blob no metadata lists is removed once it has been seen so
// for 15s (30m; never less than the abandoned-upload timeout).
func (p SoakPlan) CoordinatorEnv() []string {
	return []string{
		"DRAIN_TIMEOUT=" + max(30*time.Second, p.Duration/4).String(),
		"PENDING_UPLOAD_TIMEOUT=10s", "ANTI_ENTROPY_INTERVAL=10s", "ANTI_ENTROPY_ORPHAN_GRACE=15s",
	}
}

// Fractions of the run at which the fixed faults are due.
const (
	joinAt        = 0.15
	coordinatorAt = 0.35
	redisAt       = 0.50
	leaveAt       = 0.65
	quietAt       = 0.85
)

// Describe says what the soak does.
func (p SoakPlan) Describe() string {
	p = p.withDefaults()
	return fmt.Sprintf("chaos soak over %s: random node kill -9 (down %s–%s, %s gap), node join at %.0f%%, coordinator kill -9 at %.0f%%, "+
		"Redis kill -9 at %.0f%% (when present), node leave at %.0f%%, quiet from %.0f%%",
		p.Duration, p.MinDown, p.MaxDown, p.Gap, joinAt*100, coordinatorAt*100, redisAt*100, leaveAt*100, quietAt*100)
}

func (p SoakPlan) withDefaults() SoakPlan {
	if p.MinDown <= 0 {
		p.MinDown = 2 * time.Second
	}
	if p.MaxDown < p.MinDown {
		p.MaxDown = max(p.MinDown, 6*time.Second)
	}
	if p.Gap <= 0 {
		p.Gap = 2 * time.Second
	}
	if p.RF <= 0 {
		p.RF = 3
	}
	return p
}

type fixedFault struct {
	at   time.Time
	name string
	do   func(stop context.Context, env *Env)
}

// Run makes the soak's faults until stop ends or the quiet tail begins.
func (p SoakPlan) Run(stop context.Context, env *Env) {
	p = p.withDefaults()
	start := time.Now()
	at := func(f float64) time.Time { return start.Add(time.Duration(f * float64(p.Duration))) }
	fixed := []fixedFault{
		{at(joinAt), "join", p.join},
		{at(coordinatorAt), "coordinator restart", p.restartCoordinator},
		{at(redisAt), "redis restart", p.restartRedis},
		{at(leaveAt), "leave", p.leave},
	}
	quiet := at(quietAt)
	// A short warm-up, so that there are files to read when the first
	// fault lands.
	sleepUntil(stop, start.Add(min(3*time.Second, p.Duration/20)))
	for stop.Err() == nil && time.Now().Before(quiet) {
		if err := waitMembersHealthy(stop, env, time.Minute); err != nil {
			env.Logf("soak: before the next fault: %v", err)
		}
		if stop.Err() != nil {
			break
		}
		now := time.Now()
		switch {
		case len(fixed) > 0 && !now.Before(fixed[0].at):
			fixed[0].do(stop, env)
			fixed = fixed[1:]
		default:
			next := quiet
			if len(fixed) > 0 && fixed[0].at.Before(quiet) {
				next = fixed[0].at
			}
			down := p.MinDown + time.Duration(env.Rand.Int64N(int64(p.MaxDown-p.MinDown)+1))
			if now.Add(down).After(next) {
				// No room for a whole kill before the next fixed fault.
				sleepUntil(stop, next)
				continue
			}
			p.killNode(stop, env, down)
		}
		sleepUntil(stop, time.Now().Add(p.Gap))
	}
	for _, f := range fixed {
		_ = env.Events.Do(f.name, "-", false, func() error {
			return errs.E(errs.Unavailable, "skipped: the run ended before it was due")
		})
	}
}

func (p SoakPlan) killNode(stop context.Context, env *Env, down time.Duration) {
	members := env.Members()
	if len(members) == 0 {
		return
	}
	name := members[env.Rand.IntN(len(members))]
	if err := env.Events.Do("kill", name, true, func() error { return env.Cluster.KillNode(name) }); err != nil {
		env.Logf("soak: kill %s: %v", name, err)
		return
	}
	env.Logf("soak: killed %s for %s", name, down)
	sleepUntil(stop, time.Now().Add(down))
	restart(stop, env, name)
}

func (p SoakPlan) join(stop context.Context, env *Env) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), restartTimeout)
	defer cancel()
	// AddNode names the new node after the nodes so far.
	name := localcluster.NodeName(len(env.Cluster.Nodes()) + 1)
	err := env.Events.Do("join", name, true, func() error {
		added, err := env.Cluster.AddNode(ctx)
		if err != nil {
			return err
		}
		env.AddMember(added)
		return waitMembersHealthy(ctx, env, time.Minute)
	})
	if err != nil {
		env.Logf("soak: join: %v", err)
		return
	}
	env.Logf("soak: %s joined the ring", name)
}

func (p SoakPlan) restartCoordinator(stop context.Context, env *Env) {
	if err := env.Events.Do("kill", localcluster.CoordinatorName, true, env.Cluster.KillCoordinator); err != nil {
		env.Logf("soak: kill the coordinator: %v", err)
		return
	}
	env.Logf("soak: killed the coordinator")
	sleepUntil(stop, time.Now().Add(time.Second))
	restart(stop, env, localcluster.CoordinatorName)
}

func (p SoakPlan) restartRedis(stop context.Context, env *Env) {
	if env.Redis == nil {
		_ = env.Events.Do("kill", "redis", false, func() error { return errs.E(errs.NotFound, "skipped: the run has no Redis") })
		return
	}
	if err := env.Events.Do("kill", "redis", true, env.Redis.Kill); err != nil {
		env.Logf("soak: kill redis: %v", err)
		return
	}
	env.Logf("soak: killed redis")
	sleepUntil(stop, time.Now().Add(3*time.Second))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), restartTimeout)
	defer cancel()
	if err := env.Events.Do("restart", "redis", false, func() error { return env.Redis.Restart(ctx) }); err != nil {
		env.Logf("soak: restart redis: %v", err)
	}
}

// leave deregisters a random member with ?wait=true, so that its files are
// drained while the traffic runs, then stops its process as an orchestrator
// would once the preStop hook returns.
func (p SoakPlan) leave(stop context.Context, env *Env) {
	members := env.Members()
	if len(members) <= p.RF {
		_ = env.Events.Do("leave", "-", false, func() error {
			return errs.E(errs.Conflict, "skipped: %d members, a leave would leave fewer than RF=%d", len(members), p.RF)
		})
		return
	}
	name := members[env.Rand.IntN(len(members))]
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), 10*time.Minute)
	defer cancel()
	var res client.DeregisterResult
	err := env.Events.Do("leave", name, true, func() error {
		var err error
		res, err = env.Client.Deregister(ctx, name, true)
		return err
	})
	switch {
	case err != nil:
		env.Logf("soak: leave %s: %v", name, err)
		return
	case !res.Drain.Complete:
		// The node is off the ring either way; what is left on it is for
		// the repair loop, as after any node loss. It is worth a note: a
		// preStop hook would stop the node now too.
		note := fmt.Sprintf("the drain of %s answered with %d files still on it", name, res.Drain.FilesRemaining)
		if run := res.Drain.Run; run != nil {
			note += fmt.Sprintf(" (its run: %d files scanned, %d affected, %d copies created, %d removed, %d failures, %d ms)",
				run.FilesScanned, run.FilesAffected, run.CopiesCreated, run.CopiesRemoved, run.Failures, run.DurationMs)
		}
		// PENDING rows left by uploads the coordinator's kill interrupted
		// are a known cause; say how many there are.
		if l, err := env.Client.List(ctx, 0, 1, []client.FileStatus{client.FilePending}); err == nil {
			note += fmt.Sprintf("; the cluster holds %d PENDING files", l.Total)
		}
		env.Note(note)
		env.Logf("soak: %s left with %d files not drained", name, res.Drain.FilesRemaining)
	default:
		env.Logf("soak: %s left (drained)", name)
	}
	env.RemoveMember(name)
	if env.Cluster.PID(name) != 0 {
		_ = env.Events.Do("stop", name, false, func() error { return env.Cluster.StopNode(name) })
	}
}
