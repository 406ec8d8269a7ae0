//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

// ringOf is the ring the coordinator builds for these nodes at the default
// VIRTUAL_NODES; placement is byte-exact by contract, so a test may compute
// preference lists itself.
func ringOf(nodes ...string) *ring.Ring { return ring.New(100, nodes...) }

// reader downloads files in a loop until stopped and counts what it saw:
// the client-side view of a fault.
type reader struct {
	reads    atomic.Int64
	failures atomic.Int64
	mu       sync.Mutex
	errs     []string
	stop     chan struct{}
	done     sync.WaitGroup
}

// startReaders runs n goroutines that download files round robin and
// byte-compare them.
func (c *cluster) startReaders(n int, files []stored) *reader {
	r := &reader{stop: make(chan struct{})}
	for w := range n {
		r.done.Go(func() {
			for i := w; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				f := files[i%len(files)]
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				got, _, err := c.download(ctx, f.res.FileID)
				cancel()
				r.reads.Add(1)
				if err == nil && !bytes.Equal(got, f.data) {
					err = fmt.Errorf("bytes differ")
				}
				if err != nil {
					r.failures.Add(1)
					r.mu.Lock()
					r.errs = append(r.errs, f.res.FileID+": "+err.Error())
					r.mu.Unlock()
				}
			}
		})
	}
	return r
}

// finish stops the readers and requires that none of their reads failed.
func (r *reader) finish(t *testing.T) int64 {
	t.Helper()
	close(r.stop)
	r.done.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Zero(t, r.failures.Load(), "failed reads: %v", r.errs)
	return r.reads.Load()
}

func TestPrimaryKilledReadsFailOverAndUploadsRouteAround(t *testing.T) {
	t.Parallel()
	// The detector never evicts here, so the dead node stays on the ring:
	// what is shown is that reads and writes route around a dead node on
	// their own, without waiting for the failure detector.
	c := startCluster(t, options{nodes: 4, coordEnv: []string{"HEALTH_FAILURE_THRESHOLD=1000"}})
	files := c.uploadRandom(24, 16<<10)

	byPrimary, victim := primaries(files)
	require.NotEmpty(t, byPrimary[victim])
	require.NoError(t, c.lc.KillNode(victim))

	for _, f := range byPrimary[victim] {
		info := c.mustRead(f)
		require.NotEqual(t, victim, info.ServedBy, "file %s was served by its dead primary", f.res.FileID)
		require.Contains(t, f.res.Replicas, info.ServedBy, "file %s was served by a node that holds no copy", f.res.FileID)
	}
	require.NotEmpty(t, c.logEntries(localcluster.CoordinatorName, "serving file from another holder"),
		"the coordinator did not log the failover")
	require.True(t, c.nodes()[victim].OnRing, "the dead node must still be on the ring for this test to mean anything")

	alive := slices.DeleteFunc(c.lc.Nodes(), func(n string) bool { return n == victim })
	rg := ringOf(c.lc.Nodes()...)
	routedAround := 0
	for i := range 12 {
		f := c.mustUpload(fmt.Sprintf("after-%02d.bin", i), randomBytes(8<<10))
		require.Equal(t, client.FileActive, f.res.Status, "three live nodes remain: every upload gets three copies (%s)", f.res.Reason)
		holders := append([]string{f.res.PrimaryNode}, f.res.Replicas...)
		require.NotContains(t, holders, victim)
		// The primary is the first live node of the preference list.
		pref := rg.Preference(f.res.FileID, 4)
		live := slices.DeleteFunc(slices.Clone(pref), func(n string) bool { return n == victim })
		require.Equal(t, live[0], f.res.PrimaryNode, "preference list %v", pref)
		require.ElementsMatch(t, live[:3], holders)
		if slices.Contains(pref[:3], victim) {
			routedAround++
			md := c.metadata(f.res.FileID)
			require.ElementsMatch(t, alive, activeCopies(md))
		}
		c.mustRead(f)
	}
	require.NotZero(t, routedAround, "no upload had the dead node in its plan; the test proved nothing")
}

func TestReplicaKilledClientSeesNothingThenRestoredOnANewNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	files := c.uploadRandom(12, 16<<10)
	victim := localcluster.NodeName(2)
	// The client reads the files the victim holds a replica of, not the
	// primary copy.
	var replicaOnly []stored
	for _, f := range files {
		if f.res.PrimaryNode != victim {
			replicaOnly = append(replicaOnly, f)
		}
	}
	require.NotEmpty(t, replicaOnly)

	readers := c.startReaders(2, replicaOnly)
	require.NoError(t, c.lc.KillNode(victim))
	c.waitEvicted(victim)
	// With three nodes every file had a copy on the victim and has nowhere
	// to put a third copy now.
	c.waitStatus(client.FileDegraded, ids(files)...)
	for _, id := range ids(files) {
		md := c.metadata(id)
		require.NotContains(t, activeCopies(md), victim)
		require.NotEqual(t, victim, md.PrimaryNode)
	}

	spare, err := c.lc.AddNode(context.Background())
	require.NoError(t, err)
	c.waitOnRing(spare)
	c.waitStatus(client.FileActive, ids(files)...)
	for _, id := range ids(files) {
		require.Equal(t, []string{"node-1", "node-3", spare}, activeCopies(c.metadata(id)))
	}
	reads := readers.finish(t)
	require.NotZero(t, reads)
	t.Logf("%d reads across the kill, the eviction and the restore, none failed", reads)
	for _, f := range files {
		c.mustRead(f)
	}
	require.Len(t, c.blobs(spare), len(files), "the new node holds one copy of every file")
}

func TestReturningNodeIsReadoptedWithoutCopying(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	files := c.uploadRandom(12, 16<<10)
	victim := localcluster.NodeName(2)
	before := c.writes(victim)
	require.Len(t, before, len(files))

	require.NoError(t, c.lc.KillNode(victim))
	c.waitEvicted(victim)
	c.waitStatus(client.FileDegraded, ids(files)...)

	require.NoError(t, c.lc.StartNode(context.Background(), victim))
	c.waitOnRing(victim)
	c.waitStatus(client.FileActive, ids(files)...)

	require.Equal(t, before, c.writes(victim), "the returned node's blobs were rewritten")
	// The RECOVERED rebalance may be cut short, when the repair loop holds
	// the files it meets (they are skipped and the catch-up retries them);
	// whichever way it ended, it must not have copied a byte, and the
	// manual rebalance below shows nothing was left for the retry to do.
	var recovered []logEntry
	eventually(t, settleTimeout, "the RECOVERED rebalance's report", func() (bool, string) {
		recovered = nil
		for _, msg := range []string{"rebalance completed", "rebalance cut short"} {
			for _, e := range c.logEntries(localcluster.CoordinatorName, msg) {
				if e.str("trigger") == string(client.TriggerRecovered) && e.str("node") == victim {
					recovered = append(recovered, e)
				}
			}
		}
		return len(recovered) > 0, "no report yet"
	})
	for _, e := range recovered {
		require.Zero(t, e.num("created"), "the recovery copied bytes: %v", e)
		require.Zero(t, e.num("failures"), "%v", e)
	}
	ctx, cancel := callCtx()
	defer cancel()
	rep, err := c.api.Rebalance(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.CopiesCreated, "%+v", rep)
	require.Zero(t, rep.CopiesRemoved, "%+v", rep)
	require.Zero(t, rep.Failures, "%+v", rep)
	require.Equal(t, before, c.writes(victim))
	for _, f := range files {
		c.mustRead(f)
	}
}

func TestCorruptCopyIsDetectedServedAroundAndRebuilt(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	files := c.uploadRandom(2, 64<<10)

	t.Run("on download", func(t *testing.T) {
		c := c.with(t)
		f := files[0]
		bad := f.res.PrimaryNode
		// A bad sector: same size, same recorded checksum, different bytes.
		blobfault.FlipByte(t, c.lc.DataDir(bad), f.res.FileID)

		info := c.mustRead(f)
		require.NotEqual(t, bad, info.ServedBy, "the corrupt copy was served")
		require.True(t, info.Verified)
		// Quarantined, then rebuilt from a good copy in the background.
		eventually(t, settleTimeout, "the corrupt copy rebuilt", func() (bool, string) { return c.rebuilt(bad, f) })
		c.mustRead(f)
	})

	t.Run("on verify", func(t *testing.T) {
		c := c.with(t)
		f := files[1]
		bad := f.res.Replicas[0]
		blobfault.FlipByte(t, c.lc.DataDir(bad), f.res.FileID)

		ctx, cancel := callCtx()
		defer cancel()
		res, err := c.api.Verify(ctx, f.res.FileID)
		require.NoError(t, err)
		require.Equal(t, client.FileActive, res.Status)
		require.Equal(t, 3, res.HealthyCopies)
		require.Len(t, res.Copies, 3)
		for _, cp := range res.Copies {
			if cp.NodeID == bad {
				require.Equal(t, client.CheckCorrupt, cp.Result, "%+v", cp)
				require.True(t, cp.Rebuilt, "%+v", cp)
				require.NotEqual(t, cp.StoredChecksum, cp.ActualChecksum)
			} else {
				require.Equal(t, client.CheckOK, cp.Result, "%+v", cp)
				require.False(t, cp.Rebuilt)
			}
			require.Equal(t, client.CopyActive, cp.Status, "%+v", cp)
		}
		ok, why := c.rebuilt(bad, f)
		require.True(t, ok, why)
		c.mustRead(f)
	})
}

// rebuilt reports whether node's copy of f on disk is byte-exact again and
// the file ACTIVE with all three copies, and if not, what it found.
func (c *cluster) rebuilt(node string, f stored) (bool, string) {
	b, held := blobfault.Read(c.t, c.dataDir(node), f.res.FileID)
	md := c.metadata(f.res.FileID)
	return held && bytes.Equal(b, f.data) && md.Status == client.FileActive && len(activeCopies(md)) == 3,
		fmt.Sprintf("status %s, copies %v, copy on %s's disk %v, byte-exact %v", md.Status, activeCopies(md), node, held, bytes.Equal(b, f.data))
}

func TestCoordinatorKilledMidUploadLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"embedded store", func(*testing.T) []string { return nil }},
		// Production's shape: its leases in Redis outlive the killed
		// coordinator and the restarted one must wait them out.
		{"postgres and redis", func(t *testing.T) []string {
			return []string{"DATABASE_URL=" + pgtest.Start(t).URL(), "REDIS_URL=" + redistest.Start(t).URL()}
		}},
	}
	for _, store := range stores {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			// An upload younger than PENDING_RECORD_DELAY has no row yet:
			// the crash leaves its copies to the sweep, fast here.
			env := append(store.env(t), "ANTI_ENTROPY_INTERVAL=2s", "ANTI_ENTROPY_ORPHAN_GRACE=3s")
			coordinatorKilledMidUpload(t, startCluster(t, options{nodes: 3, coordEnv: env}))
		})
	}
}

func coordinatorKilledMidUpload(t *testing.T, c *cluster) {
	all := c.lc.Nodes()

	var (
		mu        sync.Mutex
		acked     []stored
		attempted = map[string][]byte{} // by SHA-256: every upload tried, answered or not
	)
	stop := make(chan struct{})
	var uploaders sync.WaitGroup
	// startUploaders runs n goroutines that upload until the coordinator
	// dies under them.
	startUploaders := func(group string, n int) {
		for w := range n {
			uploaders.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					data := randomBytes(256 << 10)
					mu.Lock()
					attempted[sha256Hex(data)] = data
					mu.Unlock()
					name := fmt.Sprintf("%s%d-%03d.bin", group, w, i)
					res, err := c.upload(name, data)
					if err != nil {
						// Only the coordinator's death fails an upload here.
						<-stop
						return
					}
					mu.Lock()
					acked = append(acked, stored{name: name, data: data, res: res})
					mu.Unlock()
				}
			})
		}
	}
	startUploaders("a", 3)
	eventually(t, settleTimeout, "a few acknowledged uploads", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 4, fmt.Sprintf("%d acknowledged", len(acked))
	})

	// A paused node holds the uploads that planned a copy on it in the
	// middle of their node writes: after PENDING_RECORD_DELAY they are
	// PENDING rows, some with copies already on the other nodes, for the
	// crash to strand.
	stalled := all[2]
	require.NoError(t, c.lc.PauseNode(stalled))
	var pending []client.File
	eventually(t, settleTimeout, "uploads held PENDING by the paused node", func() (bool, string) {
		pending = c.files(client.FilePending)
		held := 0
		for _, p := range pending {
			// An upload of this size takes milliseconds unless a node
			// holds it up.
			if time.Since(p.CreatedAt) > 1500*time.Millisecond {
				held++
			}
		}
		return held >= 2, fmt.Sprintf("%d PENDING, %d of them held", len(pending), held)
	})
	// Once the paused node is evicted, new uploads go on without it, so the
	// crash also meets uploads spooling and writing normally.
	c.waitEvicted(stalled)
	mu.Lock()
	ackedAtEviction := len(acked)
	mu.Unlock()
	startUploaders("b", 3)
	eventually(t, settleTimeout, "uploads going on without the paused node", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= ackedAtEviction+3, fmt.Sprintf("%d acknowledged", len(acked))
	})
	require.NoError(t, c.lc.KillCoordinator())
	close(stop)
	uploaders.Wait()
	require.NoError(t, c.lc.ResumeNode(stalled))
	require.NoError(t, c.lc.StartCoordinator(context.Background()))

	// The repair loop settles every abandoned upload (PENDING_UPLOAD_TIMEOUT
	// is 2s) and the cluster returns to full replication.
	eventually(t, settleTimeout, "no PENDING upload left", func() (bool, string) {
		p := c.files(client.FilePending)
		return len(p) == 0, fmt.Sprintf("%d PENDING", len(p))
	})
	c.waitOnRing(all...)
	var live []string
	for _, f := range c.files() {
		live = append(live, f.FileID)
	}
	c.waitStatus(client.FileActive, live...)

	// No orphan: every blob on every node is an ACTIVE copy the metadata
	// records, and every recorded copy is there. The copies of uploads the
	// crash caught before they had a row are removed by the sweep.
	eventually(t, settleTimeout, "blobs on the nodes match the recorded copies", func() (bool, string) {
		held, recorded := c.heldBlobs(all...), c.recordedCopies(all...)
		return equalPlacement(held, recorded), fmt.Sprintf("held %v, recorded %v", held, recorded)
	})
	for _, n := range all {
		requireNoTempFiles(t, c.lc.DataDir(n))
	}
	spool, err := os.ReadDir(c.lc.DataDir(localcluster.CoordinatorName) + "/spool")
	require.NoError(t, err)
	require.Empty(t, spool, "upload spool files survived the restart")

	// Every acknowledged upload is intact.
	for _, f := range acked {
		c.mustRead(f)
	}
	// Every upload the crash stranded was settled by the repair loop:
	// adopted (and then intact, with the bytes the client sent) or
	// discarded. A row seen PENDING that finished before the kill is an
	// ordinary intact file.
	settled := map[string]string{}
	for _, e := range c.logEntries(localcluster.CoordinatorName, "adopting abandoned upload") {
		settled[e.str("file")] = "adopted"
	}
	for _, e := range c.logEntries(localcluster.CoordinatorName, "discarding abandoned upload") {
		settled[e.str("file")] = "discarded"
	}
	check := maps.Clone(settled)
	for _, p := range pending {
		check[p.FileID] = settled[p.FileID]
	}
	for id, how := range check {
		ctx, cancel := callCtx()
		md, err := c.api.Metadata(ctx, id)
		cancel()
		if how == "discarded" {
			requireAPIError(t, err, 404, "FILE_NOT_FOUND")
			continue
		}
		require.NoError(t, err, "upload %s, in flight at the crash", id)
		require.Equal(t, client.FileActive, md.Status)
		data, ok := attempted[md.Checksum]
		require.True(t, ok, "file %s has bytes no client sent", id)
		c.mustRead(stored{data: data, res: client.UploadResult{FileID: id}})
	}
	require.NotEmpty(t, settled, "the crash stranded no upload for the repair loop to settle")
	t.Logf("%d uploads acknowledged, %d seen PENDING before the crash, settled by the repair loop: %v; %d orphan copies removed by the sweep",
		len(acked), len(pending), settled, len(c.logEntries(localcluster.CoordinatorName, "removed an orphan blob")))
}

func equalPlacement(a, b placement) bool {
	for n := range a {
		if !slices.Equal(a[n], b[n]) {
			return false
		}
	}
	for n := range b {
		if !slices.Equal(a[n], b[n]) {
			return false
		}
	}
	return true
}

// requireNoTempFiles fails if a node's data directory holds an unfinished
// write.
func requireNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			return fmt.Errorf("unfinished write left behind: %s", path)
		}
		return nil
	})
	require.NoError(t, err)
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestOneNodeLeftStillServesReadsAndWrites(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	files := c.uploadRandom(6, 16<<10)
	for _, n := range []string{"node-2", "node-3"} {
		require.NoError(t, c.lc.KillNode(n))
	}
	c.waitEvicted("node-2")
	c.waitEvicted("node-3")

	for _, f := range files {
		require.Equal(t, "node-1", c.mustRead(f).ServedBy)
	}
	for i := range 3 {
		f := c.mustUpload(fmt.Sprintf("alone-%d.bin", i), randomBytes(8<<10))
		require.Equal(t, client.FileDegraded, f.res.Status)
		require.Equal(t, "node-1", f.res.PrimaryNode)
		require.Empty(t, f.res.Replicas)
		require.Contains(t, f.res.Reason, "only 1 node(s) on the ring", "the reason must say why")
		files = append(files, f)
		c.mustRead(f)
	}
	c.waitStatus(client.FileDegraded, ids(files)...)

	ctx, cancel := callCtx()
	defer cancel()
	h, err := c.api.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, client.HealthDegraded, h.Status, "%+v", h)
	require.Equal(t, 1, h.Nodes.OnRing)
}

func TestAllNodesDownIsUnavailableAndNothingIsLost(t *testing.T) {
	t.Parallel()
	// The test sweeps by hand, so it can act both before the nodes are
	// evicted and after.
	c := startCluster(t, options{nodes: 3, sweep: true, coordEnv: []string{"HEALTH_CHECK_INTERVAL=1h"}})
	all := c.lc.Nodes()
	files := c.uploadRandom(6, 16<<10)
	before := map[string]map[string]string{}
	for _, n := range all {
		before[n] = c.writes(n)
	}
	for _, n := range all {
		require.NoError(t, c.lc.KillNode(n))
	}

	// Before eviction: the nodes are on the ring but answer nothing.
	ctx, cancel := callCtx()
	defer cancel()
	_, _, err := c.download(ctx, files[0].res.FileID)
	requireAPIError(t, err, 503, "STORAGE_UNAVAILABLE")
	_, err = c.upload("refused.bin", randomBytes(1024))
	requireAPIError(t, err, 503, "STORAGE_UNAVAILABLE")
	require.Empty(t, c.files(client.FilePending), "a refused upload left a PENDING row")

	// After eviction: no node is on the ring.
	for _, n := range all {
		c.waitEvicted(n)
	}
	_, err = c.upload("refused.bin", randomBytes(1024))
	requireAPIError(t, err, 503, "NO_HEALTHY_NODES")
	for _, f := range files {
		_, _, err := c.download(ctx, f.res.FileID)
		requireAPIError(t, err, 503, "STORAGE_UNAVAILABLE", "a download with every holder down is never 404")
	}
	h, err := c.api.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, client.HealthDown, h.Status, "%+v", h)

	for _, n := range all {
		require.NoError(t, c.lc.StartNode(ctx, n))
	}
	c.waitOnRing(all...)
	c.waitStatus(client.FileActive, ids(files)...)
	for _, f := range files {
		c.mustRead(f)
	}
	for _, n := range all {
		require.Equal(t, before[n], c.writes(n), "blobs on %s were rewritten", n)
	}
	require.Len(t, c.files(), len(files), "a refused upload was recorded")
}

// TestPausedNodeDoesNotHoldALargeUpload pauses a node that stays on the ring
// (the detector needs many failed probes) and uploads files far larger than
// the socket buffers between coordinator and node: the copy meant for the
// paused node stops moving, the stall timeout ends it, and the upload goes on
// to the next node in preference order instead of waiting for the pause to
// end.
func TestPausedNodeDoesNotHoldALargeUpload(t *testing.T) {
	t.Parallel()
	// CHUNK_SIZE above the file's size: this is about one blob's copy
	// writes, which a chunked file makes per chunk.
	c := startCluster(t, options{nodes: 4, coordEnv: []string{
		"HEALTH_CHECK_INTERVAL=1s", "HEALTH_FAILURE_THRESHOLD=1000", "NODE_STALL_TIMEOUT=1s", "CHUNK_SIZE=64MiB",
	}})
	all := c.lc.Nodes()
	victim := all[1]
	require.NoError(t, c.lc.PauseNode(victim))
	defer func() { require.NoError(t, c.lc.ResumeNode(victim)) }()

	// Three nodes of four are in each file's plan, so the paused node is in
	// most; upload until one plan held it.
	for i := range 8 {
		data := randomBytes(48 << 20)
		res, err := c.upload(fmt.Sprintf("large-%d.bin", i), data)
		require.NoError(t, err, "upload %d while %s is paused", i, victim)
		f := c.metadata(res.FileID)
		require.NotContains(t, activeCopies(f), victim)
		if !slices.Contains(ringOf(all...).Preference(res.FileID, 3), victim) {
			continue
		}
		require.Equal(t, client.FileActive, res.Status, "the next node took the paused node's copy: %+v", res)
		require.Len(t, activeCopies(f), 3)
		info := c.mustRead(stored{name: res.FileName, data: data, res: res})
		require.NotEqual(t, victim, info.ServedBy)
		n := c.nodes()[victim]
		require.True(t, n.OnRing, "the paused node was never evicted: the stall timeout alone moved the copy: %+v", n)
		return
	}
	t.Fatalf("no upload planned a copy on %s", victim)
}

func TestPausedNodeBelowTheThresholdIsNotEvictedAndReadsGoOn(t *testing.T) {
	t.Parallel()
	// Eviction takes twenty failed probes a second apart. The pause outlasts
	// a node call's answer timeout (5s), so reads must be served by the other
	// holders, and ends well before the threshold: the calls below take
	// about 8s in all on a loaded machine, which left too thin a margin
	// when the threshold was ten.
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"HEALTH_CHECK_INTERVAL=1s", "HEALTH_FAILURE_THRESHOLD=20"}})
	all := c.lc.Nodes()
	files := c.uploadRandom(12, 16<<10)
	byPrimary, victim := primaries(files)
	ringBefore := c.ring()
	heldBefore := c.heldBlobs(all...)
	rebalancesBefore := len(c.logEntries(localcluster.CoordinatorName, "rebalance started"))

	require.NoError(t, c.lc.PauseNode(victim))

	// A hung node holds up no call that does not need its bytes: each is
	// bounded by the probe timeout at most.
	quick := func(what string, call func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		require.NoError(t, call(ctx), "%s while %s is paused", what, victim)
	}
	quick("cluster health", func(ctx context.Context) error {
		h, err := c.api.Health(ctx)
		if err == nil && h.Status == client.HealthDown {
			err = fmt.Errorf("health is DOWN: %+v", h)
		}
		return err
	})
	quick("node list", func(ctx context.Context) error { _, err := c.api.Nodes(ctx); return err })
	quick("file list", func(ctx context.Context) error { _, err := c.api.List(ctx, 0, 100, nil); return err })
	quick("metadata", func(ctx context.Context) error { _, err := c.api.Metadata(ctx, files[0].res.FileID); return err })
	quick("health sweep", func(ctx context.Context) error {
		res, err := c.api.HealthCheck(ctx)
		for _, n := range res.Nodes {
			if n.NodeID == victim && n.Error == "" {
				return fmt.Errorf("the probe of the paused node succeeded: %+v", n)
			}
		}
		return err
	})

	// Reads of the files whose primary is paused, all at once, each within
	// the client's timeout; an upload that plans a copy on the paused node
	// waits for it and finishes once it runs again.
	var wg sync.WaitGroup
	served := make([]string, len(byPrimary[victim]))
	failures := make([]error, len(byPrimary[victim]))
	for i, f := range byPrimary[victim] {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			got, info, err := c.download(ctx, f.res.FileID)
			if err == nil && !bytes.Equal(got, f.data) {
				err = fmt.Errorf("bytes differ")
			}
			served[i], failures[i] = info.ServedBy, err
		})
	}
	uploaded := make(chan error, 1)
	go func() {
		res, err := c.upload("during-pause.bin", randomBytes(8<<10))
		if err == nil && res.Status != client.FileActive {
			err = fmt.Errorf("upload during the pause is %s: %s", res.Status, res.Reason)
		}
		uploaded <- err
	}()
	wg.Wait()
	for i, f := range byPrimary[victim] {
		require.NoError(t, failures[i], "read of %s while its primary %s is paused", f.res.FileID, victim)
		require.NotEqual(t, victim, served[i])
	}
	// The probes did fail: the detector saw the pause and held back.
	n := c.nodes()[victim]
	require.GreaterOrEqual(t, n.ConsecutiveFailures, 2, "%+v", n)
	require.Equal(t, client.NodeHealthy, n.Status, "%+v", n)
	require.True(t, n.OnRing)

	require.NoError(t, c.lc.ResumeNode(victim))
	require.NoError(t, <-uploaded)
	eventually(t, settleTimeout, victim+" probed healthy again", func() (bool, string) {
		n := c.nodes()[victim]
		return n.ConsecutiveFailures == 0 && n.Status == client.NodeHealthy, fmt.Sprintf("%+v", n)
	})

	// No eviction, no rebalance, nothing moved.
	require.Equal(t, ringBefore, c.ring())
	require.Len(t, c.logEntries(localcluster.CoordinatorName, "rebalance started"), rebalancesBefore)
	require.Empty(t, c.logEntries(localcluster.CoordinatorName, "node "+victim+" failed"))
	heldAfter := c.heldBlobs(all...)
	for _, n := range all {
		require.Subset(t, heldAfter[n], heldBefore[n], "blobs left %s", n)
		require.Len(t, heldAfter[n], len(heldBefore[n])+1, "only the new upload may add a blob on %s", n)
	}
	c.waitStatus(client.FileActive, ids(files)...)
}

func TestFullNodeIsRoutedAroundAndReportsIt(t *testing.T) {
	t.Parallel()
	const size = 40 << 10
	const capacity = 64 << 10
	c := startCluster(t, options{nodes: 2})
	const full = "full-1"
	c.startExtraNode(full, fmt.Sprintf("STORAGE_CAPACITY_BYTES=%d", capacity))
	c.waitOnRing(full)
	// Other data fills the disk to the last byte.
	c.putBlob(full, "filler-0001", randomBytes(capacity))
	st := c.stats(full)
	require.EqualValues(t, capacity, st.CapacityBytes)
	require.Zero(t, st.FreeBytes, "%+v", st)

	// Three nodes for three copies: the full node refuses, a file has
	// nowhere else to go, and its reason names the node.
	files := c.uploadRandom(4, size)
	for _, f := range files {
		require.Equal(t, client.FileDegraded, f.res.Status)
		require.Contains(t, f.res.Reason, full, "the reason must name the full node")
		require.NotContains(t, append([]string{f.res.PrimaryNode}, f.res.Replicas...), full)
		c.mustRead(f)
	}
	resp, body := c.internal("GET", full, "/health/ready")
	require.Equal(t, 200, resp.StatusCode, "a full node is still ready: %s", body)

	// With a fourth node every file gets three copies around the full one.
	spare, err := c.lc.AddNode(context.Background())
	require.NoError(t, err)
	c.waitOnRing(spare)
	rg := ringOf("node-1", "node-2", full, spare)
	routedAround := 0
	for i := range 8 {
		f := c.mustUpload(fmt.Sprintf("more-%d.bin", i), randomBytes(size))
		require.Equal(t, client.FileActive, f.res.Status, "%s", f.res.Reason)
		holders := append([]string{f.res.PrimaryNode}, f.res.Replicas...)
		require.ElementsMatch(t, []string{"node-1", "node-2", spare}, holders)
		if slices.Contains(rg.Preference(f.res.FileID, 3), full) {
			routedAround++
		}
		c.mustRead(f)
	}
	require.NotZero(t, routedAround, "no upload planned a copy on the full node; the test proved nothing")
	n := c.nodes()[full]
	require.Equal(t, client.NodeHealthy, n.Status, "a full node is not evicted: %+v", n)
	require.True(t, n.OnRing)
	require.Zero(t, c.stats(full).FreeBytes)
}

func TestDeregisteredNodeIsDrainedBeforeItLeavesUnderLoad(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 5})
	files := c.uploadRandom(24, 16<<10)
	readers := c.startReaders(3, files)

	// What a Kubernetes preStop hook does, twice in a row: the answer comes
	// once the node holds nothing, and the node has left the ring.
	for _, leaving := range []string{"node-2", "node-3"} {
		require.NotEmpty(t, c.blobs(leaving))
		readsBefore := readers.reads.Load()
		ctx, cancel := callCtx()
		res, err := c.api.Deregister(ctx, leaving, true)
		cancel()
		require.NoError(t, err)
		require.True(t, res.Drain.Complete, "%s: %+v", leaving, res.Drain)
		require.Zero(t, res.Drain.FilesRemaining, leaving)
		require.Equal(t, client.NodeDeregistered, res.Node.Status)
		require.False(t, res.Node.OnRing)
		require.Empty(t, c.blobs(leaving), "%s still holds blobs after a complete drain", leaving)
		during := readers.reads.Load() - readsBefore
		require.NotZero(t, during, "no read ran during the drain of %s", leaving)
		t.Logf("%s drained with %d reads running meanwhile", leaving, during)
	}
	c.waitStatus(client.FileActive, ids(files)...)
	for _, id := range ids(files) {
		copies := activeCopies(c.metadata(id))
		require.NotContains(t, copies, "node-2")
		require.NotContains(t, copies, "node-3")
	}
	reads := readers.finish(t)
	require.NotZero(t, reads)
	t.Logf("%d reads across both drains, none failed", reads)
	require.Equal(t, client.NodeDeregistered, c.nodes()["node-2"].Status, "the node's heartbeat brought it back")
	for _, f := range files {
		c.mustRead(f)
	}
}
