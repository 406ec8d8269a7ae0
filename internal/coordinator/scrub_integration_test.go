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
