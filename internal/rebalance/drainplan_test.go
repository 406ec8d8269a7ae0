package rebalance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// fileOn is a file of size bytes with ACTIVE copies on holders.
func fileOn(id string, size int64, holders ...string) meta.FileRecord {
	rec := meta.FileRecord{File: meta.File{ID: id, SizeBytes: size, Status: meta.FileActive}}
	for _, h := range holders {
		rec.Replicas = append(rec.Replicas, meta.Replica{FileID: id, NodeID: h, Status: meta.ReplicaActive})
	}
	return rec
}

// plenty is free space no test file comes near.
const plenty = 1 << 40

func freeOf(free int64, nodes ...string) map[string]int64 {
	out := map[string]int64{}
	for _, n := range nodes {
		out[n] = free
	}
	return out
}

func allHealthy(string) bool { return true }

func healthyExcept(down ...string) func(string) bool {
	return func(n string) bool { return !slices.Contains(down, n) }
}

func TestDrainPlanOfAHealthyClusterNamesWhatEachNodeGains(t *testing.T) {
	rg := ring.New(100, "A", "B", "C", "D")
	after := rg.Without("A")
	var files []meta.FileRecord
	want := map[string]*DrainTarget{}
	var bytes int64
	for i := range 40 {
		id := fmt.Sprintf("file-%02d", i)
		holders := rg.Preference(id, 3)
		if !slices.Contains(holders, "A") {
			continue
		}
		size := int64(100 + i)
		files = append(files, fileOn(id, size, holders...))
		// The one node of the ring without A that does not hold it yet.
		for _, n := range after.Preference(id, 3) {
			if !slices.Contains(holders, n) {
				if want[n] == nil {
					want[n] = &DrainTarget{NodeID: n}
				}
				want[n].Files++
				want[n].Bytes += size
				bytes += size
			}
		}
	}
	require.NotEmpty(t, files)

	p := PlanDrain(DrainInput{Node: "A", Ring: rg, ReplicationFactor: 3, Files: files, Healthy: allHealthy,
		Free: freeOf(plenty, "B", "C", "D")})
	require.True(t, p.Safe, p.Reasons)
	require.Empty(t, p.Reasons)
	require.NoError(t, Refusal(p))
	require.Equal(t, len(files), p.Files, "every file on A gains one copy")
	require.Equal(t, len(files), p.FilesOnNode)
	require.Equal(t, bytes, p.Bytes)
	require.Equal(t, bytes, p.BytesOnNode, "one copy of each file moves")
	require.Equal(t, 3, p.RemainingNodes)
	require.Len(t, p.Targets, len(want))
	for _, got := range p.Targets {
		require.Equal(t, want[got.NodeID].Files, got.Files, got.NodeID)
		require.Equal(t, want[got.NodeID].Bytes, got.Bytes, got.NodeID)
		require.Equal(t, int64(plenty), *got.FreeBytes)
	}
	require.True(t, slices.IsSortedFunc(p.Targets, func(a, b DrainTarget) int { return strings.Compare(a.NodeID, b.NodeID) }))
}

func TestDrainPlanReasons(t *testing.T) {
	tests := []struct {
		name    string
		ring    []string
		rf      int
		files   []meta.FileRecord
		healthy func(string) bool
		free    map[string]int64
		reasons []string
		sole    []string
		targets []DrainTarget
	}{
		{
			name: "two nodes at RF 3: one would remain", ring: []string{"A", "B"}, rf: 3,
			files: []meta.FileRecord{fileOn("f1", 10, "A", "B")}, healthy: allHealthy, free: freeOf(plenty, "B"),
			reasons: []string{"only 1 node(s) would remain on the ring, fewer than the replication factor 3"},
			targets: []DrainTarget{},
		},
		{
			name: "three nodes at RF 3: two would remain", ring: []string{"A", "B", "C"}, rf: 3,
			files: []meta.FileRecord{fileOn("f1", 10, "A", "B", "C")}, healthy: allHealthy, free: freeOf(plenty, "B", "C"),
			reasons: []string{"only 2 node(s) would remain on the ring, fewer than the replication factor 3"},
			targets: []DrainTarget{},
		},
		{
			name: "the receiving node is nearly full", ring: []string{"A", "B", "C", "D"}, rf: 3,
			files:   []meta.FileRecord{fileOn("f1", 600, "A", "B", "C"), fileOn("f2", 500, "A", "B", "C")},
			healthy: allHealthy, free: map[string]int64{"B": plenty, "C": plenty, "D": 1000},
			reasons: []string{"node D would receive 1100 bytes (2 files) but reports only 1000 bytes free"},
			targets: []DrainTarget{{NodeID: "D", Files: 2, Bytes: 1100}},
		},
		{
			name: "the receiving node does not say how much room it has", ring: []string{"A", "B", "C", "D"}, rf: 3,
			files:   []meta.FileRecord{fileOn("f1", 600, "A", "B", "C")},
			healthy: allHealthy, free: freeOf(plenty, "B", "C"),
			reasons: []string{"node D would receive 600 bytes (1 files) but did not report its free space"},
			targets: []DrainTarget{{NodeID: "D", Files: 1, Bytes: 600}},
		},
		{
			name: "the other holders are down and no node remains", ring: []string{"A"}, rf: 3,
			files:   []meta.FileRecord{fileOn("f1", 10, "A", "B", "C"), fileOn("f2", 10, "A")},
			healthy: healthyExcept("B", "C"), free: map[string]int64{},
			reasons: []string{
				"only 0 node(s) would remain on the ring, fewer than the replication factor 3",
				"2 file(s) have their only healthy copy on node A and no remaining node can take them: f1, f2",
			},
			sole: []string{"f1", "f2"}, targets: []DrainTarget{},
		},
		{
			name: "the other holders are down and the node that remains can take it", ring: []string{"A", "D"}, rf: 3,
			files:   []meta.FileRecord{fileOn("f1", 10, "A", "B", "C")},
			healthy: healthyExcept("B", "C"), free: freeOf(plenty, "D"),
			reasons: []string{"only 1 node(s) would remain on the ring, fewer than the replication factor 3"},
			targets: []DrainTarget{{NodeID: "D", Files: 1, Bytes: 10}},
		},
		{
			name: "the other holders are down and the nodes that remain are full", ring: []string{"A", "D", "E", "F"}, rf: 3,
			files:   []meta.FileRecord{fileOn("f1", 10, "A", "B", "C")},
			healthy: healthyExcept("B", "C"), free: freeOf(5, "D", "E", "F"),
			reasons: []string{
				"node D would receive 10 bytes (1 files) but reports only 5 bytes free",
				"node E would receive 10 bytes (1 files) but reports only 5 bytes free",
				"node F would receive 10 bytes (1 files) but reports only 5 bytes free",
				"1 file(s) have their only healthy copy on node A and no remaining node can take them: f1",
			},
			sole: []string{"f1"},
			targets: []DrainTarget{{NodeID: "D", Files: 1, Bytes: 10}, {NodeID: "E", Files: 1, Bytes: 10},
				{NodeID: "F", Files: 1, Bytes: 10}},
		},
		{
			// zz sorts after a, but its sole copy claims D's room first; a
			// still does not fit, and says so, but nothing is lost.
			name: "a sole copy claims room before a file with other copies", ring: []string{"A", "D"}, rf: 1,
			files:   []meta.FileRecord{fileOn("a", 80, "A", "B"), fileOn("zz", 100, "A", "C")},
			healthy: healthyExcept("C"), free: freeOf(100, "D"),
			reasons: []string{"node D would receive 180 bytes (2 files) but reports only 100 bytes free"},
			targets: []DrainTarget{{NodeID: "D", Files: 2, Bytes: 180}},
		},
		{
			name: "a copy on a node that is down is not a sole healthy copy", ring: []string{"B", "C", "D"}, rf: 3,
			files:   []meta.FileRecord{fileOn("f1", 10, "A")},
			healthy: healthyExcept("A"), free: map[string]int64{},
			reasons: []string{
				"node B would receive 10 bytes (1 files) but did not report its free space",
				"node C would receive 10 bytes (1 files) but did not report its free space",
				"node D would receive 10 bytes (1 files) but did not report its free space",
			},
			targets: []DrainTarget{{NodeID: "B", Files: 1, Bytes: 10}, {NodeID: "C", Files: 1, Bytes: 10},
				{NodeID: "D", Files: 1, Bytes: 10}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PlanDrain(DrainInput{Node: "A", Ring: ring.New(100, tt.ring...), ReplicationFactor: tt.rf,
				Files: tt.files, Healthy: tt.healthy, Free: tt.free})
			require.False(t, p.Safe)
			require.Equal(t, tt.reasons, p.Reasons)
			if tt.sole == nil {
				tt.sole = []string{}
			}
			require.Equal(t, tt.sole, p.SoleCopies)
			for i := range p.Targets {
				p.Targets[i].FreeBytes = nil
			}
			require.Equal(t, tt.targets, p.Targets)

			err := Refusal(p)
			require.Equal(t, errs.Conflict, errs.KindOf(err))
			require.Equal(t, errs.CodeUnsafeDrain, errs.CodeOf(err))
			for _, r := range tt.reasons {
				require.Contains(t, err.Error(), r)
			}
			require.Contains(t, err.Error(), "force=true")
		})
	}
}

func TestDrainPlanLeavesUploadsInFlightAndDeletedFilesAlone(t *testing.T) {
	pending := fileOn("p", 10, "A")
	pending.Status = meta.FilePending
	deleted := fileOn("d", 10, "A")
	deleted.Status = meta.FileDeleted
	p := PlanDrain(DrainInput{Node: "A", Ring: ring.New(100, "A", "B", "C", "D"), ReplicationFactor: 3,
		Files: []meta.FileRecord{pending, deleted}, Healthy: allHealthy, Free: map[string]int64{}})
	require.True(t, p.Safe, p.Reasons)
	require.Equal(t, 1, p.PendingUploads)
	require.Zero(t, p.FilesOnNode)
	require.Zero(t, p.Files)
	require.Empty(t, p.Targets)
}

// planStore serves fixed records.
type planStore struct {
	recordingStore
	recs map[string]meta.FileRecord
}

func (s *planStore) FileIDsOnNode(_ context.Context, node string) ([]string, error) {
	var ids []string
	for id, rec := range s.recs {
		if _, ok := rec.Replica(node); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return append(ids, "vanished"), nil
}

func (s *planStore) GetFile(_ context.Context, id string) (meta.FileRecord, error) {
	rec, ok := s.recs[id]
	if !ok {
		return meta.FileRecord{}, errs.E(errs.NotFound, "no file %s", id)
	}
	return rec, nil
}

func TestRebalancerPlansFromTheStoreTheRingAndTheNodes(t *testing.T) {
	st := &planStore{recs: map[string]meta.FileRecord{
		"f1": fileOn("f1", 10, "A", "B", "C"),
		"f2": fileOn("f2", 20, "B", "C", "D"),
	}}
	rg := ring.New(100, "A", "C", "D")
	var asked []string
	b := New(Options{Store: st, Ring: func() *ring.Ring { return rg }, ReplicationFactor: 3,
		NodeStatus: func(id string) (meta.NodeStatus, bool) {
			if id == "B" {
				return meta.NodeUnhealthy, true
			}
			return meta.NodeHealthy, true
		},
		FreeSpace: func(_ context.Context, id string) (int64, error) {
			asked = append(asked, id)
			if id == "D" {
				return 0, fmt.Errorf("no answer")
			}
			return plenty, nil
		}})
	b.o.FreeSpace = serial(b.o.FreeSpace)
	p, err := b.PlanDrain(t.Context(), "A")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"C", "D"}, asked, "only the nodes that remain are asked")
	require.Equal(t, 1, p.FilesOnNode, "the file that vanished meanwhile is not counted")
	require.Equal(t, []DrainTarget{{NodeID: "D", Files: 1, Bytes: 10}}, p.Targets)
	require.Equal(t, []string{
		"only 2 node(s) would remain on the ring, fewer than the replication factor 3",
		"node D would receive 10 bytes (1 files) but did not report its free space",
	}, p.Reasons)
	require.Empty(t, p.SoleCopies, "C holds a healthy copy of f1")
}

// serial makes a FreeSpace function safe to record from parallel calls.
func serial(f func(context.Context, string) (int64, error)) func(context.Context, string) (int64, error) {
	ch := make(chan struct{}, 1)
	return func(ctx context.Context, id string) (int64, error) {
		ch <- struct{}{}
		defer func() { <-ch }()
		return f(ctx, id)
	}
}

func TestDrainPlanRefusesToLeaveEveryCopyInOneZone(t *testing.T) {
	rg := ring.New(100).WithMembers(
		ring.Member{Node: "A", Zone: "z1", Weight: 1}, ring.Member{Node: "B", Zone: "z1", Weight: 1},
		ring.Member{Node: "C", Zone: "z1", Weight: 1}, ring.Member{Node: "D", Zone: "z2", Weight: 1})
	var files []meta.FileRecord
	for i := range 20 {
		id := fmt.Sprintf("file-%02d", i)
		files = append(files, fileOn(id, 10, rg.Preference(id, 3)...))
	}
	on := func(node string) []meta.FileRecord {
		var out []meta.FileRecord
		for _, f := range files {
			if _, ok := f.Replica(node); ok {
				out = append(out, f)
			}
		}
		return out
	}
	plan := func(node string) DrainPlan {
		return PlanDrain(DrainInput{Node: node, Ring: rg, ReplicationFactor: 3, Files: on(node), Healthy: allHealthy,
			Free: freeOf(plenty, "A", "B", "C", "D")})
	}

	p := plan("D")
	require.False(t, p.Safe)
	require.Equal(t, []string{`every node left would be in zone "z1": all copies of every file would share one zone, where the ring has 2 zones now`}, p.Reasons)
	err := Refusal(p)
	require.True(t, errs.Is(err, errs.Conflict))
	require.Contains(t, err.Error(), "force=true")

	// Draining a node of the zone with three leaves both zones on the ring.
	p = plan("A")
	require.True(t, p.Safe, "%v", p.Reasons)

	// One zone and zoneless nodes beside it are several domains.
	mixed := ring.New(100).WithMembers(ring.Member{Node: "A", Zone: "z1", Weight: 1}, ring.Member{Node: "B", Zone: "z1", Weight: 1},
		ring.Member{Node: "C", Weight: 1}, ring.Member{Node: "D", Weight: 1})
	p = PlanDrain(DrainInput{Node: "D", Ring: mixed, ReplicationFactor: 3, Healthy: allHealthy})
	require.True(t, p.Safe, "%v", p.Reasons)
	// At replication factor 1 a file has one copy wherever it is.
	p = PlanDrain(DrainInput{Node: "D", Ring: rg, ReplicationFactor: 1, Healthy: allHealthy})
	require.True(t, p.Safe, "%v", p.Reasons)
}
