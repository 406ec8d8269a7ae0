package files

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
)

// zonedService is a service over six nodes, two in each of zones a, b and c.
func zonedService(t *testing.T, nodes *gateNodes) (*Service, meta.Store, *ring.Ring) {
	t.Helper()
	ids := []string{"a1", "a2", "b1", "b2", "c1", "c2"}
	var ms []ring.Member
	for _, id := range ids {
		ms = append(ms, ring.Member{Node: id, Zone: "zone-" + id[:1], Weight: 1})
	}
	rg := ring.New(100).WithMembers(ms...)
	s, st := newService(t, nodes, ids, func(o *Options) {
		cl := staticCluster{rg: rg}
		o.Cluster = cl
		o.Reconciler = reconcile.New(reconcile.Options{Store: o.Store, Nodes: o.Nodes, Cluster: cl, ReplicationFactor: 3})
	})
	return s, st, rg
}

// activeZones returns the zones of a file's ACTIVE copies, one per copy.
func activeZones(t *testing.T, st meta.Store, rg *ring.Ring, id string) []string {
	t.Helper()
	rec, err := st.GetFile(context.Background(), id)
	require.NoError(t, err)
	var zones []string
	for _, r := range rec.Replicas {
		if r.Status == meta.ReplicaActive {
			zones = append(zones, rg.Zone(r.NodeID))
		}
	}
	return zones
}

func TestUploadFailoverKeepsCopiesInDistinctZones(t *testing.T) {
	nodes := newGateNodes("a1", "a2", "b1", "b2", "c1", "c2")
	nodes.quiet = true
	nodes.fail["b1"] = errs.E(errs.Unavailable, "connection refused")
	s, st, rg := zonedService(t, nodes)

	tookB1Place := 0
	for i := range 60 {
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader(fmt.Sprintf("file %d", i))})
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, res.Status)
		zones := activeZones(t, st, rg, res.FileID)
		require.ElementsMatch(t, []string{"zone-a", "zone-b", "zone-c"}, zones,
			"file %s: with b1 down its zone-mate b2 takes zone b's copy", res.FileID)
		if plan := rg.Preference(res.FileID, 3); slices.Contains(plan, "b1") {
			tookB1Place++
		}
	}
	require.Positive(t, tookB1Place, "some files had b1 in their plan, so the failover was exercised")

	// With a whole zone down, the copies spread over the zones left.
	nodes.fail["b2"] = errs.E(errs.Unavailable, "connection refused")
	for i := range 20 {
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "g", Body: strings.NewReader(fmt.Sprintf("other %d", i))})
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, res.Status)
		zones := activeZones(t, st, rg, res.FileID)
		require.Len(t, zones, 3)
		require.Subset(t, []string{"zone-a", "zone-c"}, zones)
		require.Contains(t, zones, "zone-a")
		require.Contains(t, zones, "zone-c")
	}
}
