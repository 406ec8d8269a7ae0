package coordinator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
)

// TestDurabilityCountsZones: files written on a zoneless ring of four nodes
// land on any three of them. Once node-1 and node-2 are put in one zone
// behind the placement's back (the store only, so nothing moves), the
// files with copies on both are counted as collapsed, zone a's loss would
// leave them one copy, the zone headroom drops to one, and the cluster
// health and the gauges say so.
func TestDurabilityCountsZones(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 4, nil)
		d := h.durabilityReport()
		require.Equal(t, 2, d.ZoneFailureHeadroom, "no files: what a file written now would survive")
		require.Len(t, d.Zones, 4, "every zoneless node is a zone of its own")

		var both int
		for i := range 24 {
			res := h.upload(fmt.Sprintf("f%d", i), payload(500+i, byte(i)))
			copies := append([]string{res.PrimaryNode}, res.Replicas...)
			require.Len(t, copies, 3)
			if slices.Contains(copies, "node-1") && slices.Contains(copies, "node-2") {
				both++
			}
		}
		require.NotZero(t, both, "no file has copies on both node-1 and node-2; the test needs some")
		require.Less(t, both, 24, "every file has copies on node-1 and node-2; the test needs some without")

		d = h.durabilityReport()
		require.Zero(t, d.FilesZoneCollapsed)
		require.Equal(t, 2, d.ZoneFailureHeadroom)

		ctx := context.Background()
		for id, zone := range map[string]string{"node-1": "a", "node-2": "a", "node-3": "b", "node-4": "c"} {
			n, err := h.store().GetNode(ctx, id)
			require.NoError(t, err)
			n.ZoneOverride = &zone
			require.NoError(t, h.store().UpdateNode(ctx, &n))
		}

		d = h.durabilityReport()
		require.Equal(t, both, d.FilesZoneCollapsed)
		require.Equal(t, 1, d.ZoneFailureHeadroom, "a collapsed file spans two zones")
		require.Equal(t, []api.ZoneRisk{
			{Zone: "a", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: both},
			{Zone: "b", Nodes: []string{"node-3"}},
			{Zone: "c", Nodes: []string{"node-4"}},
		}, d.Zones)

		health := h.get("/api/health")
		require.Equal(t, http.StatusOK, health.StatusCode, string(health.body))
		var rep api.HealthReport
		health.json(t, &rep)
		require.Equal(t, api.HealthDegraded, rep.Status, "reasons %v", rep.Reasons)
		require.Contains(t, rep.Reasons,
			fmt.Sprintf("%d file(s) keep two copies in one zone while another zone has a healthy node", both))

		metrics := string(h.get("/metrics").body)
		for _, line := range []string{
			fmt.Sprintf(`dfs_files_zone_collapsed %d`, both),
			`dfs_durability_zone_failure_headroom 1`,
			fmt.Sprintf(`dfs_durability_zone_files_left{copies="1",zone="a"} %d`, both),
			`dfs_durability_zone_files_left{copies="0",zone="a"} 0`,
			`dfs_durability_zone_files_left{copies="1",zone="b"} 0`,
		} {
			require.True(t, strings.Contains(metrics, line+"\n"), "/metrics lacks %s", line)
		}
	})
}

func (h *harness) durabilityReport() api.DurabilityReport {
	h.t.Helper()
	resp := h.get("/api/cluster/durability")
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
	var d api.DurabilityReport
	resp.json(h.t, &d)
	return d
}
