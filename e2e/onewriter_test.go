//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

// oneWriterLeaseTTL is LEASE_TTL for TestClusterWorkRunsOnceAcrossCoordinators:
// short, so that waiting several of them stays within the test's budget.
const oneWriterLeaseTTL = 2 * time.Second

// evictedMsg is in the log line of the coordinator that evicts a node.
const evictedMsg = "consecutive health checks, evicted from the ring"

// TestClusterWorkRunsOnceAcrossCoordinators runs three coordinators over one
// PostgreSQL and one Redis and four storage nodes, and counts, across all
// three, what a node's failure sets off: one eviction and one FAILED
// rebalance, however long one waits for a duplicate. Then it pauses the
// coordinator that holds the failure detector's lease until another has
// taken it over, fails a second node under the new holder, and resumes the
// paused one: it must neither evict nor rebalance again.
//
// Why the resumed coordinator does nothing: its detector runs each round
// only after lease.Held.Hold renews the "detector" lease, and the renewal is
// a compare-and-set on the token in Redis (or the store), which the new
// holder has replaced; the retake that follows is a SET NX, which the
// new holder's live lease refuses (membership.Registry.round). Its own
// evictions are done and their rebalances ended before the pause, and a
// rebalance is started only by an eviction this process wrote itself
// (App.onEvent), so nothing queued can run twice. A sweep that was in
// flight at the pause writes none of its outcomes on resuming, as its lease's
// deadline has passed (Registry.sweep checks lease.Held.Valid before each
// write; internal/membership tests that case, which a pause here rarely
// hits). Membership writes are optimistic besides (Registry.update rereads
// the node and retries on a conflict), so no node is evicted twice: a second
// transition from HEALTHY finds the node UNHEALTHY.
func TestClusterWorkRunsOnceAcrossCoordinators(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	shared := []string{"DATABASE_URL=" + pgtest.Start(t).URL(), "REDIS_URL=" + rd.URL(), "API_AUTH=open",
		"LEASE_TTL=" + oneWriterLeaseTTL.String()}
	c := startCluster(t, options{nodes: 4, coordEnv: shared})
	b := c.startExtraCoordinator("coordinator-b", shared...)
	cc := c.startExtraCoordinator("coordinator-c", shared...)
	t.Cleanup(func() { _ = c.lc.ResumeNode(localcluster.CoordinatorName) })

	coords := []*oneWriterCoord{
		{name: localcluster.CoordinatorName, url: c.lc.CoordinatorURL(), log: c.coordLog(), pid: c.lc.PID(localcluster.CoordinatorName),
			signal: func(s syscall.Signal) error {
				if s == syscall.SIGSTOP {
					return c.lc.PauseNode(localcluster.CoordinatorName)
				}
				return c.lc.ResumeNode(localcluster.CoordinatorName)
			}},
		{name: b.name, url: b.url, log: b.log, pid: b.cmd.Process.Pid, signal: b.signalErr},
		{name: cc.name, url: cc.url, log: cc.log, pid: cc.cmd.Process.Pid, signal: cc.signalErr},
	}
	ropts, err := redis.ParseURL(rd.URL())
	require.NoError(t, err)
	rc := redis.NewClient(ropts)
	t.Cleanup(func() { _ = rc.Close() })

	files := c.uploadRandom(12, 8<<10)
	nodes := c.lc.Nodes()
	first, second := nodes[0], nodes[1]
	// Long enough for a duplicate to show: many detector rounds (500 ms)
	// and several LEASE_TTLs, in which every coordinator's lease for the
	// work has lapsed and could have been taken by another.
	quiet := 3*oneWriterLeaseTTL + 2*time.Second

	t.Run("a node killed -9 is evicted and rebalanced once", func(t *testing.T) {
		c := c.with(t)
		require.NoError(t, c.lc.KillNode(first))
		c.waitEvicted(first)
		c.waitStatus(client.FileActive, ids(files)...)
		time.Sleep(quiet)
		requireOnce(t, c, coords, first)
	})

	t.Run("a coordinator paused past its lease does not act on it when resumed", func(t *testing.T) {
		c := c.with(t)
		old := detectorHolder(t, rc, coords)
		t.Logf("%s holds the detector lease; pausing it", old.name)
		require.NoError(t, old.signal(syscall.SIGSTOP))
		var holder *oneWriterCoord
		eventually(t, settleTimeout, "another coordinator takes the detector lease", func() (bool, string) {
			holder = detectorHolder(t, rc, coords)
			return holder != old, holder.name + " holds it"
		})
		// Past LEASE_TTL, so that every lease the paused one held has
		// lapsed, whatever its TTL.
		time.Sleep(oneWriterLeaseTTL + time.Second)
		t.Logf("%s took the detector lease over; killing %s", holder.name, second)
		require.NoError(t, c.lc.KillNode(second))
		api, err := client.New(holder.url, client.Options{HTTPClient: c.http})
		require.NoError(t, err)
		cv := *c
		cv.api = api // the paused coordinator would not answer
		cv.waitEvicted(second)
		eventually(t, settleTimeout, holder.name+" logs the eviction of "+second, func() (bool, string) {
			n := evictions(t, holder.log, second)
			return n == 1, strconv.Itoa(n) + " eviction lines"
		})

		resumedAt := len(readFile(t, old.log))
		require.NoError(t, old.signal(syscall.SIGCONT))
		time.Sleep(quiet)
		after := readFile(t, old.log)[resumedAt:]
		require.NotContains(t, after, evictedMsg, "%s evicted a node after it was resumed", old.name)
		for _, l := range strings.Split(after, "\n") {
			require.False(t, strings.Contains(l, `"msg":"rebalance started"`) && strings.Contains(l, `"trigger":"FAILED"`),
				"%s ran a FAILED rebalance after it was resumed: %s", old.name, l)
		}
		requireOnce(t, c, coords, first)
		requireOnce(t, c, coords, second)
		require.Equal(t, 2.0, sumMetric(c, coords, "dfs_node_failures_total"), "node failures across the coordinators")
		require.Equal(t, 2.0, sumMetric(c, coords, `dfs_rebalance_runs_total{trigger="FAILED"}`), "FAILED rebalances across the coordinators")
		n := cv.nodes()[second]
		require.Equal(t, client.NodeUnhealthy, n.Status, "%+v", n)
		require.False(t, n.OnRing)
	})
}

// oneWriterCoord is one of the test's coordinators, whichever way it was
// started.
type oneWriterCoord struct {
	name, url, log string
	pid            int
	signal         func(syscall.Signal) error
}

// signalErr sends sig to the process's group.
func (p *extraProcess) signalErr(sig syscall.Signal) error {
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// requireOnce requires that, across coords, node was evicted once (one
// eviction line in one log) and rebalanced once (one FAILED rebalance among
// the operations of one coordinator).
func requireOnce(t *testing.T, c *cluster, coords []*oneWriterCoord, node string) {
	t.Helper()
	evicted, runs := map[string]int{}, map[string]int{}
	for _, co := range coords {
		if n := evictions(t, co.log, node); n > 0 {
			evicted[co.name] = n
		}
		var snap ops.Snapshot
		resp, err := c.http.Get(co.url + "/api/cluster/operations")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		err = json.NewDecoder(resp.Body).Decode(&snap)
		resp.Body.Close()
		require.NoError(t, err)
		for _, o := range append(snap.Running, snap.Recent...) {
			if o.Kind == ops.Rebalance && o.Trigger == "FAILED" && o.NodeID == node {
				runs[co.name]++
			}
		}
	}
	t.Logf("%s: evictions by coordinator %v, FAILED rebalances by coordinator %v", node, evicted, runs)
	require.Equal(t, 1, total(evicted), "evictions of %s across the coordinators: %v", node, evicted)
	require.Equal(t, 1, total(runs), "FAILED rebalances of %s across the coordinators: %v", node, runs)
}

// evictions counts the lines of the coordinator log at path that evict node.
func evictions(t *testing.T, path, node string) int {
	t.Helper()
	n := 0
	for _, e := range readLogEntries(t, path, "node "+node+" failed ") {
		if strings.Contains(e.str("msg"), evictedMsg) {
			n++
		}
	}
	return n
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// sumMetric adds up one sample over coords' /metrics.
func sumMetric(c *cluster, coords []*oneWriterCoord, sample string) float64 {
	sum := 0.0
	for _, co := range coords {
		v, _ := c.metric(co.url, sample)
		sum += v
	}
	return sum
}

// detectorHolder returns the coordinator whose token holds the failure
// detector's lease in Redis: a token is "<host>:<pid>:<random>".
func detectorHolder(t *testing.T, rc *redis.Client, coords []*oneWriterCoord) *oneWriterCoord {
	t.Helper()
	var tok string
	eventually(t, settleTimeout, "a detector lease in Redis", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := rc.Get(ctx, "dfs:lock:detector").Result()
		if err != nil {
			return false, err.Error()
		}
		tok = v
		return true, ""
	})
	parts := strings.Split(tok, ":")
	require.GreaterOrEqual(t, len(parts), 3, "token %q", tok)
	pid, err := strconv.Atoi(parts[len(parts)-2])
	require.NoError(t, err, "token %q", tok)
	for _, co := range coords {
		if co.pid == pid {
			return co
		}
	}
	require.FailNow(t, fmt.Sprintf("token %q names no coordinator of the test", tok))
	return nil
}
