package coordinator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// reportCorrupt posts a node's report of a corrupt copy, with token as its
// bearer token ("" sends none).
func (h *harness) reportCorrupt(node, token string, rep wire.CorruptReport) response {
	h.t.Helper()
	body, err := json.Marshal(rep)
	require.NoError(h.t, err)
	req, err := http.NewRequest(http.MethodPost, h.url+wire.CorruptPath(node), bytes.NewReader(body))
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return h.do(req)
}

// TestReportedCorruptCopyIsCheckedQuarantinedAndRebuilt: the coordinator
// re-hashes a copy a node reports corrupt; an intact copy is left alone, a
// corrupt one is quarantined and rebuilt from a good copy, as after a failed
// verify.
func TestReportedCorruptCopyIsCheckedQuarantinedAndRebuilt(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, map[string]string{"CLUSTER_TOKEN": "tok"})
		data := bytes.Repeat([]byte("scrub me "), 4000)
		res := h.upload("a.bin", data)
		bad := res.Replicas[0]

		resp := h.reportCorrupt(bad, "", wire.CorruptReport{BlobID: res.FileID})
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a report needs the cluster token")
		resp = h.reportCorrupt(bad, "tok", wire.CorruptReport{})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		require.Equal(t, "INVALID_REQUEST", resp.errorCode(t))
		resp = h.reportCorrupt("node-9", "tok", wire.CorruptReport{BlobID: res.FileID})
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		require.Equal(t, "NODE_NOT_FOUND", resp.errorCode(t))

		var out files.CorruptReportResult
		resp = h.reportCorrupt("node-1", "tok", wire.CorruptReport{BlobID: "0f1e2d3c-4b5a-4968-8776-655443322110"})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		resp.json(t, &out)
		require.Equal(t, files.ReportUnknownFile, out.Result)

		// A report the node's copy does not bear out changes nothing.
		resp = h.reportCorrupt(bad, "tok", wire.CorruptReport{BlobID: res.FileID})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		resp.json(t, &out)
		require.Equal(t, files.CorruptReportResult{FileID: res.FileID, NodeID: bad, Result: "OK"}, out)
		require.Len(t, h.metadata(res.FileID).copies("ACTIVE"), 3)

		h.corrupt(bad, res.FileID)
		resp = h.reportCorrupt(bad, "tok", wire.CorruptReport{BlobID: res.FileID, Reason: "test"})
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		resp.json(t, &out)
		require.Equal(t, files.CorruptReportResult{FileID: res.FileID, NodeID: bad, Result: "CORRUPT", Quarantined: true}, out)
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(h.blobPath(bad, res.FileID))
			m := h.metadata(res.FileID)
			return err == nil && bytes.Equal(b, data) && m.Status == "ACTIVE" && len(m.copies("ACTIVE")) == 3
		}, 20*time.Second, 50*time.Millisecond, "the quarantined copy rebuilt")
	})
}

// TestClusterScrubGathersEveryNode: GET /api/cluster/scrub lists each node's
// scrubber, and one that does not answer as unreachable.
func TestClusterScrubGathersEveryNode(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"CLUSTER_TOKEN": "tok"})
	h.upload("a.bin", []byte("some bytes"))
	h.stopNode("node-3")

	var rep api.ScrubReport
	require.Eventually(t, func() bool {
		resp := h.get("/api/cluster/scrub")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		resp.json(t, &rep)
		require.Len(t, rep.Nodes, 3)
		return rep.Nodes[0].PeriodStart != nil && rep.Nodes[1].PeriodStart != nil
	}, 10*time.Second, 20*time.Millisecond, "the scrubbers starting")
	for _, n := range rep.Nodes[:2] {
		require.True(t, n.Reachable, "%+v", n)
		require.NotNil(t, n.PeriodStart)
		require.Equal(t, (7 * 24 * time.Hour).Seconds(), n.PeriodSeconds)
		require.Equal(t, int64(1), n.CopiesTotal)
		require.Equal(t, int64(len("some bytes")), n.BytesTotal)
	}
	down := rep.Nodes[2]
	require.Equal(t, "node-3", down.NodeID)
	require.False(t, down.Reachable)
	require.NotEmpty(t, down.Error)
	require.Nil(t, down.PeriodStart)
}

// TestScrubPassesAreListedAmongTheOperations: on real nodes with a short
// SCRUB_PERIOD, GET /api/cluster/operations lists each node's running pass
// and its last complete one, with what it hashed and the corrupt copies it
// found; a node that stops answering lists none.
func TestScrubPassesAreListedAmongTheOperations(t *testing.T) {
	h := newHarness(t, "sqlite", 0, map[string]string{"CLUSTER_TOKEN": "tok"})
	h.nodeEnv["SCRUB_PERIOD"] = "3s"
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		h.addNode(id)
	}
	h.admit()
	a := h.upload("a.bin", bytes.Repeat([]byte("a"), 3000))
	h.upload("b.bin", bytes.Repeat([]byte("b"), 5000))
	h.corrupt("node-1", a.FileID)

	type op struct {
		ops.Operation
		Report api.ScrubPassReport `json:"report"`
	}
	list := func() (running, recent []op) {
		var snap struct{ Running, Recent []op }
		resp := h.get("/api/cluster/operations")
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		resp.json(t, &snap)
		for _, o := range snap.Running {
			if o.Kind == ops.Scrub {
				running = append(running, o)
			}
		}
		for _, o := range snap.Recent {
			if o.Kind == ops.Scrub {
				recent = append(recent, o)
			}
		}
		return running, recent
	}
	sawRunning := map[string]bool{}
	passed := map[string]op{}
	require.Eventually(t, func() bool {
		running, recent := list()
		for _, o := range running {
			require.Equal(t, ops.Running, o.State)
			require.Equal(t, api.ScrubTrigger, o.Trigger)
			require.Nil(t, o.FinishedAt)
			sawRunning[o.NodeID] = true
		}
		for _, o := range recent {
			// A pass over both files, not one that began before the upload;
			// on node-1 the one that met the damaged copy (those after it
			// meet its rebuilt copy).
			if o.Done == 2 && (o.NodeID != "node-1" || o.Report.CorruptionsFound > 0) {
				passed[o.NodeID] = o
			}
		}
		return len(sawRunning) == 3 && len(passed) == 3
	}, 30*time.Second, 20*time.Millisecond, "every node's pass seen running and finished: running %v, finished %v", sawRunning, passed)
	for id, o := range passed {
		require.Equal(t, ops.Done, o.State, id)
		require.EqualValues(t, 2, o.Total, id)
		require.EqualValues(t, 8000, o.BytesDone, id)
		require.NotNil(t, o.FinishedAt, id)
		require.False(t, o.FinishedAt.Before(o.StartedAt), id)
		want := int64(0)
		if id == "node-1" {
			want = 1
		}
		require.Equal(t, want, o.Report.CorruptionsFound, "%s: the copy damaged on node-1 only", id)
	}

	h.stopNode("node-3")
	running, recent := list()
	for _, o := range append(running, recent...) {
		require.NotEqual(t, "node-3", o.NodeID, "a node that does not answer lists no pass")
	}
}
