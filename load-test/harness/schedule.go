package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
)

// restartTimeout bounds the restart of a killed process: its start and its
// wait for readiness.
const restartTimeout = 2 * time.Minute

// KillSchedule kills one process (a storage node, or the coordinator) with
// SIGKILL After the start, keeps it down for DownFor, starts it again, and
// with Every > 0 repeats that every Every from the first kill while the run
// lasts.
type KillSchedule struct {
	Target  string // a node name, or localcluster.CoordinatorName
	After   time.Duration
	DownFor time.Duration
	Every   time.Duration
}

var _ Plan = KillSchedule{}

// Describe says what the schedule does.
func (k KillSchedule) Describe() string {
	s := fmt.Sprintf("kill -9 %s at +%s, start it again %s later", k.Target, k.After, k.DownFor)
	if k.Every > 0 {
		s += fmt.Sprintf(", every %s", k.Every)
	}
	return s
}

// Run carries out the schedule until stop ends. A process it killed is
// always started again, even when stop ends while it is down.
func (k KillSchedule) Run(stop context.Context, env *Env) {
	next := time.Now().Add(k.After)
	for {
		if !sleepUntil(stop, next) {
			return
		}
		if err := env.Events.Do("kill", k.Target, true, func() error { return env.Cluster.KillNode(k.Target) }); err != nil {
			env.Logf("kill %s: %v", k.Target, err)
			return
		}
		env.Logf("killed %s", k.Target)
		sleepUntil(stop, time.Now().Add(k.DownFor))
		restart(stop, env, k.Target)
		if k.Every <= 0 {
			return
		}
		next = next.Add(k.Every)
	}
}

// restart starts a killed process again and logs how long it took.
func restart(stop context.Context, env *Env, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), restartTimeout)
	defer cancel()
	start := time.Now()
	err := env.Events.Do("restart", name, false, func() error {
		if name == localcluster.CoordinatorName {
			return env.Cluster.StartCoordinator(ctx)
		}
		return env.Cluster.StartNode(ctx, name)
	})
	if err != nil {
		env.Logf("restart %s: %v", name, err)
		return
	}
	env.Logf("restarted %s (ready after %s)", name, time.Since(start).Round(time.Millisecond))
}

// sleepUntil waits until t; false when stop ended first.
func sleepUntil(stop context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-stop.Done():
		return false
	case <-timer.C:
		return true
	}
}
