package coordinator

import (
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

type rebalanceReport struct {
	Trigger            string   `json:"trigger"`
	FilesScanned       int      `json:"filesScanned"`
	FilesAffected      int      `json:"filesAffected"`
	CopiesCreated      int      `json:"copiesCreated"`
	CopiesRemoved      int      `json:"copiesRemoved"`
	PrimariesPromoted  int      `json:"primariesPromoted"`
	Failures           int      `json:"failures"`
	UnrecoverableFiles []string `json:"unrecoverableFiles"`
}

func (h *harness) rebalance() rebalanceReport {
	h.t.Helper()
	resp := h.post("/api/admin/rebalance", nil)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
	var r rebalanceReport
	resp.json(h.t, &r)
	return r
}

func TestNodeFailureDegradesThenRecoveryReadoptsWithoutCopying(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		var ids []string
		for i := range 6 {
			ids = append(ids, h.upload("f", payload(1000+i, byte(i))).FileID)
		}
		h.stopNode("node-2")
		h.sweep(1)
		require.True(t, h.app.members.Ring().Has("node-2"), "one missed probe changes nothing")
		h.sweep(1)
		require.False(t, h.app.members.Ring().Has("node-2"), "the failure threshold evicts")
		h.settle()
		for _, id := range ids {
			m := h.metadata(id)
			require.Equal(t, "DEGRADED", m.Status, id)
			require.Equal(t, []string{"node-2"}, m.copies("FAILED"))
			require.NotEqual(t, "node-2", m.PrimaryNode, "a healthy holder is promoted")
			// Reads survive the dead node.
			require.Equal(t, http.StatusOK, h.get("/api/files/"+id).StatusCode)
		}

		h.restartNode("node-2")
		h.sweep(2)
		require.True(t, h.app.members.Ring().Has("node-2"))
		h.settle()
		for _, id := range ids {
			m := h.metadata(id)
			require.Equal(t, "ACTIVE", m.Status, id)
			require.Len(t, m.copies("ACTIVE"), 3)
		}
		// Re-adoption moved no bytes: a second run finds nothing to do either.
		rep := h.rebalance()
		require.Zero(t, rep.CopiesCreated)
		require.Zero(t, rep.CopiesRemoved)
		require.Zero(t, rep.FilesAffected)
		require.True(t, hasLog(h, "rebalance completed"))
	})
}

func TestFailureWithASpareNodeRestoresReplication(t *testing.T) {
	h := newHarness(t, "sqlite", 4, nil)
	var ids []string
	for i := range 8 {
		ids = append(ids, h.upload("f", payload(500+i, byte(i))).FileID)
	}
	h.stopNode("node-1")
	h.sweep(2)
	h.settle()
	survivors := ring.New(100, "node-2", "node-3", "node-4")
	for _, id := range ids {
		m := h.metadata(id)
		require.Equal(t, "ACTIVE", m.Status, id)
		require.ElementsMatch(t, survivors.Preference(id, 3), m.copies("ACTIVE"))
		for _, n := range survivors.Preference(id, 3) {
			require.True(t, h.holds(n, id))
		}
	}
}

func TestDiskLossIsRebuilt(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	data := payload(3000, 2)
	res := h.upload("f", data)
	h.stopNode("node-3")
	require.NoError(t, os.RemoveAll(h.dirs["node-3"]))
	h.restartNode("node-3")
	rep := h.rebalance()
	require.Equal(t, 1, rep.CopiesCreated)
	b, err := os.ReadFile(h.blobPath("node-3", res.FileID))
	require.NoError(t, err)
	require.Equal(t, data, b)
}

func TestOneNodeClusterStillServes(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	old := h.upload("old", []byte("before"))
	h.stopNode("node-1")
	h.stopNode("node-2")
	h.sweep(2)
	h.settle()
	require.Equal(t, []string{"node-3"}, h.app.members.Ring().Nodes())
	resp := h.get("/api/files/" + old.FileID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "node-3", resp.Header.Get("X-Served-By-Node"))
	res := h.upload("new", []byte("after"))
	require.Equal(t, "DEGRADED", res.Status)
	require.Equal(t, "node-3", res.PrimaryNode)
	var health struct{ Status string }
	hr := h.get("/api/health")
	require.Equal(t, http.StatusOK, hr.StatusCode)
	hr.json(t, &health)
	require.Equal(t, "DEGRADED", health.Status)
}

func TestAllNodesDownIsHealthDown(t *testing.T) {
	h := newHarness(t, "sqlite", 2, nil)
	h.stopNode("node-1")
	h.stopNode("node-2")
	h.sweep(2)
	resp := h.get("/api/health")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "NO_HEALTHY_NODES", h.uploadRaw("f", []byte("x")).errorCode(t))
}

func TestJoinMovesExactlyTheFilesWhosePreferenceListChanged(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		var ids []string
		for i := range 30 {
			ids = append(ids, h.upload("f", payload(200+i, byte(i))).FileID)
		}
		before := ring.New(100, "node-1", "node-2", "node-3")
		after := before.With("node-4")
		var changed []string
		for _, id := range ids {
			if !slices.Equal(before.Preference(id, 3), after.Preference(id, 3)) {
				changed = append(changed, id)
			}
		}
		require.NotEmpty(t, changed)

		// The join's file set, derived from ring ranges, equals the brute-force diff.
		h.addNode("node-4")
		h.sweep(2)
		h.settle()
		affected, err := h.app.rebalancer.AffectedFiles(t.Context(), rebalance.Joined, "node-4")
		require.NoError(t, err)
		require.ElementsMatch(t, changed, affected)

		moved := 0
		for _, id := range ids {
			m := h.metadata(id)
			require.Equal(t, "ACTIVE", m.Status)
			require.ElementsMatch(t, after.Preference(id, 3), m.copies("ACTIVE"), id)
			require.ElementsMatch(t, after.Preference(id, 3), h.holders(id), "bytes on disk for %s", id)
			if h.holds("node-4", id) {
				moved++
			}
		}
		require.Equal(t, len(changed), moved, "every changed file has a copy on the newcomer, no other")
		require.True(t, hasLog(h, "trigger=JOINED"))
		// A second run is a no-op.
		rep := h.rebalance()
		require.Zero(t, rep.CopiesCreated+rep.CopiesRemoved+rep.FilesAffected)
	})
}

func TestDeregistrationDrainsThenRemovesCopies(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 4, map[string]string{"REBALANCE_ON_MEMBERSHIP_CHANGE": "false"})
		var ids []string
		for i := range 10 {
			ids = append(ids, h.upload("f", payload(300+i, byte(i))).FileID)
		}
		onNode := 0
		for _, id := range ids {
			if h.holds("node-2", id) {
				onNode++
			}
		}
		require.NotZero(t, onNode)

		resp := h.delete("/api/nodes/node-2?wait=true")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		var dr struct {
			Node struct {
				Status string `json:"status"`
				OnRing bool   `json:"onRing"`
			} `json:"node"`
			Drain struct {
				FilesRemaining int  `json:"filesRemaining"`
				Complete       bool `json:"complete"`
			} `json:"drain"`
		}
		resp.json(t, &dr)
		require.Equal(t, "DEREGISTERED", dr.Node.Status)
		require.False(t, dr.Node.OnRing)
		require.True(t, dr.Drain.Complete)
		require.Zero(t, dr.Drain.FilesRemaining)
		rg := ring.New(100, "node-1", "node-3", "node-4")
		for _, id := range ids {
			require.False(t, h.holds("node-2", id), "drained copy removed")
			require.ElementsMatch(t, rg.Preference(id, 3), h.holders(id))
			require.Equal(t, "ACTIVE", h.metadata(id).Status)
		}
		// Terminal: its own heartbeat and good probes do not bring it back.
		h.register("node-2")
		h.sweep(3)
		require.False(t, h.app.members.Ring().Has("node-2"))
		n, err := h.store().GetNode(t.Context(), "node-2")
		require.NoError(t, err)
		require.Equal(t, meta.NodeDeregistered, n.Status)
		// Rejoin re-admits it after the threshold.
		require.Equal(t, http.StatusOK, h.post("/api/nodes/node-2/rejoin", nil).StatusCode)
		h.sweep(2)
		require.True(t, h.app.members.Ring().Has("node-2"))
	})
}

func TestRestartRebuildsTheRingAndMovesNothing(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	res := h.upload("f", []byte("stay put"))
	before := h.app.members.Ring().Nodes()
	h.restartCoordinator()
	require.Equal(t, before, h.app.members.Ring().Nodes(), "ring rebuilt from the store before any probe")
	rep := h.rebalance()
	require.Zero(t, rep.CopiesCreated+rep.CopiesRemoved)
	require.Equal(t, http.StatusOK, h.get("/api/files/"+res.FileID).StatusCode)
}

func TestRingEndpointReportsMeasuredShares(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	var r struct {
		PhysicalNodes       int `json:"physicalNodes"`
		VirtualNodesPerNode int `json:"virtualNodesPerNode"`
		TotalRingPositions  int `json:"totalRingPositions"`
		Nodes               []struct {
			NodeID               string  `json:"nodeId"`
			KeyspaceSharePercent float64 `json:"keyspaceSharePercent"`
		} `json:"nodes"`
	}
	h.get("/api/nodes/ring").json(t, &r)
	require.Equal(t, 3, r.PhysicalNodes)
	require.Equal(t, 100, r.VirtualNodesPerNode)
	require.Equal(t, 300, r.TotalRingPositions)
	require.Equal(t, "node-3", r.Nodes[0].NodeID)
	require.Equal(t, 35.21, r.Nodes[0].KeyspaceSharePercent)
	require.Equal(t, 32.4, r.Nodes[1].KeyspaceSharePercent)
	require.Equal(t, 32.39, r.Nodes[2].KeyspaceSharePercent)
}

func TestNodeListShowsWhatEachNodeStores(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	res := h.upload("f", payload(1000, 1))
	h.stopNode("node-1")
	var nodes []struct {
		NodeID    string `json:"nodeId"`
		BlobCount *int64 `json:"blobCount"`
		BytesUsed *int64 `json:"bytesUsed"`
		FreeBytes *int64 `json:"freeBytes"`
	}
	h.get("/api/nodes").json(t, &nodes)
	require.Len(t, nodes, 3)
	for _, n := range nodes {
		if n.NodeID == "node-1" {
			require.Nil(t, n.BlobCount, "a node that does not answer is shown without figures")
			continue
		}
		require.NotNil(t, n.BlobCount, n.NodeID)
		require.Equal(t, int64(1), *n.BlobCount, "%s holds %s", n.NodeID, res.FileID)
		require.Equal(t, int64(1000), *n.BytesUsed)
		require.Positive(t, *n.FreeBytes)
	}
}
