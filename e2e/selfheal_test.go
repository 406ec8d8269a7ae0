//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

// The faults the cluster must heal from on its own, each produced for real and each followed by the
// invariant check (requireInvariant) and nothing else: no test here asks for
// a rebalance, so whatever puts the cluster right must do it on its own.
// Each fault once left the cluster wrong for good while it called its files
// ACTIVE.

// Settings for the tests that rely on the anti-entropy sweep: a whole pass
// every two seconds, and a blob no metadata lists removed once it has been
// seen so for three (PENDING_UPLOAD_TIMEOUT is 2s here).
var sweepFast = []string{"ANTI_ENTROPY_INTERVAL=2s", "ANTI_ENTROPY_ORPHAN_GRACE=3s"}

// sweepOff leaves one sweep an hour, so that only the mechanism a test is
// about can put the cluster right within the test.
var sweepOff = []string{"ANTI_ENTROPY_INTERVAL=1h"}

// slowRebalance reconciles one file at a time, so that a JOINED rebalance
// over a few hundred files lasts long enough for a fault to land inside it.
const slowRebalance = "REBALANCE_PARALLELISM=1"

func env(groups ...[]string) []string { return slices.Concat(groups...) }

// A coordinator SIGKILLed in the middle of the rebalance that follows a
// join, then restarted on the same store, must finish the work: the
// membership change is recorded with an epoch the rebalance had not
// completed, and the sweep is too slow here to hide a missing catch-up.
func TestSelfHealCoordinatorKilledDuringJoinRebalance(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3, coordEnv: env(sweepOff, []string{slowRebalance})})
	files := c.uploadMany(300, 4<<10, 16<<10)

	spare := c.waitJoinRebalancing([]string{c.coordLog()}, 5)
	require.NoError(t, c.lc.KillCoordinator())
	c.requireRebalanceRunning([]string{c.coordLog()}, spare)
	created := c.copiesCreatedOn(c.coordLog(), spare)
	t.Logf("coordinator killed after %d copies on %s", created, spare)

	require.NoError(t, c.lc.StartCoordinator(context.Background()))
	c.requireInvariant(files, nil)
	t.Logf("the restarted coordinator started %d catch-up rebalance(s) for owed membership epochs; %d did not complete, %d did",
		len(c.logEntries(localcluster.CoordinatorName, "membership changes are owed a rebalance")),
		len(c.logEntries(localcluster.CoordinatorName, "catch-up rebalance did not complete")),
		len(c.logEntries(localcluster.CoordinatorName, "catch-up rebalance completed")))
	for _, e := range c.logEntries(localcluster.CoordinatorName, "catch-up rebalance did not complete") {
		t.Logf("  cut short: skipped=%v err=%v", e["skipped"], e["err"])
	}
}

// A node whose data directory is wiped and which is back 0.1 s later, well
// inside the failure detector's threshold, has lost every copy the metadata
// places on it. Its disk's new identity must make the coordinator rebuild
// them at once; the sweep is too slow here to do it instead.
func TestSelfHealNodeDiskWipedFasterThanTheDetector(t *testing.T) {
	t.Parallel()
	// Six failed probes half a second apart evict a node: three seconds,
	// far more than the restart takes.
	c := startCluster(t, options{nodes: 3, coordEnv: env(sweepOff, []string{"HEALTH_FAILURE_THRESHOLD=6"})})
	files := c.uploadMany(200, 4<<10, 16<<10)
	victim := localcluster.NodeName(2)
	require.Len(t, c.blobs(victim), len(files), "with three nodes every file has a copy on each")

	require.NoError(t, c.lc.KillNode(victim))
	require.NoError(t, os.RemoveAll(c.lc.DataDir(victim)))
	// The replacement disk's downtime is the fault itself, not a wait for
	// a condition.
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.lc.StartNode(context.Background(), victim))
	require.Empty(t, c.logEntries(localcluster.CoordinatorName, "node "+victim+" failed"),
		"the detector evicted %s: the restart did not beat it, so the test shows nothing", victim)

	c.requireInvariant(files, nil)
	require.Empty(t, c.logEntries(localcluster.CoordinatorName, "node "+victim+" failed"), "%s was never to be evicted", victim)
}

// A node that would lose its surplus copies to a join is killed while the
// rebalance runs, and back before the detector evicts it: the rebalance
// cannot remove the copies it no longer needs there, leaving files with four
// ACTIVE copy rows, or intact blobs under rows marked FAILED. The sweep must
// bring every file back to its three copies and reclaim the blobs.
func TestSelfHealSurplusHolderKilledMidRebalance(t *testing.T) {
	t.Parallel()
	// Thirty failed probes half a second apart: fifteen seconds before an
	// eviction, well over the victim's downtime below. The sweep checks at
	// most 25 files a second, so that the rebalance, not the sweep (eight
	// files at a time by default), meets the victim for most of the files
	// still to move.
	c := startCluster(t, options{nodes: 3, coordEnv: env(sweepFast, []string{slowRebalance, "HEALTH_FAILURE_THRESHOLD=30", "ANTI_ENTROPY_RATE=25"})})
	files := c.uploadMany(200, 4<<10, 16<<10)
	victim := localcluster.NodeName(1)

	spare := c.waitJoinRebalancing([]string{c.coordLog()}, 5)
	require.NoError(t, c.lc.KillNode(victim))
	killedAt := time.Now()
	// Down until the rebalance has met it for the rest of its files, but
	// never long enough for the detector.
	var done []logEntry
	for time.Since(killedAt) < 8*time.Second {
		if done = c.rebalanceEnded(c.coordLog(), spare); len(done) > 0 {
			break
		}
		time.Sleep(pollInterval)
	}
	require.NoError(t, c.lc.StartNode(context.Background(), victim))
	require.Empty(t, c.logEntries(localcluster.CoordinatorName, "node "+victim+" failed"),
		"the detector evicted %s: the fault was meant to stay below its threshold", victim)
	require.NotEmpty(t, done, "the JOINED rebalance did not finish while %s was down", victim)
	rep := done[0]
	t.Logf("%s down for %v; the JOINED rebalance ended (%s) with created=%v removed=%v skipped=%v failures=%v",
		victim, time.Since(killedAt).Round(100*time.Millisecond), rep.str("msg"), rep["created"], rep["removed"], rep["skipped"], rep["failures"])
	require.Less(t, rep.num("removed"), rep.num("created"),
		"every surplus copy was removed although %s was down: the fault did not bite", victim)

	c.requireInvariant(files, nil)
	t.Logf("anti-entropy: %s", c.antiEntropyMetrics(c.lc.CoordinatorURL()))
}

// deleteMany deletes files through api, a few at a time, and returns their
// ids with every delete that was refused: a refused delete would leave the
// test unsure whether the file should exist, so callers require none. It
// may run outside the test's goroutine.
func deleteMany(api *client.Client, files []stored) ([]string, error) {
	out := make([]string, len(files))
	failures := make([]error, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range next {
				ctx, cancel := callCtx()
				out[i] = files[i].res.FileID
				if _, err := api.Delete(ctx, out[i]); err != nil {
					failures[i] = fmt.Errorf("delete of %s: %w", out[i], err)
				}
				cancel()
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(failures...)
}

// retryDeletes deletes files again; one already deleted (404) counts as
// done, since a delete that failed may have got as far as marking it.
func retryDeletes(api *client.Client, files []stored) error {
	var failures []error
	for _, f := range files {
		ctx, cancel := callCtx()
		_, err := api.Delete(ctx, f.res.FileID)
		cancel()
		if ae := apiError(err); err != nil && (ae == nil || ae.Status != http.StatusNotFound) {
			failures = append(failures, fmt.Errorf("delete of %s: %w", f.res.FileID, err))
		}
	}
	return errors.Join(failures...)
}

// split returns every other file, and the rest.
func split(files []stored) (odd, even []stored) {
	for i, f := range files {
		if i%2 == 1 {
			odd = append(odd, f)
		} else {
			even = append(even, f)
		}
	}
	return odd, even
}

// Deletes issued while a join's rebalance copies files onto the newcomer:
// a copy that lands after its file was deleted is an orphan, which must be
// removed — by the reconciler that made it or by the sweep.
func TestSelfHealDeletesRacingRebalanceCopies(t *testing.T) {
	t.Parallel()

	t.Run("one coordinator", func(t *testing.T) {
		t.Parallel()
		// A few reconciles at once: copies in flight while the deletes run,
		// and a rebalance that lasts long enough to meet them. The bandwidth
		// bound keeps it going for a few seconds however fast the machine
		// is (about 1 MiB of copies): unbounded, it had ended by the time a
		// loaded CI machine looked.
		c := startCluster(t, options{nodes: 3, coordEnv: env(sweepFast, []string{"REBALANCE_PARALLELISM=4", "REBALANCE_BANDWIDTH=256KiB"})})
		files := c.uploadMany(300, 4<<10, 16<<10)

		spare := c.waitJoinRebalancing([]string{c.coordLog()}, 1)
		// The newcomer stalls for a moment, as a slow disk would: the copies
		// in flight to it wait in the middle of their transfer while every
		// file still due for a copy there is deleted, and land afterwards.
		require.NoError(t, c.lc.PauseNode(spare))
		copied := map[string]bool{}
		for _, e := range readLogEntries(t, c.coordLog(), "created copy") {
			copied[e.str("file")] = true
		}
		rg := ringOf(append(c.lc.Nodes()[:3], spare)...)
		var gone, kept []stored
		for _, f := range files {
			if !copied[f.res.FileID] && slices.Contains(rg.Preference(f.res.FileID, 3), spare) {
				gone = append(gone, f)
			} else {
				kept = append(kept, f)
			}
		}
		require.NotEmpty(t, gone, "every copy was made before the pause")
		var (
			ids  []string
			derr error
		)
		deleted := make(chan struct{})
		go func() { ids, derr = deleteMany(c.api, gone); close(deleted) }()
		// The stall is the fault; a deletion that needs the stalled node
		// waits for it, so the stall is bounded rather than waited out.
		select {
		case <-deleted:
		case <-time.After(2 * time.Second):
		}
		require.NoError(t, c.lc.ResumeNode(spare))
		<-deleted
		require.NoError(t, derr)
		t.Logf("%d deletes issued while %s stalled; the JOINED rebalance had ended by their end: %t",
			len(ids), spare, len(c.rebalanceEnded(c.coordLog(), spare)) > 0)
		c.waitRebalanceEnded([]string{c.coordLog()}, spare)
		c.requireInvariant(kept, ids)
		t.Logf("anti-entropy: %s", c.antiEntropyMetrics(c.lc.CoordinatorURL()))
	})

	t.Run("two coordinators over PostgreSQL, one paused", func(t *testing.T) {
		t.Parallel()
		// Leases of three seconds: a pause longer than that hands the
		// paused coordinator's work to the other, and the paused one wakes
		// up in the middle of reconciles it no longer owns.
		shared := env(sweepFast, []string{"DATABASE_URL=" + pgtest.Start(t).URL(), "LEASE_TTL=3s", "REBALANCE_PARALLELISM=4"})
		c := startCluster(t, options{nodes: 3, coordEnv: shared})
		other := c.startExtraCoordinator("coordinator-b", shared...)
		files := c.uploadMany(300, 4<<10, 16<<10)
		gone, kept := split(files)

		logs := []string{c.coordLog(), other.log}
		spare := c.waitJoinRebalancing(logs, 1)
		// Pause whichever coordinator runs the JOINED rebalance; the deletes
		// go through the other one.
		var pause, resume func()
		deleter, pausedLog := c.api, other.log
		if len(c.rebalanceEntries(c.coordLog(), "rebalance started", client.TriggerJoined, spare)) > 0 {
			pausedLog = c.coordLog()
			pause = func() { require.NoError(t, c.lc.PauseNode(localcluster.CoordinatorName)) }
			resume = func() { require.NoError(t, c.lc.ResumeNode(localcluster.CoordinatorName)) }
			deleter = other.api
			t.Logf("pausing %s, which runs the JOINED rebalance", localcluster.CoordinatorName)
		} else {
			pause = func() { other.signal(t, syscall.SIGSTOP) }
			resume = func() { other.signal(t, syscall.SIGCONT) }
			t.Logf("pausing %s, which runs the JOINED rebalance", other.name)
		}
		pausedAt := time.Now()
		pause()
		deleted, err := deleteMany(deleter, gone)
		// The pause is the fault: it lasts two lease lives, so that the
		// other coordinator takes over the work the paused one holds.
		time.Sleep(time.Until(pausedAt.Add(6 * time.Second)))
		resume()
		if err != nil {
			// A coordinator frozen inside a metadata transaction holds its
			// row locks in PostgreSQL, so a delete of that file through the
			// other one times out (503) until the frozen one runs again. A
			// user would retry; so does the test, now that it runs.
			t.Logf("deletes that failed during the pause, retried: %v", err)
			require.NoError(t, retryDeletes(deleter, gone))
		}
		t.Logf("%d deletes issued through the other coordinator during a pause of %v",
			len(deleted), time.Since(pausedAt).Round(100*time.Millisecond))
		// The paused coordinator wakes up in the middle of its run; what it
		// does then is part of the fault.
		c.waitRebalanceEnded([]string{pausedLog}, spare)

		c.requireInvariant(kept, deleted)
		t.Logf("anti-entropy on %s: %s", localcluster.CoordinatorName, c.antiEntropyMetrics(c.lc.CoordinatorURL()))
		t.Logf("anti-entropy on %s: %s", other.name, c.antiEntropyMetrics(other.url))
	})
}

// Redis going away in the middle of a join's rebalance: the lease fallback
// refuses leases for a grace period, and reconciles skipped for want of one
// must be retried, not reported done. The sweep is too slow here to hide a
// run reported complete when it was not: only the epoch catch-up can finish
// the work.
func TestSelfHealRedisLostMidJoin(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name string
		// do makes the fault; the returned func ends it (nil: it lasts).
		do func(t *testing.T, rd *redistest.Server) func()
	}{
		{"killed", func(_ *testing.T, rd *redistest.Server) func() { rd.Kill(); return nil }},
		// Hung for a while: every Redis call times out, then it answers
		// again, having kept what it held.
		{"paused", func(_ *testing.T, rd *redistest.Server) func() { rd.Pause(); return rd.Resume }},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			t.Parallel()
			rd := redistest.Start(t)
			c := startCluster(t, options{nodes: 3, coordEnv: env(sweepOff, []string{slowRebalance, "REDIS_URL=" + rd.URL()})})
			files := c.uploadMany(300, 4<<10, 16<<10)

			spare := c.waitJoinRebalancing([]string{c.coordLog()}, 5)
			end := fault.do(t, rd)
			if end != nil {
				// The hang is the fault; a few seconds span several
				// Redis timeouts and lease renewals.
				time.Sleep(5 * time.Second)
				end()
			}
			t.Logf("Redis %s after %d copies on %s", fault.name, c.copiesCreatedOn(c.coordLog(), spare), spare)
			c.waitRebalanceEnded([]string{c.coordLog()}, spare)
			c.requireInvariant(files, nil)
			t.Logf("anti-entropy: %s", c.antiEntropyMetrics(c.lc.CoordinatorURL()))
		})
	}
}

// A copy whose .sha256 sidecar is torn (empty, as after a crash without a
// sync) and another whose sidecar holds garbage: the node calls both corrupt,
// and the coordinator must replace them rather than take the node for
// unreachable or the copies for intact. In the volumes layout only blobs
// above STORAGE_INLINE_MAX have sidecars, so the limit is set below the
// files' sizes (the files layout ignores it).
func TestSelfHealTornAndGarbageSidecars(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3, coordEnv: sweepFast, nodeEnv: []string{"STORAGE_INLINE_MAX=1KiB"}})
	files := c.uploadMany(100, 4<<10, 16<<10)
	foundBefore, _ := c.metric(c.lc.CoordinatorURL(), `dfs_anti_entropy_found_total{kind="corrupt"}`)

	torn, garbage := files[0], files[1]
	tornNode, garbageNode := torn.res.PrimaryNode, garbage.res.Replicas[0]
	tornPath := blobfault.Locate(t, c.lc.DataDir(tornNode), torn.res.FileID).Sidecar
	garbagePath := blobfault.Locate(t, c.lc.DataDir(garbageNode), garbage.res.FileID).Sidecar
	require.NotEmpty(t, tornPath, "a copy kept in a file of its own, with a sidecar")
	require.NotEmpty(t, garbagePath, "a copy kept in a file of its own, with a sidecar")
	require.NoError(t, os.Truncate(tornPath, 0))
	require.NoError(t, os.WriteFile(garbagePath, []byte("\x00\xffnot a checksum at all\n"), 0o644))
	// The node itself sees both copies as bad now: the fault is real.
	for _, bad := range []struct{ node, id string }{{tornNode, torn.res.FileID}, {garbageNode, garbage.res.FileID}} {
		info, ok := c.blobs(bad.node)[bad.id]
		require.True(t, ok, "%s lists %s", bad.node, bad.id)
		require.Empty(t, info.Checksum, "%s lists %s without a readable checksum", bad.node, bad.id)
	}

	c.requireInvariant(files, nil)
	found, ok := c.metric(c.lc.CoordinatorURL(), `dfs_anti_entropy_found_total{kind="corrupt"}`)
	require.True(t, ok, "the coordinator exports dfs_anti_entropy_found_total{kind=\"corrupt\"}")
	require.Greater(t, found, foundBefore, "the sweep counted the corrupt copies it found")
	t.Logf("anti-entropy: %s", c.antiEntropyMetrics(c.lc.CoordinatorURL()))
}
