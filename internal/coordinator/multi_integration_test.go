package coordinator

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/testenv"
)

// twin starts a second coordinator on h's database and data directory
// layout, as another replica behind a load balancer would be.
func twin(t *testing.T, h *harness, env map[string]string) *harness {
	t.Helper()
	e := map[string]string{}
	for k, v := range h.env {
		e[k] = v
	}
	e["DATA_DIRECTORY"] = t.TempDir()
	for k, v := range env {
		e[k] = v
	}
	o := &harness{t: t, env: e, nodes: h.nodes, addrs: h.addrs, dirs: h.dirs, nodeEnv: h.nodeEnv, logs: &testenv.SyncBuffer{}}
	o.startCoordinator()
	t.Cleanup(func() { o.stop() })
	return o
}

func TestTwoCoordinatorsNeverDoubleCopy(t *testing.T) {
	for _, withRedis := range []bool{false, true} {
		name := "store leases"
		env := map[string]string{"REBALANCE_ON_MEMBERSHIP_CHANGE": "false"}
		if withRedis {
			name = "redis leases"
			env["REDIS_URL"] = redistest.Start(t).URL()
		}
		t.Run(name, func(t *testing.T) {
			a := newHarness(t, "postgres", 3, env)
			b := twin(t, a, nil)
			var ids []string
			for i := range 40 {
				ids = append(ids, a.upload("f", payload(100+i, byte(i))).FileID)
			}
			a.addNode("node-4")
			a.admit()
			require.NoError(t, b.app.members.Load(t.Context()))
			require.True(t, b.app.members.Ring().Has("node-4"))

			// Both coordinators rebalance at once.
			var wg sync.WaitGroup
			reports := make([]rebalanceReport, 2)
			for i, h := range []*harness{a, b} {
				wg.Go(func() { reports[i] = h.rebalance() })
			}
			wg.Wait()
			after := ring.New(100, "node-1", "node-2", "node-3", "node-4")
			want := 0
			for _, id := range ids {
				if contains(after.Preference(id, 3), "node-4") {
					want++
				}
			}
			created := reports[0].CopiesCreated + reports[1].CopiesCreated
			removed := reports[0].CopiesRemoved + reports[1].CopiesRemoved
			// Files skipped by the second run (their lease held) may be
			// reconciled by a third pass; what must never happen is a copy
			// made twice.
			third := a.rebalance()
			require.Equal(t, want, created+third.CopiesCreated, "each moved file copied exactly once")
			require.Equal(t, want, removed+third.CopiesRemoved)
			for _, id := range ids {
				require.ElementsMatch(t, after.Preference(id, 3), a.holders(id))
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestLeaseContentionSkipsInsteadOfRacing(t *testing.T) {
	h := newHarness(t, "postgres", 3, nil)
	other := lease.NewStoreLocker(h.store(), lease.Options{Owner: "another-coordinator"})
	l, ok, err := other.TryLock(t.Context(), "rebalance:MANUAL:", 20*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	var rep struct {
		Skipped bool `json:"skipped"`
	}
	h.post("/api/admin/rebalance", nil).json(t, &rep)
	require.True(t, rep.Skipped, "a rebalance someone else runs is skipped")
	require.NoError(t, l.Release(t.Context()))
	var again struct {
		Skipped bool `json:"skipped"`
	}
	h.post("/api/admin/rebalance", nil).json(t, &again)
	require.False(t, again.Skipped)
}

func TestRedisCacheServesReadsAndLosingRedisChangesNoOutcome(t *testing.T) {
	rs := redistest.Start(t)
	// The in-memory cache would answer before Redis: off, so Redis is what is tested.
	h := newHarness(t, "sqlite", 3, map[string]string{"REDIS_URL": rs.URL(), "CACHE_METADATA_TTL": "1m", "LOCAL_CACHE_ENTRIES": "0"})
	data := payload(1000, 1)
	res := h.upload("f", data)
	for range 3 {
		require.Equal(t, http.StatusOK, h.get("/api/files/"+res.FileID+"/metadata").StatusCode)
	}
	m := string(h.get("/metrics").body)
	require.Contains(t, m, "dfs_cache_hits_total 2", "the second and third reads came from Redis")
	var health struct {
		Redis struct{ Status string } `json:"redis"`
	}
	h.get("/api/health").json(t, &health)
	require.Equal(t, "UP", health.Redis.Status)

	rs.Kill()
	// Every operation still works without Redis.
	res2 := h.upload("g", data)
	require.Equal(t, "ACTIVE", res2.Status)
	require.Equal(t, data, h.get("/api/files/"+res2.FileID).body)
	require.Equal(t, data, h.get("/api/files/"+res.FileID).body)
	var hr struct {
		Status string
		Redis  struct{ Status string } `json:"redis"`
	}
	h.get("/api/health").json(t, &hr)
	require.Equal(t, "DEGRADED", hr.Status)
	require.Equal(t, "DOWN", hr.Redis.Status)
	require.Equal(t, http.StatusOK, h.get("/health/ready").StatusCode, "readiness never depends on Redis")
	// A delete does not wait for leases: with every holder up it completes.
	d := h.delete("/api/files/" + res2.FileID)
	require.Equal(t, http.StatusNoContent, d.StatusCode, string(d.body))
	// A manual rebalance waits out the leases' settling instead of skipping.
	var rep struct {
		Skipped bool `json:"skipped"`
	}
	h.post("/api/admin/rebalance", nil).json(t, &rep)
	require.False(t, rep.Skipped)
	d = h.delete("/api/files/" + res.FileID)
	require.Contains(t, []int{http.StatusNoContent, http.StatusAccepted}, d.StatusCode, string(d.body))
	h.stopNode("node-1")
	h.sweep(2)
	h.settle()
	require.False(t, h.app.members.Ring().Has("node-1"), "the detector works without Redis")

	rs.Restart()
	require.Eventually(t, func() bool {
		var again struct {
			Redis struct{ Status string } `json:"redis"`
		}
		h.get("/api/health").json(t, &again)
		return again.Redis.Status == "UP"
	}, 10*time.Second, 50*time.Millisecond)
	// Whatever the delete could not finish while leases were moving between
	// Redis and the store, or while node-1 was down, a repair pass finishes
	// once they are back.
	h.restartNode("node-1")
	require.Eventually(t, func() bool {
		err := h.repairPass(context.Background())
		require.NoError(t, err)
		_, err = h.store().GetFile(context.Background(), res.FileID)
		return err != nil
	}, 20*time.Second, 200*time.Millisecond, "the deleted file's row goes")
	require.Empty(t, h.holders(res.FileID))
}

func TestWaitingDrainOutlastsAFileHeldByAnotherRun(t *testing.T) {
	h := newHarness(t, "sqlite", 4, nil)
	var onNode []string
	for i := range 12 {
		res := h.upload("f", payload(100+i, byte(i)))
		if h.holds("node-2", res.FileID) {
			onNode = append(onNode, res.FileID)
		}
	}
	require.NotEmpty(t, onNode)
	// Another coordinator is reconciling one of node-2's files right now; its
	// lease lapses in a second (it is never renewed).
	other := lease.NewStoreLocker(h.store(), lease.Options{Owner: "another-coordinator", Grace: time.Second})
	_, ok, err := other.TryLock(t.Context(), "file:"+onNode[0], time.Second)
	require.NoError(t, err)
	require.True(t, ok)

	resp := h.delete("/api/nodes/node-2?wait=true")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	var dr struct {
		Drain struct {
			Complete       bool `json:"complete"`
			FilesRemaining int  `json:"filesRemaining"`
		} `json:"drain"`
	}
	resp.json(t, &dr)
	require.True(t, dr.Drain.Complete)
	require.Zero(t, dr.Drain.FilesRemaining)
	require.False(t, h.holds("node-2", onNode[0]), "the held file was drained once its lease lapsed")
}

func TestPendingUploadsDoNotHoldADrainUp(t *testing.T) {
	h := newHarness(t, "sqlite", 4, map[string]string{"REBALANCE_ON_MEMBERSHIP_CHANGE": "false"})
	h.upload("f", []byte("a real file"))
	// An upload whose coordinator died planned a copy on node-2; it stays
	// PENDING until PENDING_UPLOAD_TIMEOUT (15 minutes by default).
	id := "00000000-0000-4000-8000-00000000beef"
	rec := meta.FileRecord{File: meta.File{ID: id, Name: "x", ContentType: "application/octet-stream",
		SizeBytes: 1, Checksum: sha([]byte("x")), Status: meta.FilePending, ReplicationFactor: 3,
		RingPosition: ring.Position(id)},
		Replicas: []meta.Replica{{NodeID: "node-2", Status: meta.ReplicaPending}}}
	require.NoError(t, h.store().CreateFile(t.Context(), &rec))

	resp := h.delete("/api/nodes/node-2?wait=true")
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	var dr struct {
		Drain struct {
			Complete       bool `json:"complete"`
			FilesRemaining int  `json:"filesRemaining"`
			PendingUploads int  `json:"pendingUploads"`
		} `json:"drain"`
	}
	resp.json(t, &dr)
	require.True(t, dr.Drain.Complete)
	require.Zero(t, dr.Drain.FilesRemaining)
	require.Equal(t, 1, dr.Drain.PendingUploads)
}

func TestSkippedMembershipRebalanceIsRetried(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	res := h.upload("f", []byte("retry me"))
	// Someone holds the FAILED rebalance's lease for a second.
	other := lease.NewStoreLocker(h.store(), lease.Options{Owner: "another-coordinator", Grace: time.Second})
	_, ok, err := other.TryLock(t.Context(), "rebalance:FAILED:node-1", time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	h.stopNode("node-1")
	h.sweep(2)
	// No repair pass runs (REPAIR_INTERVAL is an hour): only the retry can
	// record node-1's copy as FAILED.
	require.Eventually(t, func() bool {
		return contains(h.metadata(res.FileID).copies("FAILED"), "node-1")
	}, 10*time.Second, 50*time.Millisecond)
	require.True(t, hasLog(h, "rebalance skipped"))
}

// With the embedded store and its in-memory cache, file records are not
// read through Redis: the in-memory cache keeps what it reads until the
// next write, and a Redis record may be one a killed predecessor left
// stale.
func TestEmbeddedStoreWithTheInMemoryCacheReadsNoRecordFromRedis(t *testing.T) {
	rs := redistest.Start(t)
	h := newHarness(t, "sqlite", 3, map[string]string{"REDIS_URL": rs.URL(), "CACHE_METADATA_TTL": "1m"})
	res := h.upload("f", payload(1000, 1))
	for range 3 {
		require.Equal(t, http.StatusOK, h.get("/api/files/"+res.FileID+"/metadata").StatusCode)
	}
	m := string(h.get("/metrics").body)
	require.Contains(t, m, "dfs_cache_hits_total 0")
	require.Contains(t, m, "dfs_cache_misses_total 0", "Redis was never asked for a record")
	require.NotContains(t, m, "dfs_local_cache_hits_total 0", "the in-memory cache answered")
}
