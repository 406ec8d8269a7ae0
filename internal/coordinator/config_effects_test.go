package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Each test here shows the effect of one configuration variable that the
// other integration tests do not already exercise.

func TestServerPortAndHostAndDataDirectory(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	dir := t.TempDir()
	cfg, err := LoadConfig(envconf.FromMap(map[string]string{
		"SERVER_HOST": "127.0.0.1", "SERVER_PORT": fmt.Sprint(port), "DATA_DIRECTORY": dir,
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	app, err := New(ctx, cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health/ready", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.FileExists(t, filepath.Join(dir, "metadata.db"), "the embedded store lives in DATA_DIRECTORY")
	require.DirExists(t, filepath.Join(dir, "spool"), "so does the upload spool")
}

func TestPprofAddrOpensProfilesOnTheirOwnListener(t *testing.T) {
	api, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	pprofAddr := probe.Addr().String()
	require.NoError(t, probe.Close())
	cfg, err := LoadConfig(envconf.FromMap(map[string]string{"DATA_DIRECTORY": t.TempDir(), "PPROF_ADDR": pprofAddr}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	app, err := New(ctx, cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, api) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	resp, err := http.Get("http://" + api.Addr().String() + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "profiles are never served on the API port")
	cancel()
	require.NoError(t, <-done)
	require.Eventually(t, func() bool {
		_, err := http.Get("http://" + pprofAddr + "/debug/pprof/")
		return err != nil
	}, 5*time.Second, 10*time.Millisecond, "the profiling listener closes with the coordinator")
}

func TestReplicationFactorAndVirtualNodes(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"REPLICATION_FACTOR": "2", "VIRTUAL_NODES": "10"})
	res := h.upload("f", []byte("two copies"))
	require.Equal(t, "ACTIVE", res.Status)
	require.Equal(t, 2, res.ReplicationFactor)
	require.Len(t, h.holders(res.FileID), 2)
	require.ElementsMatch(t, ring.New(10, "node-1", "node-2", "node-3").Preference(res.FileID, 2), h.holders(res.FileID))
	var r struct {
		VirtualNodesPerNode int `json:"virtualNodesPerNode"`
		TotalRingPositions  int `json:"totalRingPositions"`
	}
	h.get("/api/nodes/ring").json(t, &r)
	require.Equal(t, 10, r.VirtualNodesPerNode)
	require.Equal(t, 30, r.TotalRingPositions)
}

func TestHealthThresholds(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"HEALTH_FAILURE_THRESHOLD": "3", "HEALTH_SUCCESS_THRESHOLD": "3"})
	h.stopNode("node-1")
	h.sweep(2)
	require.True(t, h.app.members.Ring().Has("node-1"), "two failures are below the threshold of 3")
	h.sweep(1)
	require.False(t, h.app.members.Ring().Has("node-1"))
	h.restartNode("node-1")
	h.sweep(2)
	require.False(t, h.app.members.Ring().Has("node-1"), "two successes are below the threshold of 3")
	h.sweep(1)
	require.True(t, h.app.members.Ring().Has("node-1"))
}

func TestHealthCheckIntervalDrivesTheDetector(t *testing.T) {
	h := newHarness(t, "sqlite", 0, map[string]string{"HEALTH_CHECK_INTERVAL": "100ms"})
	h.addNode("node-1")
	// No manual sweep: the detector's own timer admits the node.
	require.Eventually(t, func() bool { return h.app.members.Ring().Has("node-1") }, 10*time.Second, 20*time.Millisecond)
	h.stopNode("node-1")
	require.Eventually(t, func() bool { return !h.app.members.Ring().Has("node-1") }, 10*time.Second, 20*time.Millisecond)
}

func TestRebalanceOnMembershipChangeOff(t *testing.T) {
	h := newHarness(t, "sqlite", 4, map[string]string{"REBALANCE_ON_MEMBERSHIP_CHANGE": "false"})
	var ids []string
	for i := range 6 {
		ids = append(ids, h.upload("f", []byte{byte(i)}).FileID)
	}
	h.stopNode("node-1")
	h.sweep(2)
	h.settle()
	onNode1 := 0
	for _, id := range ids {
		m := h.metadata(id)
		require.Empty(t, m.copies("FAILED"), "nothing reconciled on its own")
		require.Len(t, m.copies("ACTIVE"), 3, "no file touched while automatic rebalancing is off")
		if h.holds("node-1", id) {
			onNode1++
		}
	}
	require.Positive(t, onNode1)
	rep := h.rebalance()
	require.Equal(t, onNode1, rep.FilesAffected, "the admin endpoint still rebalances the failed node's files")
	for _, id := range ids {
		m := h.metadata(id)
		require.Equal(t, "ACTIVE", m.Status)
		require.NotContains(t, m.copies("ACTIVE"), "node-1")
	}
}

func TestRepairIntervalFinishesWorkOnItsOwn(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"REPAIR_INTERVAL": "100ms"})
	res := h.upload("f", []byte("delete me later"))
	h.stopNode("node-3")
	require.Equal(t, http.StatusAccepted, h.delete("/api/files/"+res.FileID).StatusCode)
	h.restartNode("node-3")
	require.Eventually(t, func() bool { return len(h.holders(res.FileID)) == 0 }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := h.store().GetFile(context.Background(), res.FileID)
		return err != nil
	}, 10*time.Second, 20*time.Millisecond)
}

// A small upload that finishes within PENDING_RECORD_DELAY writes its row
// once (version 1); with the delay 0 it is recorded PENDING first and then
// updated (version 2).
func TestPendingRecordDelayDecidesWhenAnUploadIsFirstRecorded(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		version int64
	}{
		{nil, 1},
		{map[string]string{"PENDING_RECORD_DELAY": "0s"}, 2},
	} {
		h := newHarness(t, "sqlite", 3, tc.env)
		res := h.upload("f", []byte("a small file"))
		rec, err := h.store().GetFile(context.Background(), res.FileID)
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, rec.Status)
		require.Equal(t, tc.version, rec.Version, "%v", tc.env)
	}
}

func TestPendingUploadTimeoutSettlesAbandonedUploads(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"PENDING_UPLOAD_TIMEOUT": "1s"})
	ctx := context.Background()
	// What a coordinator that died mid-upload leaves: PENDING rows with
	// planned copies, one of whose bytes landed on node-2.
	landed := h.upload("template", []byte("landed bytes"))
	require.Equal(t, http.StatusNoContent, h.delete("/api/files/"+landed.FileID).StatusCode)
	mk := func(data []byte) meta.FileRecord {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", len(data))
		rec := meta.FileRecord{File: meta.File{ID: id, Name: "x", ContentType: "application/octet-stream",
			SizeBytes: int64(len(data)), Checksum: sha(data), Status: meta.FilePending, ReplicationFactor: 3,
			RingPosition: ring.Position(id)}}
		for _, n := range []string{"node-1", "node-2", "node-3"} {
			rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: meta.ReplicaPending})
		}
		require.NoError(t, h.store().CreateFile(ctx, &rec))
		return rec
	}
	adopted := mk([]byte("adopt these bytes"))
	base, _ := h.app.members.BaseURL("node-2")
	_, _, err := nodeclient.New(nodeclient.Options{}).Put(ctx, base, adopted.ID, adopted.Checksum, adopted.SizeBytes, strings.NewReader("adopt these bytes"))
	require.NoError(t, err)
	discarded := mk([]byte("never landed"))

	// Younger than the timeout: a live upload, left alone.
	err = h.repairPass(ctx)
	require.NoError(t, err)
	rec, err := h.store().GetFile(ctx, adopted.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FilePending, rec.Status)

	time.Sleep(1100 * time.Millisecond)
	err = h.repairPass(ctx)
	require.NoError(t, err)
	rec, err = h.store().GetFile(ctx, adopted.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, rec.Status, "adopted and completed to full replication")
	require.ElementsMatch(t, []string{"node-1", "node-2", "node-3"}, h.holders(adopted.ID))
	_, err = h.store().GetFile(ctx, discarded.ID)
	require.Error(t, err, "no copy anywhere: the row is discarded")
	require.Empty(t, h.holders(discarded.ID))
}

func TestDrainTimeoutBoundsAWaitingDeregistration(t *testing.T) {
	h := newHarness(t, "sqlite", 4, map[string]string{"DRAIN_TIMEOUT": "1ns", "REBALANCE_ON_MEMBERSHIP_CHANGE": "false"})
	for i := range 10 {
		h.upload("f", []byte{byte(i)})
	}
	resp := h.delete("/api/nodes/node-1?wait=true")
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(resp.body))
	var dr struct {
		Drain struct {
			Complete       bool `json:"complete"`
			FilesRemaining int  `json:"filesRemaining"`
		} `json:"drain"`
	}
	resp.json(t, &dr)
	require.False(t, dr.Drain.Complete)
	require.Positive(t, dr.Drain.FilesRemaining)
}

func TestClusterTokenIsSentToNodes(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"CLUSTER_TOKEN": "s3cret"})
	res := h.upload("f", []byte("authorised"))
	require.Equal(t, "ACTIVE", res.Status, "nodes that require the token accepted the coordinator's writes")

	// A coordinator without the token is refused by such nodes.
	other := newHarness(t, "sqlite", 0, nil)
	other.nodeEnv["CLUSTER_TOKEN"] = "s3cret"
	other.addNode("node-1")
	other.admit()
	require.True(t, other.app.members.Ring().Has("node-1"), "health probes need no token")
	resp := other.uploadRaw("f", []byte("x"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, string(resp.body), "401")
}

func TestMetricsFollowRealTraffic(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	data := payload(2048, 1)
	res := h.upload("f", data)
	require.Equal(t, http.StatusOK, h.get("/api/files/"+res.FileID).StatusCode)
	require.Equal(t, http.StatusOK, h.post("/api/files/"+res.FileID+"/verify", nil).StatusCode)
	require.Equal(t, http.StatusNoContent, h.delete("/api/files/"+res.FileID).StatusCode)
	h.rebalance()
	body := string(h.get("/metrics").body)
	for _, want := range []string{
		`dfs_uploads_total{status="ACTIVE"} 1`,
		`dfs_upload_bytes_total 2048`,
		fmt.Sprintf(`dfs_downloads_total{node=%q} 1`, res.PrimaryNode),
		`dfs_download_bytes_total 2048`,
		`dfs_deletes_total{outcome="complete"} 1`,
		`dfs_verifies_total{result="ok"} 1`,
		`dfs_ring_nodes 3`,
		`dfs_node_joins_total 3`,
		`dfs_rebalance_runs_total{trigger="MANUAL"} 1`,
		`dfs_http_requests_total{method="POST",route="/api/files",status="201"} 1`,
		`dfs_files{status="ACTIVE"} 0`,
	} {
		require.Contains(t, body, want)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	require.NoError(t, err)
	require.Empty(t, problems, "the exposition after real traffic passes the Prometheus linter")
}

func TestSpoolMemoryMaxDecidesWhereUploadsWait(t *testing.T) {
	for _, tc := range []struct {
		env            map[string]string
		memory, onDisk int
	}{
		{nil, 2, 1}, // the defaults: 256 KiB and less in memory
		{map[string]string{"SPOOL_MEMORY_MAX": "0"}, 0, 3},
		{map[string]string{"SPOOL_MEMORY_MAX": "100KiB"}, 1, 2},
	} {
		h := newHarness(t, "sqlite", 3, tc.env)
		for _, size := range []int{1 << 10, 200 << 10, 300 << 10} {
			data := payload(size, byte(size))
			res := h.upload("f", data)
			got := h.get("/api/files/" + res.FileID)
			require.Equal(t, data, got.body, "the bytes are the same wherever they waited")
		}
		body := string(h.get("/metrics").body)
		require.Contains(t, body, fmt.Sprintf(`dfs_upload_spool_total{where="memory"} %d`, tc.memory), "%v", tc.env)
		require.Contains(t, body, fmt.Sprintf(`dfs_upload_spool_total{where="disk"} %d`, tc.onDisk), "%v", tc.env)
	}
}

// metric is the value of an unlabelled series on /metrics, or "absent".
func (h *harness) metric(name string) string {
	for line := range strings.SplitSeq(string(h.get("/metrics").body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "absent"
}

// SQLITE_CHECKPOINT_PAGES bounds the embedded store's WAL: at 100 pages it
// is checkpointed and started over many times while 60 uploads commit; at
// the default it holds all of them.
func TestSQLiteCheckpointPagesBoundsTheWAL(t *testing.T) {
	wal := func(h *harness) int64 {
		for i := range 60 {
			require.Equal(t, "ACTIVE", h.upload(fmt.Sprintf("f%d", i), []byte("walled")).Status)
		}
		fi, err := os.Stat(filepath.Join(h.env["DATA_DIRECTORY"], "metadata.db-wal"))
		require.NoError(t, err)
		return fi.Size()
	}
	const frame = 4096 + 24
	small := wal(newHarness(t, "sqlite", 3, map[string]string{"SQLITE_CHECKPOINT_PAGES": "100"}))
	large := wal(newHarness(t, "sqlite", 3, nil))
	t.Logf("WAL after 60 uploads: %d bytes at 100 pages, %d at the default", small, large)
	require.Less(t, small, int64(150*frame))
	require.Greater(t, large, int64(300*frame))
}

func TestLocalCacheEntriesAnswersRepeatedLookupsFromMemory(t *testing.T) {
	readTwice := func(h *harness) {
		res := h.upload("f", []byte("cached"))
		for range 2 {
			require.Equal(t, "cached", string(h.get("/api/files/"+res.FileID).body))
		}
	}
	on := newHarness(t, "sqlite", 3, nil)
	readTwice(on)
	require.NotEqual(t, "0", on.metric("dfs_local_cache_hits_total"), "the second read came from memory")

	off := newHarness(t, "sqlite", 3, map[string]string{"LOCAL_CACHE_ENTRIES": "0"})
	readTwice(off)
	require.Equal(t, "0", off.metric("dfs_local_cache_hits_total"))
	require.Equal(t, "0", off.metric("dfs_local_cache_misses_total"), "no lookup passes a cache that is off")

	pg := newHarness(t, "postgres", 3, nil)
	readTwice(pg)
	require.Equal(t, "0", pg.metric("dfs_local_cache_misses_total"), "PostgreSQL, shared by coordinators, is never cached locally")
}

func TestContentCacheAnswersRepeatedDownloadsWithoutNodes(t *testing.T) {
	// Off by default: every download names the node that sent it.
	off := newHarness(t, "sqlite", 3, nil)
	res := off.upload("f", []byte("small"))
	for range 2 {
		r := off.get("/api/files/" + res.FileID)
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.NotEmpty(t, r.Header.Get("X-Served-By-Node"))
		require.Empty(t, r.Header.Get("X-Served-From"))
	}
	require.Equal(t, "0", off.metric("dfs_content_cache_hits_total"))

	// On, with PostgreSQL too: entries are keyed by the file's checksum, so
	// a shared database is no reason to refuse them.
	for _, kind := range []string{"sqlite", "postgres"} {
		h := newHarness(t, kind, 3, map[string]string{"CONTENT_CACHE_SIZE": "1MiB", "CONTENT_CACHE_MAX_FILE": "1KiB"})
		small := h.upload("small", []byte("hot and small"))
		large := h.upload("large", bytes.Repeat([]byte("L"), 2048))
		first := h.get("/api/files/" + large.FileID)
		require.Equal(t, 2048, len(first.body))
		require.NotEmpty(t, first.Header.Get("X-Served-By-Node"), "over the per-file limit: from a node")

		// Every node stopped: the small file is still served, from memory.
		for id := range h.nodes {
			h.stopNode(id)
		}
		again := h.get("/api/files/" + small.FileID)
		require.Equal(t, http.StatusOK, again.StatusCode, kind)
		require.Equal(t, "hot and small", string(again.body))
		require.Equal(t, "content-cache", again.Header.Get("X-Served-From"))
		require.Empty(t, again.Header.Get("X-Served-By-Node"), "no node sent these bytes")
		part := h.get("/api/files/"+small.FileID, "Range", "bytes=4-6")
		require.Equal(t, http.StatusPartialContent, part.StatusCode)
		require.Equal(t, "and", string(part.body))

		// Over CONTENT_CACHE_MAX_FILE: never kept, so it needs a node.
		require.Equal(t, http.StatusServiceUnavailable, h.get("/api/files/"+large.FileID).StatusCode, kind)
		// The upload put the small file there; no read of it missed.
		require.Equal(t, "2", h.metric("dfs_content_cache_hits_total"), kind)
		require.Equal(t, "0", h.metric("dfs_content_cache_misses_total"), kind)
		require.Equal(t, "1", h.metric("dfs_content_cache_entries"), kind)
		require.Contains(t, string(h.get("/metrics").body), `dfs_downloads_total{node="(content-cache)"} 2`)
	}
}

func TestRebalanceParallelismReachesTheRebalancer(t *testing.T) {
	// The bound itself is tested in internal/rebalance
	// (TestParallelismBoundsFilesReconciledAtOnce); here, that the variable
	// is the one the coordinator's rebalancer uses.
	for env, want := range map[string]int{"": 32, "3": 3} {
		vars := map[string]string{}
		if env != "" {
			vars["REBALANCE_PARALLELISM"] = env
		}
		h := newHarness(t, "sqlite", 0, vars)
		require.Equal(t, want, h.app.rebalancer.Parallelism())
	}
}

// A copy lost behind the coordinator's back (no event: the node never went
// down) is rebuilt by the anti-entropy sweep alone.
func TestAntiEntropyIntervalRebuildsWhatNoEventReported(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"ANTI_ENTROPY_INTERVAL": "200ms"})
	res := h.upload("f", []byte("lost behind our back"))
	require.Len(t, h.holders(res.FileID), 3)
	p := h.blobPath("node-2", res.FileID)
	require.NoError(t, os.Remove(p))
	require.NoError(t, os.Remove(p+".sha256"))
	require.Eventually(t, func() bool { return h.holds("node-2", res.FileID) }, 20*time.Second, 20*time.Millisecond,
		"the sweep rebuilds the missing copy")
	require.Eventually(t, func() bool { return hasLog(h, "anti-entropy put a file right") }, 10*time.Second, 20*time.Millisecond)
	m := h.metadata(res.FileID)
	require.Equal(t, "ACTIVE", m.Status)
	require.Len(t, m.copies("ACTIVE"), 3)
}

// A blob no file owns is removed once it has been seen so for
// ANTI_ENTROPY_ORPHAN_GRACE, and not before.
func TestAntiEntropyOrphanGrace(t *testing.T) {
	ctx := context.Background()
	plant := func(h *harness) string {
		id := uuid.NewString()
		base, _ := h.app.members.BaseURL("node-1")
		_, _, err := nodeclient.New(nodeclient.Options{}).Put(ctx, base, id, sha([]byte("stray")), 5, strings.NewReader("stray"))
		require.NoError(t, err)
		return id
	}
	passes := func(h *harness) time.Time {
		st, err := h.app.sweeper.LoadState(ctx)
		require.NoError(t, err)
		return st.LastFullPassAt
	}

	long := newHarness(t, "sqlite", 3, map[string]string{"ANTI_ENTROPY_INTERVAL": "100ms", "PENDING_UPLOAD_TIMEOUT": "1s", "ANTI_ENTROPY_ORPHAN_GRACE": "1h"})
	kept := plant(long)
	// Three full passes after the plant, each of which saw the stray blob.
	for range 3 {
		before := passes(long)
		require.Eventually(t, func() bool { return passes(long).After(before) }, 20*time.Second, 20*time.Millisecond)
	}
	require.True(t, long.holds("node-1", kept), "within the grace period an unowned blob is left alone")

	short := newHarness(t, "sqlite", 3, map[string]string{"ANTI_ENTROPY_INTERVAL": "100ms", "PENDING_UPLOAD_TIMEOUT": "1s", "ANTI_ENTROPY_ORPHAN_GRACE": "1s"})
	gone := plant(short)
	require.Eventually(t, func() bool { return !short.holds("node-1", gone) }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return hasLog(short, "removed an orphan blob") }, 10*time.Second, 20*time.Millisecond)
}

// ANTI_ENTROPY_RATE paces a pass page by page: at one file a second, a pass
// over a few files stops between pages and keeps its cursor, which a pass at
// the default rate, one page for so few files, never does.
func TestAntiEntropyRatePacesThePass(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "sqlite", 3, map[string]string{"ANTI_ENTROPY_INTERVAL": "100ms", "ANTI_ENTROPY_RATE": "1"})
	for i := range 4 {
		h.upload("f", []byte{byte(i)})
	}
	require.Eventually(t, func() bool {
		st, err := h.app.sweeper.LoadState(ctx)
		return err == nil && st.Cursor != ""
	}, 20*time.Second, 20*time.Millisecond, "the pass records its place between pages")
}

// Small copies reach the nodes in batch requests by default; NODE_BATCH_MAX=1
// sends each in a PUT of its own. (NODE_BATCH_INFLIGHT's effect, the
// gathering of the copies that wait, is shown in package nodeclient.)
func TestNodeBatchMaxDecidesHowSmallCopiesTravel(t *testing.T) {
	requests := func(n *nodetest.Node, route, method string) float64 {
		mfs, err := n.Registry.Gather()
		require.NoError(t, err)
		total := 0.0
		for _, mf := range mfs {
			if mf.GetName() != "dfs_node_http_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["route"] == route && labels["method"] == method {
					total += m.GetCounter().GetValue()
				}
			}
		}
		return total
	}
	for _, tc := range []struct {
		env                   map[string]string
		wantBatches, wantPuts float64
	}{
		{nil, 1, 0},
		{map[string]string{"NODE_BATCH_MAX": "1"}, 0, 1},
	} {
		h := newHarness(t, "sqlite", 3, tc.env)
		res := h.upload("f", []byte("a small file"))
		require.Equal(t, "ACTIVE", res.Status)
		for id, n := range h.nodes {
			require.Equal(t, tc.wantBatches, requests(n, wire.PathBlobBatch, http.MethodPost), "%s %v", id, tc.env)
			require.Equal(t, tc.wantPuts, requests(n, wire.PathBlobs+"/{id}", http.MethodPut), "%s %v", id, tc.env)
		}
		require.Equal(t, []byte("a small file"), h.get("/api/files/"+res.FileID).body)
	}
}
