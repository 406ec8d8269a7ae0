package metatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
)

// testZoneDurability builds files whose healthy copies by zone are known by
// hand. node-1 and node-2 are in zone a, node-3 and node-4 in zone b, node-5
// has no zone (a zone of its own) and node-6 is down.
func testZoneDurability(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3", "node-4", "node-5", "node-6")
	healthy := map[string]string{"node-1": "a", "node-2": "a", "node-3": "b", "node-4": "b", "node-5": ""}
	A, P, F := meta.ReplicaActive, meta.ReplicaPending, meta.ReplicaFailed
	mk := func(status meta.FileStatus, copies map[string]meta.ReplicaStatus) {
		rec := newFile(1, copies)
		rec.Status = status
		createFile(t, s, rec)
	}
	// Three zones: safe from any one zone's failure.
	mk(meta.FileActive, map[string]meta.ReplicaStatus{"node-1": A, "node-3": A, "node-5": A})
	// Both copies in zone a, with three zones to choose from: collapsed,
	// and a's failure leaves none.
	mk(meta.FileActive, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A})
	// Three copies in two zones: collapsed; a's failure leaves one.
	mk(meta.FileRebalancing, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A, "node-3": A})
	// One healthy copy (node-6 is down): not collapsed, b's failure leaves none.
	mk(meta.FileDegraded, map[string]meta.ReplicaStatus{"node-3": A, "node-6": A})
	// Two copies, two zones: b's failure, or node-5's, leaves one.
	mk(meta.FileActive, map[string]meta.ReplicaStatus{"node-5": A, "node-4": A})
	// No healthy copy: in no zone at all.
	mk(meta.FileFailed, nil)
	// Copies that are not ACTIVE are in no zone: one healthy copy, in a.
	mk(meta.FileDegraded, map[string]meta.ReplicaStatus{"node-1": A, "node-3": F, "node-5": P})
	// Not readable: counted nowhere.
	mk(meta.FilePending, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A})
	mk(meta.FileDeleted, map[string]meta.ReplicaStatus{"node-3": A, "node-4": A})

	z, err := s.ZoneDurability(ctx, healthy)
	require.NoError(t, err)
	require.Equal(t, meta.ZoneDurability{
		Zones: []meta.ZoneRisk{
			{Zone: "a", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: 1, FilesLeftWithNoCopy: 2},
			{Zone: "b", Nodes: []string{"node-3", "node-4"}, FilesLeftWithOneCopy: 1, FilesLeftWithNoCopy: 1},
			{Nodes: []string{"node-5"}, FilesLeftWithOneCopy: 1},
		},
		Files: 7, MinZones: 0, Collapsed: 2,
	}, z)
	require.Zero(t, z.FailureHeadroom(3))

	// Every node a zone of its own: a zone's failure is its node's, as
	// Durability counts it, and no two copies share a zone.
	alone := map[string]string{"node-1": "", "node-2": "", "node-3": "", "node-4": "", "node-5": ""}
	z, err = s.ZoneDurability(ctx, alone)
	require.NoError(t, err)
	d, err := s.Durability(ctx, []string{"node-1", "node-2", "node-3", "node-4", "node-5"})
	require.NoError(t, err)
	require.Len(t, z.Zones, len(d.Nodes))
	for i, n := range d.Nodes {
		require.Equal(t, meta.ZoneRisk{Nodes: []string{n.NodeID},
			FilesLeftWithOneCopy: n.FilesLeftWithOneCopy, FilesLeftWithNoCopy: n.FilesLeftWithNoCopy}, z.Zones[i])
	}
	lowest, _ := d.MinCopies()
	require.Equal(t, lowest, z.MinZones)
	require.Equal(t, d.Files(), z.Files)
	require.Zero(t, z.Collapsed)
	require.Equal(t, z, d.AsZones(), "the coordinator answers a zoneless cluster from Durability alone")

	// With no healthy node there is no zone, and no file has a copy.
	z, err = s.ZoneDurability(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, meta.ZoneDurability{Zones: []meta.ZoneRisk{}, Files: 7}, z)
	d, err = s.Durability(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, z, d.AsZones())
}

// testZoneDurabilitySafe: files whose copies span every zone; a zone's
// failure costs each one copy, and the headroom is the fewest zones a file
// spans, minus one.
func testZoneDurabilitySafe(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3")
	healthy := map[string]string{"node-1": "z1", "node-2": "z2", "node-3": "z3"}
	A := meta.ReplicaActive
	createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A, "node-3": A}))
	z, err := s.ZoneDurability(ctx, healthy)
	require.NoError(t, err)
	require.Equal(t, 3, z.MinZones)
	require.Equal(t, 2, z.FailureHeadroom(3))
	require.Zero(t, z.Collapsed)
	for _, zone := range z.Zones {
		require.Zero(t, zone.FilesLeftWithOneCopy, zone.Zone)
		require.Zero(t, zone.FilesLeftWithNoCopy, zone.Zone)
	}

	// Two zones for three copies: as spread as they can be, so not
	// collapsed, and each zone's failure leaves one or two.
	two := map[string]string{"node-1": "z1", "node-2": "z1", "node-3": "z2"}
	z, err = s.ZoneDurability(ctx, two)
	require.NoError(t, err)
	require.Equal(t, meta.ZoneDurability{
		Zones: []meta.ZoneRisk{
			{Zone: "z1", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: 1},
			{Zone: "z2", Nodes: []string{"node-3"}},
		},
		Files: 1, MinZones: 2, Collapsed: 0,
	}, z)
	require.Equal(t, 1, z.FailureHeadroom(3))
}

// testZoneDurabilityEmpty: no readable file; the headroom is what a file
// written now could survive.
func testZoneDurabilityEmpty(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	z, err := s.ZoneDurability(ctx, map[string]string{"node-1": "a", "node-9": "b", "node-8": ""})
	require.NoError(t, err)
	require.Equal(t, meta.ZoneDurability{Zones: []meta.ZoneRisk{
		{Zone: "a", Nodes: []string{"node-1"}}, {Zone: "b", Nodes: []string{"node-9"}}, {Nodes: []string{"node-8"}},
	}}, z)
	require.Equal(t, 2, z.FailureHeadroom(3))
	require.Equal(t, 1, z.FailureHeadroom(2))
	require.Zero(t, meta.ZoneDurability{}.FailureHeadroom(3))
}

// testZoneDurabilityChunked: a chunked file counts once, by its worst chunk:
// collapsed when one chunk is, left with what its worst chunk is left with.
// The chunks of an upload session not completed count nowhere. node-1 and
// node-2 are in zone a, node-3 and node-4 in zone b.
func testZoneDurabilityChunked(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3", "node-4")
	healthy := map[string]string{"node-1": "a", "node-2": "a", "node-3": "b", "node-4": "b"}
	// Its second chunk's copies are both in a: collapsed once, a's failure
	// leaves it none, b's one.
	chunkedFile(t, s, meta.FileActive, 300, []string{"node-1", "node-3"}, []string{"node-1", "node-2"})
	// Every chunk in both zones: either zone's failure leaves one, counted
	// once however many chunks lose a copy.
	chunkedFile(t, s, meta.FileActive, 300,
		[]string{"node-1", "node-3"}, []string{"node-2", "node-4"}, []string{"node-1", "node-4"})
	// Not readable: counted nowhere.
	chunkedFile(t, s, meta.FilePending, 900, []string{"node-1"})
	// A whole-file blob beside them, both copies in b.
	createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-3": meta.ReplicaActive, "node-4": meta.ReplicaActive}))
	// An upload in progress: its chunks, with one copy each in a, are no file.
	u := newSession(t, s, time.Hour)
	p := newPart(t, s, u, 1)
	addChunks(t, s, p.PartID, 2, 100, "node-1")
	finishPart(t, s, p, 200)
	addChunks(t, s, newPart(t, s, u, 2).PartID, 1, 100, "node-2", "node-1")

	z, err := s.ZoneDurability(ctx, healthy)
	require.NoError(t, err)
	require.Equal(t, meta.ZoneDurability{
		Zones: []meta.ZoneRisk{
			{Zone: "a", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: 1, FilesLeftWithNoCopy: 1},
			{Zone: "b", Nodes: []string{"node-3", "node-4"}, FilesLeftWithOneCopy: 2, FilesLeftWithNoCopy: 1},
		},
		Files: 3, MinZones: 1, Collapsed: 2,
	}, z)
	require.Zero(t, z.FailureHeadroom(3))
}
