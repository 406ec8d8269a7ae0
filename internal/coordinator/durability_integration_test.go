package coordinator

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type durabilityResult struct {
	FilesByCopies     map[string]int `json:"filesByCopies"`
	Files             int            `json:"files"`
	BytesAtRisk       int64          `json:"bytesAtRisk"`
	FailureHeadroom   int            `json:"failureHeadroom"`
	ReplicationFactor int            `json:"replicationFactor"`
	HealthyNodes      int            `json:"healthyNodes"`
	Nodes             []struct {
		NodeID               string `json:"nodeId"`
		Status               string `json:"status"`
		FilesLeftWithOneCopy int    `json:"filesLeftWithOneCopy"`
		FilesLeftWithNoCopy  int    `json:"filesLeftWithNoCopy"`
	} `json:"nodes"`
}

func (h *harness) durability() durabilityResult {
	h.t.Helper()
	resp := h.get("/api/cluster/durability")
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
	var d durabilityResult
	resp.json(h.t, &d)
	return d
}

// TestDurabilityFollowsANodeFailure: with every node up each file has three
// healthy copies and the cluster survives two failures; once the detector
// evicts a stopped node its copies stop counting, every file is down to two,
// and each surviving node holds the last-but-one copy of every file.
func TestDurabilityFollowsANodeFailure(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		d := h.durability()
		require.Equal(t, map[string]int{"0": 0, "1": 0, "2": 0, "3": 0}, d.FilesByCopies)
		require.Equal(t, 2, d.FailureHeadroom, "no files: what a file written now would survive")

		var size int64
		for i := range 4 {
			size += h.upload("f", payload(1000+i, byte(i))).SizeBytes
		}
		d = h.durability()
		require.Equal(t, map[string]int{"0": 0, "1": 0, "2": 0, "3": 4}, d.FilesByCopies)
		require.Equal(t, 4, d.Files)
		require.Zero(t, d.BytesAtRisk)
		require.Equal(t, 2, d.FailureHeadroom)
		require.Equal(t, 3, d.HealthyNodes)
		require.Len(t, d.Nodes, 3)
		for _, n := range d.Nodes {
			require.Equal(t, "HEALTHY", n.Status)
			require.Zero(t, n.FilesLeftWithOneCopy, n.NodeID)
			require.Zero(t, n.FilesLeftWithNoCopy, n.NodeID)
		}

		h.stopNode("node-2")
		h.sweep(2)
		require.False(t, h.app.members.Ring().Has("node-2"))
		h.settle()
		d = h.durability()
		require.Equal(t, map[string]int{"0": 0, "1": 0, "2": 4, "3": 0}, d.FilesByCopies)
		require.Equal(t, size, d.BytesAtRisk)
		require.Equal(t, 1, d.FailureHeadroom)
		require.Equal(t, 2, d.HealthyNodes)
		got := map[string][3]any{}
		for _, n := range d.Nodes {
			got[n.NodeID] = [3]any{n.Status, n.FilesLeftWithOneCopy, n.FilesLeftWithNoCopy}
		}
		require.Equal(t, map[string][3]any{
			"node-1": {"HEALTHY", 4, 0},
			"node-2": {"UNHEALTHY", 0, 0},
			"node-3": {"HEALTHY", 4, 0},
		}, got)

		metrics := string(h.get("/metrics").body)
		for _, line := range []string{
			`dfs_durability_files{copies="2"} 4`,
			`dfs_durability_files{copies="3+"} 0`,
			`dfs_durability_failure_headroom 1`,
			`dfs_durability_node_files_left{copies="1",node="node-1"} 4`,
			`dfs_durability_node_files_left{copies="1",node="node-3"} 4`,
			`dfs_durability_bytes_at_risk 4006`, // 1000+1001+1002+1003
		} {
			require.True(t, strings.Contains(metrics, line+"\n"), "/metrics lacks %s", line)
		}
		require.False(t, strings.Contains(metrics, `node="node-2"`), "a node that is down has no per-node series")
	})
}
