//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/clustercheck"
	"github.com/dfs-project/dfs/internal/localcluster"
)

// invariantQuiet bounds how long a cluster may take, after a fault has
// passed, to satisfy the invariant on its own. It is generous because the
// package shares two cores under -race; a sweep of seconds normally settles
// a test's few hundred files well within it.
const invariantQuiet = 90 * time.Second

// runningNodes maps every storage node whose process runs (a paused one
// included) to its base URL: those are the nodes that must hold exactly what
// the metadata says.
func (c *cluster) runningNodes() map[string]string {
	out := map[string]string{}
	for _, n := range c.lc.Nodes() {
		if c.lc.PID(n) != 0 {
			out[n] = c.lc.NodeURL(n)
		}
	}
	for name, n := range c.extras {
		select {
		case <-n.done:
		default:
			out[name] = n.url
		}
	}
	return out
}

// checked turns stored files into what the check expects of them.
func checked(files []stored) []clustercheck.File {
	out := make([]clustercheck.File, len(files))
	for i, f := range files {
		out[i] = clustercheck.File{ID: f.res.FileID, SHA256: sha256Hex(f.data)}
	}
	return out
}

// invariantConfirm is how long after a full check held a shallow one must
// hold again: longer than the fast sweep's interval, so that work still in
// flight when the first check held (a reconcile finishing late, a sweep
// acting on a stale view) has shown its effect.
const invariantConfirm = 3 * time.Second

// requireInvariant polls the invariant clustercheck checks over the acknowledged
// files and the deleted ones until it holds, and still holds
// invariantConfirm later, or fails the test with the last report once
// invariantQuiet has passed. The cheap shallow check is polled first, so
// that a converging cluster is not slowed by reads and re-hashes; only when
// it holds is the full check made. No rebalance is asked for: convergence
// must come from the cluster itself.
func (c *cluster) requireInvariant(files []stored, deleted []string) clustercheck.Report {
	c.t.Helper()
	start := time.Now()
	base := clustercheck.Options{API: c.api, HTTP: c.http, Token: c.token, Files: checked(files), Deleted: deleted}
	check := func(shallow bool) (clustercheck.Report, error) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		o := base
		o.Nodes, o.Shallow = c.runningNodes(), shallow
		return clustercheck.Check(ctx, o)
	}
	var (
		last    clustercheck.Report
		lastErr error
		polls   int
	)
	for {
		polls++
		rep, err := check(true)
		if err == nil && rep.OK() {
			rep, err = check(false)
		}
		if err == nil && rep.OK() {
			held := time.Since(start)
			time.Sleep(invariantConfirm)
			again, err := check(true)
			if err == nil && again.OK() {
				c.t.Logf("invariant holds %v after the fault (%d polls), and %v later: %s",
					held.Round(100*time.Millisecond), polls, invariantConfirm, rep.Summary())
				return rep
			}
			c.t.Logf("invariant held %v after the fault, but not %v later: %v %s", held.Round(100*time.Millisecond), invariantConfirm, err, again.Lines(10))
			rep = again
		}
		last, lastErr = rep, err
		if time.Since(start) > invariantQuiet {
			break
		}
		time.Sleep(time.Second)
	}
	if lastErr != nil {
		c.t.Fatalf("invariant not reached within %v: the last check failed: %v", invariantQuiet, lastErr)
	}
	c.t.Fatalf("invariant not reached within %v (%d polls); last report:\n%s", invariantQuiet, polls, last.Lines(40))
	return last
}

// uploadMany stores n files of random sizes in [minSize, maxSize] with a few
// uploads at a time, and returns them in the order of their names.
func (c *cluster) uploadMany(n, minSize, maxSize int) []stored {
	c.t.Helper()
	out := make([]stored, n)
	failures := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range next {
				size := minSize
				if maxSize > minSize {
					size += int(randomBytes(1)[0]) * (maxSize - minSize) / 255
				}
				data := randomBytes(size)
				name := fmt.Sprintf("f-%03d.bin", i)
				res, err := c.upload(name, data)
				out[i], failures[i] = stored{name: name, data: data, res: res}, err
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range failures {
		require.NoError(c.t, err, "upload %d of %d", i, n)
		require.Equal(c.t, client.FileActive, out[i].res.Status, "upload %d: %s", i, out[i].res.Reason)
	}
	return out
}

// coordLog is the log file of the cluster's own coordinator.
func (c *cluster) coordLog() string { return c.lc.LogPath(localcluster.CoordinatorName) }

// rebalanceEntries returns the entries of the coordinator log at path with
// msg prefix for rebalances with the given trigger and node.
func (c *cluster) rebalanceEntries(path, prefix string, trigger client.Trigger, node string) []logEntry {
	c.t.Helper()
	return slices.DeleteFunc(readLogEntries(c.t, path, prefix), func(e logEntry) bool {
		return e.str("trigger") != string(trigger) || e.str("node") != node
	})
}

// copiesCreatedOn counts the reconciler's "created copy" lines for node in
// the coordinator log at path.
func (c *cluster) copiesCreatedOn(path, node string) int {
	c.t.Helper()
	n := 0
	for _, e := range readLogEntries(c.t, path, "created copy") {
		if e.str("node") == node {
			n++
		}
	}
	return n
}

// waitJoinRebalancing adds a node and waits until the coordinator's JOINED
// rebalance for it has started and created at least minCopies copies on it,
// so that a fault made next lands in the middle of it. It fails the test if
// the rebalance completed first: the fault would then prove nothing.
func (c *cluster) waitJoinRebalancing(logs []string, minCopies int) string {
	c.t.Helper()
	spare, err := c.lc.AddNode(context.Background())
	require.NoError(c.t, err)
	eventually(c.t, settleTimeout, "the JOINED rebalance for "+spare+" creating copies", func() (bool, string) {
		started, created := 0, 0
		for _, l := range logs {
			started += len(c.rebalanceEntries(l, "rebalance started", client.TriggerJoined, spare))
			created += c.copiesCreatedOn(l, spare)
		}
		return started > 0 && created >= minCopies, fmt.Sprintf("%d started, %d copies created on %s", started, created, spare)
	})
	c.requireRebalanceRunning(logs, spare)
	return spare
}

// rebalanceEnded returns the summaries of the JOINED rebalances for node
// that ended in the coordinator log at path: completed, or cut short with
// files left for a retry.
func (c *cluster) rebalanceEnded(path, node string) []logEntry {
	c.t.Helper()
	return append(c.rebalanceEntries(path, "rebalance completed", client.TriggerJoined, node),
		c.rebalanceEntries(path, "rebalance cut short", client.TriggerJoined, node)...)
}

// waitRebalanceEnded waits until the JOINED rebalance for node has ended in
// one of the coordinator logs, so that no reconcile of it is still in flight
// when the invariant is checked.
func (c *cluster) waitRebalanceEnded(logs []string, node string) {
	c.t.Helper()
	eventually(c.t, settleTimeout, "the JOINED rebalance for "+node+" ended", func() (bool, string) {
		for _, l := range logs {
			if len(c.rebalanceEnded(l, node)) > 0 {
				return true, ""
			}
		}
		return false, "still running"
	})
}

// requireRebalanceRunning fails the test if the JOINED rebalance for node
// has already ended in any of the coordinator logs.
func (c *cluster) requireRebalanceRunning(logs []string, node string) {
	c.t.Helper()
	for _, l := range logs {
		require.Empty(c.t, c.rebalanceEnded(l, node), "the JOINED rebalance for %s ended before the fault; make it slower", node)
	}
}

// metric returns the value of one sample of the coordinator's /metrics, such
// as `dfs_anti_entropy_found_total{kind="corrupt"}`, and whether it exists.
func (c *cluster) metric(base, sample string) (float64, bool) {
	c.t.Helper()
	resp, err := c.http.Get(base + "/metrics")
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), sample+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		require.NoError(c.t, err, "sample %s", sc.Text())
		return v, true
	}
	require.NoError(c.t, sc.Err())
	return 0, false
}

// antiEntropyMetrics is every anti-entropy counter of a coordinator, for the
// test log: what the sweep found and fixed.
func (c *cluster) antiEntropyMetrics(base string) string {
	c.t.Helper()
	var parts []string
	for _, name := range []string{"dfs_anti_entropy_found_total", "dfs_anti_entropy_fixed_total"} {
		for _, kind := range []string{"misplaced", "missing", "orphan", "corrupt"} {
			if v, ok := c.metric(base, fmt.Sprintf("%s{kind=%q}", name, kind)); ok {
				parts = append(parts, fmt.Sprintf("%s{%s}=%g", strings.TrimPrefix(name, "dfs_anti_entropy_"), kind, v))
			}
		}
	}
	if v, ok := c.metric(base, "dfs_anti_entropy_passes_total"); ok {
		parts = append(parts, fmt.Sprintf("passes=%g", v))
	}
	if len(parts) == 0 {
		return "no anti-entropy metrics"
	}
	return strings.Join(parts, " ")
}

// extraCoordinator is a second coordinator process over the cluster's own
// metadata store (a PostgreSQL both share); no node registers with it, it
// learns them from the store.
type extraCoordinator struct {
	*extraProcess
	api *client.Client
}

// startExtraCoordinator starts another coordinator from the built binary on
// its own port and DATA_DIRECTORY, with the e2e defaults and env on top,
// and waits until it is ready.
func (c *cluster) startExtraCoordinator(name string, env ...string) *extraCoordinator {
	c.t.Helper()
	dir := filepath.Join(c.t.TempDir(), name)
	p := c.startExtraProcess(name, localcluster.CoordinatorBinary, func(string) []string {
		out := slices.Concat(coordinatorDefaults, env, []string{"DATA_DIRECTORY=" + dir})
		if c.token != "" {
			out = append(out, "CLUSTER_TOKEN="+c.token)
		}
		return out
	})
	api, err := client.New(p.url, client.Options{HTTPClient: c.http, Token: c.token})
	require.NoError(c.t, err)
	return &extraCoordinator{extraProcess: p, api: api}
}
