// Package metatest is the conformance suite of meta.Store: every
// implementation runs Run (and RunBenchmarks), so the PostgreSQL and the
// embedded store are held to one specification, the way Perkeep's storagetest
// holds every blob server to one.
//
// The suite states the behaviour callers may rely on: optimistic locking,
// replica-set replacement, idempotency keys, listing order and filters, ring
// range queries, leases, membership and rebalance epochs, error kinds, and
// timestamps that read back exactly as written (UTC, whole microseconds).
package metatest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// Opener returns a new, empty store for one test and arranges for it to be
// closed when the test ends.
type Opener func(t *testing.T) meta.Store

// Run runs the conformance suite. Every subtest opens its own store, and the
// subtests run in parallel, so open must be safe to call concurrently.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s meta.Store)
	}{
		{"Ping", testPing},
		{"NodeLifecycle", testNodeLifecycle},
		{"NodeValidation", testNodeValidation},
		{"NodeOptimisticLocking", testNodeOptimisticLocking},
		{"NodeConcurrentIncrements", testNodeConcurrentIncrements},
		{"NodeDiskID", testNodeDiskID},
		{"NodeZoneAndWeight", testNodeZoneAndWeight},
		{"FileCreateAndGet", testFileCreateAndGet},
		{"FileCreateConflicts", testFileCreateConflicts},
		{"FileValidation", testFileValidation},
		{"FileUnknownNodes", testFileUnknownNodes},
		{"UpdateFileReplacesReplicas", testUpdateFileReplacesReplicas},
		{"UpdateFileManyStatusChanges", testUpdateFileManyStatusChanges},
		{"UpdateFileOptimisticLocking", testUpdateFileOptimisticLocking},
		{"UpdateFileConcurrentIncrements", testUpdateFileConcurrentIncrements},
		{"IdempotencyKey", testIdempotencyKey},
		{"TouchFile", testTouchFile},
		{"DeleteFile", testDeleteFile},
		{"ListFiles", testListFiles},
		{"FileIDsOnNode", testFileIDsOnNode},
		{"FileIDsByStatus", testFileIDsByStatus},
		{"RepairOrder", testRepairOrder},
		{"RepairQueue", testRepairQueue},
		{"FileIDsInRanges", testFileIDsInRanges},
		{"FileIDsInManyRanges", testFileIDsInManyRanges},
		{"CountFilesByStatus", testCountFilesByStatus},
		{"FilesAfter", testFilesAfter},
		{"FilesAfterValidation", testFilesAfterValidation},
		{"State", testState},
		{"Leases", testLeases},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseValidation", testLeaseValidation},
		{"PruneLeases", testPruneLeases},
		{"EpochsBumpAndComplete", testEpochsBumpAndComplete},
		{"EpochsConcurrentBumps", testEpochsConcurrentBumps},
		{"MarkNodeCopiesLost", testMarkNodeCopiesLost},
		{"Durability", testDurability},
		{"DurabilityEmpty", testDurabilityEmpty},
		{"DurabilityChunked", testDurabilityChunked},
		{"DurabilityFollowsWrites", testDurabilityFollowsWrites},
		{"ZoneDurability", testZoneDurability},
		{"ZoneDurabilitySafe", testZoneDurabilitySafe},
		{"ZoneDurabilityEmpty", testZoneDurabilityEmpty},
		{"ZoneDurabilityChunked", testZoneDurabilityChunked},
		{"FileWritesAreReadBack", testFileWritesAreReadBack},
		{"TimestampsRoundTrip", testTimestampsRoundTrip},
		{"CanceledContext", testCanceledContext},
		{"ChunkedFileLifecycle", testChunkedFileLifecycle},
		{"ChunkedManifestDeletedIsWalked", testChunkedManifestDeletedIsWalked},
		{"PartReplacement", testPartReplacement},
		{"RacingPartAttempts", testRacingPartAttempts},
		{"SessionExpiryAndDelete", testSessionExpiryAndDelete},
		{"ChunkValidation", testChunkValidation},
		{"ChunkWritesAreReadBack", testChunkWritesAreReadBack},
		{"ManifestStatusFollowsChunks", testManifestStatusFollowsChunks},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func requireKind(t *testing.T, err error, k errs.Kind) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, k, errs.KindOf(err), "error %q has kind %s, want %s", err, errs.KindOf(err), k)
}

func newNode(id string) *meta.Node {
	return &meta.Node{ID: id, Host: id + ".local", Port: 9000, Status: meta.NodeUnhealthy}
}

// addNodes creates nodes with the given IDs.
func addNodes(t *testing.T, s meta.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, s.CreateNode(ctxT(t), newNode(id)))
	}
}

func newFile(pos int64, replicas map[string]meta.ReplicaStatus) *meta.FileRecord {
	rec := &meta.FileRecord{File: meta.File{
		ID:                uuid.NewString(),
		Name:              "report.pdf",
		ContentType:       "application/pdf",
		SizeBytes:         1234,
		Checksum:          "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Status:            meta.FileActive,
		ReplicationFactor: 3,
		RingPosition:      pos,
	}}
	for node, st := range replicas {
		rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: node, Status: st})
		if rec.PrimaryNodeID == "" || node < rec.PrimaryNodeID {
			rec.PrimaryNodeID = node
		}
	}
	return rec
}

func createFile(t *testing.T, s meta.Store, rec *meta.FileRecord) *meta.FileRecord {
	t.Helper()
	require.NoError(t, s.CreateFile(ctxT(t), rec))
	return rec
}

func testPing(t *testing.T, s meta.Store) {
	require.NoError(t, s.Ping(ctxT(t)))
}

func testNodeLifecycle(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	n := newNode("node-2")
	require.NoError(t, s.CreateNode(ctx, n))
	require.Equal(t, int64(1), n.Version)
	require.False(t, n.RegisteredAt.IsZero(), "a zero RegisteredAt is set to now")

	got, err := s.GetNode(ctx, "node-2")
	require.NoError(t, err)
	require.Equal(t, *n, got)

	requireKind(t, s.CreateNode(ctx, newNode("node-2")), errs.Conflict)

	_, err = s.GetNode(ctx, "node-9")
	requireKind(t, err, errs.NotFound)
	require.Equal(t, "NODE_NOT_FOUND", errs.CodeOf(err))

	addNodes(t, s, "node-3", "node-1")
	nodes, err := s.ListNodes(ctx)
	require.NoError(t, err)
	ids := make([]string, len(nodes))
	for i, x := range nodes {
		ids[i] = x.ID
	}
	require.Equal(t, []string{"node-1", "node-2", "node-3"}, ids)

	checked := time.Now()
	n.Status = meta.NodeHealthy
	n.Host, n.Port = "10.0.0.2", 9100
	n.LastCheckAt, n.LastHealthyAt = &checked, &checked
	n.ConsecutiveSuccesses = 2
	require.NoError(t, s.UpdateNode(ctx, n))
	require.Equal(t, int64(2), n.Version)
	got, err = s.GetNode(ctx, "node-2")
	require.NoError(t, err)
	require.Equal(t, *n, got, "the stored node equals the caller's after the update")
	require.True(t, got.OnRing())

	missing := newNode("node-9")
	missing.Version = 1
	err = s.UpdateNode(ctx, missing)
	requireKind(t, err, errs.NotFound)
	require.Equal(t, "NODE_NOT_FOUND", errs.CodeOf(err))
}

func testNodeValidation(t *testing.T, s meta.Store) {
	cases := []struct {
		name   string
		mutate func(n *meta.Node)
	}{
		{"empty id", func(n *meta.Node) { n.ID = "" }},
		{"empty host", func(n *meta.Node) { n.Host = "" }},
		{"port zero", func(n *meta.Node) { n.Port = 0 }},
		{"port too large", func(n *meta.Node) { n.Port = 65536 }},
		{"unknown status", func(n *meta.Node) { n.Status = "BUSY" }},
		{"negative failures", func(n *meta.Node) { n.ConsecutiveFailures = -1 }},
	}
	addNodes(t, s, "node-1")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode("node-x")
			tc.mutate(n)
			requireKind(t, s.CreateNode(ctxT(t), n), errs.Invalid)

			u, err := s.GetNode(ctxT(t), "node-1")
			require.NoError(t, err)
			tc.mutate(&u)
			if u.ID == "" {
				return
			}
			requireKind(t, s.UpdateNode(ctxT(t), &u), errs.Invalid)
		})
	}
	nodes, err := s.ListNodes(ctxT(t))
	require.NoError(t, err)
	require.Len(t, nodes, 1, "no invalid node was stored")
	require.Equal(t, int64(1), nodes[0].Version, "no invalid update was stored")
}

func testNodeOptimisticLocking(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	a, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	b := a

	a.ConsecutiveFailures = 1
	require.NoError(t, s.UpdateNode(ctx, &a))

	b.Status = meta.NodeDeregistered
	err = s.UpdateNode(ctx, &b)
	requireKind(t, err, errs.Conflict)
	require.Equal(t, int64(1), b.Version, "a failed update leaves the caller's version alone")

	// The loser re-reads and re-applies.
	b, err = s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	b.Status = meta.NodeDeregistered
	require.NoError(t, s.UpdateNode(ctx, &b))

	got, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, meta.NodeDeregistered, got.Status)
	require.Equal(t, 1, got.ConsecutiveFailures, "the winner's change survives")
	require.Equal(t, int64(3), got.Version)
}

// retry re-reads and re-applies until an update is not stale.
func retry(apply func() error) error {
	for {
		err := apply()
		if !errs.Is(err, errs.Conflict) {
			return err
		}
	}
}

func testNodeConcurrentIncrements(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	const workers, increments = 2, 50
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range increments {
				err := retry(func() error {
					n, err := s.GetNode(ctx, "node-1")
					if err != nil {
						return err
					}
					n.ConsecutiveFailures++
					return s.UpdateNode(ctx, &n)
				})
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	n, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, workers*increments, n.ConsecutiveFailures, "no increment is lost")
	require.Equal(t, int64(1+workers*increments), n.Version)
}

func testNodeDiskID(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "unknown")
	got, err := s.GetNode(ctx, "unknown")
	require.NoError(t, err)
	require.Empty(t, got.DiskID, "a node created without an identity has none")

	n := newNode("known")
	n.DiskID = "5f0c7e1a-3b7d-4c52-9a8e-0d6f1e2b3c4d"
	require.NoError(t, s.CreateNode(ctx, n))
	got, err = s.GetNode(ctx, "known")
	require.NoError(t, err)
	require.Equal(t, "5f0c7e1a-3b7d-4c52-9a8e-0d6f1e2b3c4d", got.DiskID)

	// Replaced, then forgotten: each write stores what it names.
	for _, id := range []string{"9b1d4a3e-6c2f-4e8a-b7d0-1a2b3c4d5e6f", ""} {
		got.DiskID = id
		require.NoError(t, s.UpdateNode(ctx, &got))
		back, err := s.GetNode(ctx, "known")
		require.NoError(t, err)
		require.Equal(t, got, back)
	}
	nodes, err := s.ListNodes(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	for _, x := range nodes {
		require.Empty(t, x.DiskID, x.ID)
	}
}

func testNodeZoneAndWeight(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "plain")
	got, err := s.GetNode(ctx, "plain")
	require.NoError(t, err)
	require.Empty(t, got.Zone)
	require.Zero(t, got.Weight)
	require.Nil(t, got.ZoneOverride)
	require.Nil(t, got.WeightOverride)
	require.Equal(t, "", got.PlacementZone())
	require.Equal(t, 1.0, got.PlacementWeight())

	n := newNode("zoned")
	n.Zone, n.Weight = "rack-a", 2.5
	require.NoError(t, s.CreateNode(ctx, n))
	got, err = s.GetNode(ctx, "zoned")
	require.NoError(t, err)
	require.Equal(t, "rack-a", got.Zone)
	require.Equal(t, 2.5, got.Weight)

	// Overrides win while set, including an override to no zone, and each
	// write stores what it names.
	noZone, heavier := "", 4.0
	got.ZoneOverride, got.WeightOverride = &noZone, &heavier
	require.NoError(t, s.UpdateNode(ctx, &got))
	back, err := s.GetNode(ctx, "zoned")
	require.NoError(t, err)
	require.Equal(t, got, back)
	require.Equal(t, "", back.PlacementZone())
	require.Equal(t, 4.0, back.PlacementWeight())
	other := "rack-b"
	back.ZoneOverride, back.WeightOverride, back.Zone, back.Weight = &other, nil, "", 0
	require.NoError(t, s.UpdateNode(ctx, &back))
	again, err := s.GetNode(ctx, "zoned")
	require.NoError(t, err)
	require.Equal(t, back, again)
	require.Equal(t, "rack-b", again.PlacementZone())
	require.Equal(t, 1.0, again.PlacementWeight())

	for name, mutate := range map[string]func(*meta.Node){
		"negative weight":       func(n *meta.Node) { n.Weight = -1 },
		"zero weight override":  func(n *meta.Node) { z := 0.0; n.WeightOverride = &z },
		"infinite weight":       func(n *meta.Node) { n.Weight = math.Inf(1) },
		"zone of 256 bytes":     func(n *meta.Node) { n.Zone = strings.Repeat("z", 256) },
		"override of 256 bytes": func(n *meta.Node) { z := strings.Repeat("z", 256); n.ZoneOverride = &z },
	} {
		bad := newNode("bad")
		mutate(bad)
		require.True(t, errs.Is(s.CreateNode(ctx, bad), errs.Invalid), name)
	}
}

func testFileCreateAndGet(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3")
	rec := newFile(42, map[string]meta.ReplicaStatus{
		"node-3": meta.ReplicaPending, "node-1": meta.ReplicaActive, "node-2": meta.ReplicaFailed,
	})
	rec.StatusReason = "node-2 refused the write"
	rec.IdempotencyKey = "upload-1"
	createFile(t, s, rec)

	require.Equal(t, int64(1), rec.Version)
	require.False(t, rec.CreatedAt.IsZero())
	require.Equal(t, rec.CreatedAt, rec.UpdatedAt, "zero timestamps both become the same now")
	require.Len(t, rec.Replicas, 3)
	seen := map[int64]bool{}
	for i, r := range rec.Replicas {
		require.Equal(t, []string{"node-1", "node-2", "node-3"}[i], r.NodeID, "replicas come back ordered by node ID")
		require.Equal(t, rec.ID, r.FileID)
		require.NotZero(t, r.ID)
		require.False(t, seen[r.ID], "replica IDs are distinct")
		seen[r.ID] = true
		require.Equal(t, int64(1), r.Version)
		require.Equal(t, rec.UpdatedAt, r.CreatedAt)
	}

	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, got)

	// Optional fields left empty read back empty.
	bare := newFile(7, nil)
	bare.Checksum, bare.PrimaryNodeID, bare.Status = "", "", meta.FilePending
	createFile(t, s, bare)
	got, err = s.GetFile(ctx, bare.ID)
	require.NoError(t, err)
	require.Equal(t, *bare, got)
	require.Empty(t, got.Replicas)

	for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
		_, err = s.GetFile(ctx, id)
		requireKind(t, err, errs.NotFound)
		require.Equal(t, "FILE_NOT_FOUND", errs.CodeOf(err))
	}
}

func testFileCreateConflicts(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	a := createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive}))

	dup := newFile(2, nil)
	dup.ID = a.ID
	requireKind(t, s.CreateFile(ctx, dup), errs.Conflict)

	keyed := newFile(3, nil)
	keyed.IdempotencyKey = "k"
	createFile(t, s, keyed)
	again := newFile(4, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaPending})
	again.IdempotencyKey = "k"
	requireKind(t, s.CreateFile(ctx, again), errs.Conflict)
	_, err := s.GetFile(ctx, again.ID)
	requireKind(t, err, errs.NotFound)
	require.Zero(t, again.Version, "a failed create leaves the caller's record alone")

	// Many files may carry no key.
	createFile(t, s, newFile(5, nil))
	createFile(t, s, newFile(6, nil))
}

func testFileValidation(t *testing.T, s meta.Store) {
	addNodes(t, s, "node-1", "node-2")
	cases := []struct {
		name   string
		mutate func(r *meta.FileRecord)
	}{
		{"id not a uuid", func(r *meta.FileRecord) { r.ID = "file-1" }},
		{"upper-case id", func(r *meta.FileRecord) { r.ID = "9B2E4A3C-1D5F-4E6A-8B7C-0D1E2F3A4B5C" }},
		{"braced id", func(r *meta.FileRecord) { r.ID = "{" + uuid.NewString() + "}" }},
		{"unknown status", func(r *meta.FileRecord) { r.Status = "LOST" }},
		{"negative size", func(r *meta.FileRecord) { r.SizeBytes = -1 }},
		{"negative ring position", func(r *meta.FileRecord) { r.RingPosition = -5 }},
		{"replication factor zero", func(r *meta.FileRecord) { r.ReplicationFactor = 0 }},
		{"two replicas on one node", func(r *meta.FileRecord) {
			r.Replicas = append(r.Replicas, meta.Replica{NodeID: "node-1", Status: meta.ReplicaFailed})
		}},
		{"replica without node", func(r *meta.FileRecord) { r.Replicas[0].NodeID = "" }},
		{"replica of another file", func(r *meta.FileRecord) { r.Replicas[0].FileID = uuid.NewString() }},
		{"unknown replica status", func(r *meta.FileRecord) { r.Replicas[0].Status = "LOST" }},
	}
	stored := createFile(t, s, newFile(9, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive}))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newFile(10, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
			tc.mutate(rec)
			requireKind(t, s.CreateFile(ctxT(t), rec), errs.Invalid)

			u, err := s.GetFile(ctxT(t), stored.ID)
			require.NoError(t, err)
			tc.mutate(&u)
			if u.ID != stored.ID {
				// A record with another ID names a file that does not exist.
				requireKind(t, s.UpdateFile(ctxT(t), &u), errs.NotFound)
				return
			}
			requireKind(t, s.UpdateFile(ctxT(t), &u), errs.Invalid)
		})
	}
	got, err := s.GetFile(ctxT(t), stored.ID)
	require.NoError(t, err)
	require.Equal(t, *stored, got, "no invalid update was stored")
	counts, err := s.CountFilesByStatus(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, 1, counts[meta.FileActive], "no invalid file was stored")
}

func testFileUnknownNodes(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-7": meta.ReplicaActive})
	requireKind(t, s.CreateFile(ctx, rec), errs.Invalid)
	_, err := s.GetFile(ctx, rec.ID)
	requireKind(t, err, errs.NotFound)

	rec = newFile(1, nil)
	rec.PrimaryNodeID = "node-7"
	requireKind(t, s.CreateFile(ctx, rec), errs.Invalid)

	stored := createFile(t, s, newFile(2, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive}))
	u := *stored
	u.Status = meta.FileDegraded
	u.Replicas = append([]meta.Replica{}, stored.Replicas...)
	u.Replicas = append(u.Replicas, meta.Replica{NodeID: "node-7", Status: meta.ReplicaPending})
	requireKind(t, s.UpdateFile(ctx, &u), errs.Invalid)
	got, err := s.GetFile(ctx, stored.ID)
	require.NoError(t, err)
	require.Equal(t, *stored, got, "the whole update is rolled back")
}

func testUpdateFileReplacesReplicas(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3", "node-4")
	rec := createFile(t, s, newFile(100, map[string]meta.ReplicaStatus{
		"node-1": meta.ReplicaActive, "node-2": meta.ReplicaPending, "node-3": meta.ReplicaActive,
	}))
	before := *rec
	before.Replicas = append([]meta.Replica{}, rec.Replicas...)
	time.Sleep(2 * time.Millisecond) // so "now" moves past the creation time

	// Keep node-1 as it is, mark node-2 ACTIVE, drop node-3, add node-4.
	rec.Status = meta.FileRebalancing
	rec.StatusReason = "moving to node-4"
	rec.PrimaryNodeID = "node-2"
	rec.Checksum = "00" + rec.Checksum[2:]
	rec.Replicas = []meta.Replica{
		{NodeID: "node-4", Status: meta.ReplicaPending},
		{NodeID: "node-2", Status: meta.ReplicaActive},
		{NodeID: "node-1", Status: meta.ReplicaActive},
	}
	require.NoError(t, s.UpdateFile(ctx, rec))
	require.Equal(t, int64(2), rec.Version)
	require.Equal(t, before.CreatedAt, rec.CreatedAt)
	require.True(t, rec.UpdatedAt.After(before.UpdatedAt), "UpdateFile moves UpdatedAt")

	require.Len(t, rec.Replicas, 3)
	kept, changed, added := rec.Replicas[0], rec.Replicas[1], rec.Replicas[2]
	require.Equal(t, before.Replicas[0], kept, "an unchanged copy keeps its row as it was")
	require.Equal(t, "node-2", changed.NodeID)
	require.Equal(t, before.Replicas[1].ID, changed.ID, "a changed copy keeps its row ID")
	require.Equal(t, before.Replicas[1].CreatedAt, changed.CreatedAt)
	require.Equal(t, int64(2), changed.Version)
	require.Equal(t, rec.UpdatedAt, changed.UpdatedAt)
	require.Equal(t, meta.ReplicaActive, changed.Status)
	require.Equal(t, "node-4", added.NodeID)
	require.Equal(t, rec.ID, added.FileID)
	require.Equal(t, int64(1), added.Version)
	for _, r := range before.Replicas {
		require.NotEqual(t, r.ID, added.ID, "a new copy gets a new row ID")
	}

	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, got)

	onNode3, err := s.FileIDsOnNode(ctx, "node-3")
	require.NoError(t, err)
	require.Empty(t, onNode3, "the dropped copy's row is gone")

	// An empty set removes every copy; the next copy on a node that held one
	// before is a new row.
	rec.Replicas = nil
	require.NoError(t, s.UpdateFile(ctx, rec))
	got, err = s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Empty(t, got.Replicas)
	rec.Replicas = []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}}
	require.NoError(t, s.UpdateFile(ctx, rec))
	require.NotEqual(t, kept.ID, rec.Replicas[0].ID, "row IDs are never reused")
	require.Equal(t, int64(4), rec.Version)
}

// testUpdateFileManyStatusChanges changes the status of more copies at once
// than an upload does, to two statuses in an interleaved order, then one
// copy alone: a store that writes several copies per statement must still
// give each copy its own status and version, and touch no other file's.
func testUpdateFileManyStatusChanges(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	nodes := []string{"node-1", "node-2", "node-3", "node-4", "node-5", "node-6", "node-7"}
	addNodes(t, s, nodes...)
	pending := map[string]meta.ReplicaStatus{}
	for _, n := range nodes {
		pending[n] = meta.ReplicaPending
	}
	rec := createFile(t, s, newFile(100, pending))
	other := createFile(t, s, newFile(200, pending))

	want := map[string]meta.ReplicaStatus{}
	for i := range rec.Replicas {
		st := meta.ReplicaActive
		if i%3 == 1 {
			st = meta.ReplicaFailed
		}
		rec.Replicas[i].Status = st
		want[rec.Replicas[i].NodeID] = st
	}
	require.NoError(t, s.UpdateFile(ctx, rec))
	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, got)
	require.Len(t, got.Replicas, len(nodes))
	for _, r := range got.Replicas {
		require.Equal(t, want[r.NodeID], r.Status, "copy on %s", r.NodeID)
		require.Equal(t, int64(2), r.Version, "copy on %s", r.NodeID)
		require.Equal(t, got.UpdatedAt, r.UpdatedAt, "copy on %s", r.NodeID)
	}

	// One copy alone changes; the others keep their rows as they were.
	before := append([]meta.Replica{}, got.Replicas...)
	rec.Replicas[0].Status = meta.ReplicaDeleting
	require.NoError(t, s.UpdateFile(ctx, rec))
	got, err = s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, *rec, got)
	for i, r := range got.Replicas {
		if r.NodeID == rec.Replicas[0].NodeID {
			require.Equal(t, meta.ReplicaDeleting, r.Status)
			require.Equal(t, int64(3), r.Version)
			continue
		}
		require.Equal(t, before[i], r, "an unchanged copy keeps its row")
	}

	untouched, err := s.GetFile(ctx, other.ID)
	require.NoError(t, err)
	require.Equal(t, *other, untouched, "another file's copies on the same nodes are untouched")
}

func testUpdateFileOptimisticLocking(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	rec := createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaPending}))
	a, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	b, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)

	a.Status = meta.FileDegraded
	require.NoError(t, s.UpdateFile(ctx, &a))

	b.Status = meta.FileFailed
	b.Replicas[0].Status = meta.ReplicaFailed
	requireKind(t, s.UpdateFile(ctx, &b), errs.Conflict)
	require.Equal(t, int64(1), b.Version)

	b, err = s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, b.Status, "the stale update changed nothing")
	require.Equal(t, meta.ReplicaPending, b.Replicas[0].Status, "nor the replicas")
	b.Status = meta.FileFailed
	require.NoError(t, s.UpdateFile(ctx, &b))
	require.Equal(t, int64(3), b.Version)

	missing := newFile(1, nil)
	missing.Version = 1
	err = s.UpdateFile(ctx, missing)
	requireKind(t, err, errs.NotFound)
	require.Equal(t, "FILE_NOT_FOUND", errs.CodeOf(err))
}

func testUpdateFileConcurrentIncrements(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2")
	rec := createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive}))
	const workers, increments = 2, 25
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range increments {
				err := retry(func() error {
					f, err := s.GetFile(ctx, rec.ID)
					if err != nil {
						return err
					}
					f.SizeBytes++
					// Each worker also flips a copy, so replica writes race too.
					st := []meta.ReplicaStatus{meta.ReplicaPending, meta.ReplicaActive}[(w+i)%2]
					f.Replicas = []meta.Replica{{NodeID: "node-1", Status: meta.ReplicaActive}, {NodeID: "node-2", Status: st}}
					return s.UpdateFile(ctx, &f)
				})
				if err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, rec.SizeBytes+workers*increments, got.SizeBytes, "no increment is lost")
	require.Equal(t, int64(1+workers*increments), got.Version)
	require.Len(t, got.Replicas, 2)
	require.Equal(t, rec.Replicas[0], got.Replicas[0], "the copy nobody changed kept its row")
}

func testIdempotencyKey(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
	rec.IdempotencyKey = "client-upload-7"
	createFile(t, s, rec)
	createFile(t, s, newFile(2, nil))

	got, err := s.FileByIdempotencyKey(ctx, "client-upload-7")
	require.NoError(t, err)
	require.Equal(t, *rec, got)

	for _, key := range []string{"client-upload-8", ""} {
		_, err = s.FileByIdempotencyKey(ctx, key)
		requireKind(t, err, errs.NotFound)
	}
}

func testTouchFile(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	rec := createFile(t, s, newFile(1, nil))
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, s.TouchFile(ctx, rec.ID))
	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.True(t, got.UpdatedAt.After(rec.UpdatedAt), "TouchFile moves UpdatedAt")
	require.Equal(t, rec.Version, got.Version, "TouchFile keeps the version")
	got.UpdatedAt = rec.UpdatedAt
	require.Equal(t, *rec, got, "TouchFile changes nothing else")

	// A holder of the old version can still update.
	rec.Status = meta.FileDegraded
	require.NoError(t, s.UpdateFile(ctx, rec))

	for _, id := range []string{uuid.NewString(), "nope"} {
		requireKind(t, s.TouchFile(ctx, id), errs.NotFound)
	}
}

func testDeleteFile(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2")
	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-2": meta.ReplicaDeleting})
	rec.IdempotencyKey = "k"
	createFile(t, s, rec)
	other := createFile(t, s, newFile(2, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive}))

	require.NoError(t, s.DeleteFile(ctx, rec.ID))
	_, err := s.GetFile(ctx, rec.ID)
	requireKind(t, err, errs.NotFound)
	for node, want := range map[string][]string{"node-1": {other.ID}, "node-2": {}} {
		ids, err := s.FileIDsOnNode(ctx, node)
		require.NoError(t, err)
		require.ElementsMatch(t, want, ids, "the deleted file's copies went with it (%s)", node)
	}

	require.NoError(t, s.DeleteFile(ctx, rec.ID), "deleting an absent file is not an error")
	require.NoError(t, s.DeleteFile(ctx, "not-a-uuid"))

	again := newFile(3, nil)
	again.IdempotencyKey = "k"
	require.NoError(t, s.CreateFile(ctx, again), "a deleted file's idempotency key is free again")
}

func testListFiles(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	statuses := []meta.FileStatus{
		meta.FileActive, meta.FilePending, meta.FileDegraded, meta.FileDeleted,
		meta.FileRebalancing, meta.FileFailed, meta.FileActive, meta.FileActive,
	}
	created := make([]*meta.FileRecord, len(statuses))
	for i, st := range statuses {
		rec := newFile(int64(i), nil)
		rec.Status = st
		rec.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		created[i] = createFile(t, s, rec)
	}
	// Two files created in the same microsecond are ordered by ID, descending.
	tieA, tieB := newFile(90, nil), newFile(91, nil)
	tieA.CreatedAt, tieB.CreatedAt = base.Add(time.Hour), base.Add(time.Hour)
	createFile(t, s, tieA)
	createFile(t, s, tieB)
	first, second := tieA, tieB
	if second.ID > first.ID {
		first, second = second, first
	}

	ids := func(fs []meta.File) []string {
		out := make([]string, len(fs))
		for i, f := range fs {
			out[i] = f.ID
		}
		return out
	}
	visible := []string{first.ID, second.ID, created[7].ID, created[6].ID, created[5].ID, created[4].ID, created[2].ID, created[0].ID}

	cases := []struct {
		name  string
		q     meta.FileQuery
		want  []string
		total int
	}{
		{"default statuses, first page", meta.FileQuery{Limit: 3}, visible[:3], 8},
		{"default statuses, second page", meta.FileQuery{Offset: 3, Limit: 3}, visible[3:6], 8},
		{"default statuses, last page", meta.FileQuery{Offset: 6, Limit: 3}, visible[6:], 8},
		{"past the end", meta.FileQuery{Offset: 50, Limit: 3}, []string{}, 8},
		{"pending only", meta.FileQuery{Statuses: []meta.FileStatus{meta.FilePending}, Limit: 10}, []string{created[1].ID}, 1},
		{"deleted and failed", meta.FileQuery{Statuses: []meta.FileStatus{meta.FileDeleted, meta.FileFailed}, Limit: 10},
			[]string{created[5].ID, created[3].ID}, 2},
		{"every status", meta.FileQuery{Statuses: []meta.FileStatus{
			meta.FilePending, meta.FileActive, meta.FileDegraded, meta.FileRebalancing, meta.FileFailed, meta.FileDeleted,
		}, Limit: 1}, []string{first.ID}, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, total, err := s.ListFiles(ctxT(t), tc.q)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, tc.want, ids(got))
			require.Equal(t, tc.total, total)
		})
	}

	got, _, err := s.ListFiles(ctx, meta.FileQuery{Statuses: []meta.FileStatus{meta.FilePending}, Limit: 1})
	require.NoError(t, err)
	require.Equal(t, created[1].File, got[0], "listed files carry every field")

	for _, q := range []meta.FileQuery{
		{Limit: 0}, {Limit: -1}, {Offset: -1, Limit: 5},
		{Statuses: []meta.FileStatus{"LOST"}, Limit: 5},
	} {
		_, _, err := s.ListFiles(ctx, q)
		requireKind(t, err, errs.Invalid)
	}
}

func testFileIDsOnNode(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3")
	a := createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-2": meta.ReplicaActive}))
	b := createFile(t, s, newFile(2, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaFailed}))
	c := createFile(t, s, newFile(3, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaDeleting, "node-3": meta.ReplicaPending}))
	createFile(t, s, newFile(4, nil))

	cases := []struct {
		node string
		want []string
	}{
		{"node-1", []string{a.ID, b.ID, c.ID}},
		{"node-2", []string{a.ID}},
		{"node-3", []string{c.ID}},
		{"node-9", []string{}},
	}
	for _, tc := range cases {
		got, err := s.FileIDsOnNode(ctx, tc.node)
		require.NoError(t, err)
		require.NotNil(t, got)
		want := append([]string{}, tc.want...)
		slices.Sort(want)
		require.Equal(t, want, got, "copies of any status count, in ID order (%s)", tc.node)
	}
}

// testFilesAfter walks every file by ID in pages of every size from 1 to past
// the end: each page continues after the last ID of the one before, nothing
// is returned twice or skipped, every status is included, and each record
// carries its replicas.
func testFilesAfter(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2")
	want := map[string]meta.FileRecord{}
	statuses := []meta.FileStatus{meta.FilePending, meta.FileActive, meta.FileDegraded, meta.FileRebalancing, meta.FileFailed, meta.FileDeleted}
	for i, st := range statuses {
		replicas := map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive}
		if i%2 == 0 {
			replicas["node-2"] = meta.ReplicaFailed
		}
		rec := newFile(int64(i), replicas)
		rec.Status = st
		if st == meta.FilePending {
			rec.Checksum, rec.PrimaryNodeID = "", ""
			for j := range rec.Replicas {
				rec.Replicas[j].Status = meta.ReplicaPending
			}
		}
		createFile(t, s, rec)
		want[rec.ID] = *rec
	}
	createFile(t, s, newFile(9, nil))
	bare := 0
	ids := slices.Sorted(maps.Keys(want))
	for _, limit := range []int{1, 2, 3, len(ids) + 1, len(ids) + 5} {
		var got []string
		after := ""
		for {
			page, err := s.FilesAfter(ctx, after, limit)
			require.NoError(t, err)
			require.NotNil(t, page)
			require.LessOrEqual(t, len(page), limit)
			for _, rec := range page {
				require.Greater(t, rec.ID, after, "a page continues after its cursor, in ID order")
				after = rec.ID
				got = append(got, rec.ID)
				w, ok := want[rec.ID]
				if !ok {
					require.Empty(t, rec.Replicas, "the file created without copies has none")
					bare++
					continue
				}
				require.Equal(t, w.Status, rec.Status)
				require.Len(t, rec.Replicas, len(w.Replicas), "file %s", rec.ID)
				for _, c := range w.Replicas {
					r, ok := rec.Replica(c.NodeID)
					require.True(t, ok, "file %s lists its copy on %s", rec.ID, c.NodeID)
					require.Equal(t, c.Status, r.Status)
					require.Equal(t, rec.ID, r.FileID)
				}
				require.True(t, slices.IsSortedFunc(rec.Replicas, func(a, b meta.Replica) int { return strings.Compare(a.NodeID, b.NodeID) }))
				one, err := s.GetFile(ctx, rec.ID)
				require.NoError(t, err)
				require.Equal(t, one.Replicas, rec.Replicas, "a page's copies are the record's, every field")
			}
			if len(page) < limit {
				break
			}
		}
		require.Len(t, got, len(ids)+1, "page size %d: every file exactly once", limit)
		require.True(t, slices.IsSorted(got))
	}
	require.Equal(t, 5, bare, "the bare file was met once per walk")
	last := slices.Max(append(ids, ""))
	page, err := s.FilesAfter(ctx, "ffffffff-ffff-ffff-ffff-ffffffffffff", 10)
	require.NoError(t, err)
	require.Empty(t, page, "nothing sorts after the last possible id")
	page, err = s.FilesAfter(ctx, last, 10)
	require.NoError(t, err)
	for _, rec := range page {
		require.Greater(t, rec.ID, last)
	}
}

func testFilesAfterValidation(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	_, err := s.FilesAfter(ctx, "not-a-uuid", 10)
	requireKind(t, err, errs.Invalid)
	_, err = s.FilesAfter(ctx, "", 0)
	requireKind(t, err, errs.Invalid)
}

func testState(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	_, err := s.GetState(ctx, "sweep")
	requireKind(t, err, errs.NotFound)
	require.NoError(t, s.PutState(ctx, "sweep", `{"cursor":"a"}`))
	require.NoError(t, s.PutState(ctx, "other", "x"))
	v, err := s.GetState(ctx, "sweep")
	require.NoError(t, err)
	require.Equal(t, `{"cursor":"a"}`, v)
	require.NoError(t, s.PutState(ctx, "sweep", ""), "an empty value is a value")
	v, err = s.GetState(ctx, "sweep")
	require.NoError(t, err)
	require.Empty(t, v)
	v, err = s.GetState(ctx, "other")
	require.NoError(t, err)
	require.Equal(t, "x", v, "keys are independent")
	requireKind(t, s.PutState(ctx, "", "x"), errs.Invalid)
	_, err = s.GetState(ctx, "")
	requireKind(t, err, errs.Invalid)
}

func testFileIDsByStatus(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(st meta.FileStatus, updated time.Time) string {
		rec := newFile(1, nil)
		rec.Status, rec.CreatedAt, rec.UpdatedAt = st, t0, updated
		return createFile(t, s, rec).ID
	}
	old := mk(meta.FilePending, t0.Add(1*time.Minute))
	older := mk(meta.FileDegraded, t0)
	recent := mk(meta.FilePending, t0.Add(10*time.Minute))
	mk(meta.FileActive, t0)
	edge := mk(meta.FileDegraded, t0.Add(5*time.Minute))

	repairable := []meta.FileStatus{meta.FilePending, meta.FileDegraded}
	cases := []struct {
		name     string
		statuses []meta.FileStatus
		before   time.Time
		limit    int
		want     []string
	}{
		{"oldest first", repairable, t0.Add(5 * time.Minute), 10, []string{older, old}},
		{"before is strict", repairable, t0.Add(5*time.Minute + time.Microsecond), 10, []string{older, old, edge}},
		{"limit", repairable, t0.Add(time.Hour), 2, []string{older, old}},
		{"everything before", repairable, t0.Add(time.Hour), 10, []string{older, old, edge, recent}},
		{"one status", []meta.FileStatus{meta.FilePending}, t0.Add(time.Hour), 10, []string{old, recent}},
		{"no status", nil, t0.Add(time.Hour), 10, []string{}},
		{"nothing that old", repairable, t0, 10, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.FileIDsByStatus(ctxT(t), tc.statuses, tc.before, tc.limit)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := s.FileIDsByStatus(ctx, repairable, t0, 0)
	requireKind(t, err, errs.Invalid)
	_, err = s.FileIDsByStatus(ctx, []meta.FileStatus{"LOST"}, t0, 1)
	requireKind(t, err, errs.Invalid)
}

func testFileIDsInRanges(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	positions := []int64{0, 1, 10, 20, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	at := map[int64]string{}
	for _, p := range positions {
		at[p] = createFile(t, s, newFile(p, nil)).ID
	}
	ids := func(ps ...int64) []string {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			out = append(out, at[p])
		}
		return out
	}
	r := func(from, to int64) meta.PositionRange { return meta.PositionRange{From: from, To: to} }
	cases := []struct {
		name   string
		ranges []meta.PositionRange
		want   []string
	}{
		{"none", nil, ids()},
		{"from is exclusive, to inclusive", []meta.PositionRange{r(1, 20)}, ids(10, 20)},
		{"zero is reachable only by wrapping", []meta.PositionRange{r(0, 10)}, ids(1, 10)},
		{"empty interior", []meta.PositionRange{r(11, 19)}, ids()},
		{"wrapping", []meta.PositionRange{r(20, 1)}, ids(0, 1, 1<<40, math.MaxInt64-1, math.MaxInt64)},
		{"wrapping from the last position", []meta.PositionRange{r(math.MaxInt64, 0)}, ids(0)},
		{"to the last position", []meta.PositionRange{r(math.MaxInt64-1, math.MaxInt64)}, ids(math.MaxInt64)},
		{"from equal to to is the whole ring", []meta.PositionRange{r(10, 10)}, ids(positions...)},
		{"overlapping ranges list a file once", []meta.PositionRange{r(0, 20), r(5, 1<<40), r(19, 20)}, ids(1, 10, 20, 1<<40)},
		{"several disjoint ranges, in ring order", []meta.PositionRange{r(1<<40-1, 1<<40), r(0, 1)}, ids(1, 1<<40)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.FileIDsInRanges(ctxT(t), tc.ranges)
			require.NoError(t, err)
			require.NotNil(t, got)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := s.FileIDsInRanges(ctx, []meta.PositionRange{r(-1, 5)})
	requireKind(t, err, errs.Invalid)
}

// testFileIDsInManyRanges asks with as many ranges as a node join produces
// (one per virtual node and more), each catching exactly one file.
func testFileIDsInManyRanges(t *testing.T, s meta.Store) {
	const files = 400
	step := int64(math.MaxInt64 / files)
	var want []string
	var ranges []meta.PositionRange
	for i := range int64(files) {
		rec := createFile(t, s, newFile(i*step+step/2, nil))
		if i%2 == 0 {
			want = append(want, rec.ID)
			ranges = append(ranges, meta.PositionRange{From: i * step, To: i*step + step/2})
		}
	}
	got, err := s.FileIDsInRanges(ctxT(t), ranges)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func testCountFilesByStatus(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	counts, err := s.CountFilesByStatus(ctx)
	require.NoError(t, err)
	require.Len(t, counts, 6, "every status is reported, zero included")
	for st, n := range counts {
		require.Zero(t, n, st)
	}
	for st, n := range map[meta.FileStatus]int{meta.FileActive: 3, meta.FilePending: 1, meta.FileDeleted: 2} {
		for range n {
			rec := newFile(1, nil)
			rec.Status = st
			createFile(t, s, rec)
		}
	}
	counts, err = s.CountFilesByStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, map[meta.FileStatus]int{
		meta.FilePending: 1, meta.FileActive: 3, meta.FileDegraded: 0,
		meta.FileRebalancing: 0, meta.FileFailed: 0, meta.FileDeleted: 2,
	}, counts)
}

func testLeases(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	const long = time.Minute
	acquire := func(name, owner string) bool {
		t.Helper()
		ok, err := s.AcquireLease(ctx, name, owner, long)
		require.NoError(t, err)
		return ok
	}
	require.True(t, acquire("rebalance", "coord-a"), "a free lease is taken")
	require.False(t, acquire("rebalance", "coord-b"), "a held lease is refused to another owner")
	require.True(t, acquire("rebalance", "coord-a"), "the holder renews")
	require.True(t, acquire("repair", "coord-b"), "leases are independent by name")

	require.NoError(t, s.ReleaseLease(ctx, "rebalance", "coord-b"), "releasing another's lease is not an error")
	require.False(t, acquire("rebalance", "coord-b"), "and does not release it")

	require.NoError(t, s.ReleaseLease(ctx, "rebalance", "coord-a"))
	require.True(t, acquire("rebalance", "coord-b"), "a released lease is free")
	require.NoError(t, s.ReleaseLease(ctx, "never-taken", "coord-a"))
}

func testLeaseExpiry(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	// Long enough that the refusal below comes before expiry on a loaded
	// machine (the suite runs in parallel, under -race in CI).
	ok, err := s.AcquireLease(ctx, "rebalance", "coord-a", time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.AcquireLease(ctx, "rebalance", "coord-b", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "an unexpired lease is refused")
	require.Eventually(t, func() bool {
		ok, err := s.AcquireLease(ctx, "rebalance", "coord-b", time.Minute)
		return err == nil && ok
	}, 10*time.Second, 10*time.Millisecond, "an expired lease is taken by another owner")
	ok, err = s.AcquireLease(ctx, "rebalance", "coord-a", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "the former holder lost it")
}

func testPruneLeases(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	acquire := func(name, owner string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.AcquireLease(ctx, name, owner, ttl)
		require.NoError(t, err)
		return ok
	}
	require.True(t, acquire("left-behind", "dead-coord", time.Millisecond))
	require.True(t, acquire("held", "live-coord", time.Minute))
	time.Sleep(20 * time.Millisecond) // "left-behind" is now expired

	n, err := s.PruneLeases(ctx, time.Hour)
	require.NoError(t, err)
	require.Zero(t, n, "expired less than the grace ago: kept")
	n, err = s.PruneLeases(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the expired lease goes")
	n, err = s.PruneLeases(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n)
	require.False(t, acquire("held", "other-coord", time.Minute), "a live lease is untouched")
	require.True(t, acquire("left-behind", "other-coord", time.Minute), "the pruned name is free")

	_, err = s.PruneLeases(ctx, -time.Second)
	requireKind(t, err, errs.Invalid)
}

func testLeaseValidation(t *testing.T, s meta.Store) {
	cases := []struct {
		name, lease, owner string
		ttl                time.Duration
	}{
		{"empty name", "", "a", time.Second},
		{"empty owner", "l", "", time.Second},
		{"zero ttl", "l", "a", 0},
		{"negative ttl", "l", "a", -time.Second},
	}
	for _, tc := range cases {
		_, err := s.AcquireLease(ctxT(t), tc.lease, tc.owner, tc.ttl)
		requireKind(t, err, errs.Invalid)
	}
}

// testMarkNodeCopiesLost is a replaced disk: the node's ACTIVE copies turn
// FAILED, their files DEGRADED (REBALANCING and FAILED files keep their
// status), every changed file's version moves, and PENDING and DELETED
// files and other nodes' copies are left alone.
func testMarkNodeCopiesLost(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3")
	all := map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-2": meta.ReplicaActive, "node-3": meta.ReplicaActive}
	mk := func(st meta.FileStatus, replicas map[string]meta.ReplicaStatus) *meta.FileRecord {
		rec := newFile(1, replicas)
		rec.Status = st
		if st == meta.FilePending {
			rec.Checksum, rec.PrimaryNodeID = "", ""
		}
		return createFile(t, s, rec)
	}
	active := mk(meta.FileActive, all)
	moving := mk(meta.FileRebalancing, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-2": meta.ReplicaPending})
	degraded := mk(meta.FileDegraded, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
	elsewhere := mk(meta.FileActive, map[string]meta.ReplicaStatus{"node-2": meta.ReplicaActive, "node-3": meta.ReplicaActive})
	failedRow := mk(meta.FileDegraded, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaFailed, "node-2": meta.ReplicaActive})
	pending := mk(meta.FilePending, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaPending})
	deleted := mk(meta.FileDeleted, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})

	ids, err := s.MarkNodeCopiesLost(ctx, "node-1", "disk replaced")
	require.NoError(t, err)
	want := []string{active.ID, moving.ID, degraded.ID}
	slices.Sort(want)
	require.Equal(t, want, ids)

	get := func(id string) meta.FileRecord {
		rec, err := s.GetFile(ctx, id)
		require.NoError(t, err)
		return rec
	}
	for _, tc := range []struct {
		rec    *meta.FileRecord
		status meta.FileStatus
		reason string
	}{
		{active, meta.FileDegraded, "disk replaced"},
		{moving, meta.FileRebalancing, ""},
		{degraded, meta.FileDegraded, "disk replaced"},
	} {
		got := get(tc.rec.ID)
		require.Equal(t, tc.status, got.Status)
		require.Equal(t, tc.reason, got.StatusReason)
		require.Equal(t, tc.rec.Version+1, got.Version, "a writer holding the old record must re-read")
		r, _ := got.Replica("node-1")
		require.Equal(t, meta.ReplicaFailed, r.Status)
		for _, c := range got.Replicas {
			if c.NodeID != "node-1" {
				old, _ := tc.rec.Replica(c.NodeID)
				require.Equal(t, old.Status, c.Status, "other nodes' copies are untouched")
			}
		}
	}
	for _, rec := range []*meta.FileRecord{elsewhere, failedRow, pending, deleted} {
		got := get(rec.ID)
		require.Equal(t, rec.Version, got.Version, "file %s is not touched", rec.Status)
		require.Equal(t, rec.Status, got.Status)
	}
	requireKind(t, s.UpdateFile(ctx, active), errs.Conflict)

	ids, err = s.MarkNodeCopiesLost(ctx, "node-1", "again")
	require.NoError(t, err)
	require.Empty(t, ids, "nothing ACTIVE is left on the node")
}

func testEpochsBumpAndComplete(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	epochs := func() meta.Epochs {
		t.Helper()
		e, err := s.Epochs(ctx)
		require.NoError(t, err)
		return e
	}
	require.Equal(t, meta.Epochs{}, epochs(), "a new store starts at 0, 0")

	for want := int64(1); want <= 3; want++ {
		got, err := s.BumpMembershipEpoch(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	require.Equal(t, meta.Epochs{Membership: 3}, epochs())

	cases := []struct {
		name       string
		complete   int64
		rebalanced int64
	}{
		{"an older epoch", 2, 2},
		{"zero does not lower it", 0, 2},
		{"an epoch behind the last completed one does not lower it", 1, 2},
		{"the current epoch", 3, 3},
		{"a future epoch is capped by the membership epoch", 7, 3},
	}
	for _, tc := range cases {
		require.NoError(t, s.CompleteRebalance(ctx, tc.complete), tc.name)
		require.Equal(t, meta.Epochs{Membership: 3, Rebalanced: tc.rebalanced}, epochs(), tc.name)
	}

	requireKind(t, s.CompleteRebalance(ctx, -1), errs.Invalid)
	require.Equal(t, meta.Epochs{Membership: 3, Rebalanced: 3}, epochs(), "a refused completion changes nothing")

	// A bump after completion puts the rebalance behind again.
	got, err := s.BumpMembershipEpoch(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), got)
	require.Equal(t, meta.Epochs{Membership: 4, Rebalanced: 3}, epochs())
}

func testEpochsConcurrentBumps(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	const workers, bumps = 8, 25
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range bumps {
				e, err := s.BumpMembershipEpoch(ctx)
				if err != nil {
					errc <- err
					return
				}
				got[w] = append(got[w], e)
				// Completions race the bumps; none may pass the membership
				// epoch or undo a higher one.
				if i%5 == 0 {
					if err := s.CompleteRebalance(ctx, e); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	var all []int64
	for _, g := range got {
		require.True(t, slices.IsSorted(g), "one caller's bumps rise: %v", g)
		all = append(all, g...)
	}
	slices.Sort(all)
	want := make([]int64, workers*bumps)
	for i := range want {
		want[i] = int64(i + 1)
	}
	require.Equal(t, want, all, "N concurrent bumps give N distinct values, 1 to N")
	e, err := s.Epochs(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(workers*bumps), e.Membership)
	require.LessOrEqual(t, e.Rebalanced, e.Membership)
	require.Positive(t, e.Rebalanced)
}

func testTimestampsRoundTrip(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	exact := time.Date(2026, 7, 14, 9, 26, 53, 589793238, zone)
	want := time.Date(2026, 7, 14, 3, 56, 53, 589793000, time.UTC)

	n := newNode("node-1")
	n.RegisteredAt, n.LastCheckAt, n.LastHealthyAt = exact, &exact, &exact
	require.NoError(t, s.CreateNode(ctx, n))
	require.Equal(t, want, n.RegisteredAt, "the caller's node is normalised to what is stored")
	got, err := s.GetNode(ctx, "node-1")
	require.NoError(t, err)
	require.Equal(t, want, got.RegisteredAt)
	require.Equal(t, want, *got.LastCheckAt)
	require.Equal(t, want, *got.LastHealthyAt)
	require.Equal(t, time.UTC, got.RegisteredAt.Location())

	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
	rec.CreatedAt, rec.UpdatedAt = exact, exact.Add(time.Nanosecond)
	createFile(t, s, rec)
	require.Equal(t, want, rec.CreatedAt)
	require.Equal(t, want, rec.UpdatedAt)
	f, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, want, f.CreatedAt)
	require.Equal(t, want, f.UpdatedAt)
	require.Equal(t, time.UTC, f.CreatedAt.Location())
	require.Equal(t, time.UTC, f.Replicas[0].CreatedAt.Location())
	require.Equal(t, f.Replicas[0].CreatedAt, f.Replicas[0].CreatedAt.Truncate(time.Microsecond))

	// Stored times sort correctly in SQL across zones and sub-second parts.
	before, err := s.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileActive}, want.Add(time.Microsecond), 10)
	require.NoError(t, err)
	require.Equal(t, []string{rec.ID}, before)
	before, err = s.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileActive}, exact, 10)
	require.NoError(t, err)
	require.Empty(t, before, "updatedBefore is compared at microsecond precision")
}

// testDurability builds files whose healthy copies are known by hand: node-4
// is down, so its ACTIVE copies do not count, and neither do copies that are
// not ACTIVE nor files that are PENDING or DELETED.
func testDurability(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3", "node-4")
	healthy := []string{"node-3", "node-1", "node-2", "node-1"} // order and duplicates do not matter
	A, P, F, D := meta.ReplicaActive, meta.ReplicaPending, meta.ReplicaFailed, meta.ReplicaDeleting
	mk := func(status meta.FileStatus, size int64, copies map[string]meta.ReplicaStatus) {
		rec := newFile(1, copies)
		rec.Status, rec.SizeBytes = status, size
		createFile(t, s, rec)
	}
	// Three healthy copies: not at risk.
	mk(meta.FileActive, 1, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A, "node-3": A})
	mk(meta.FileRebalancing, 2, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A, "node-3": A, "node-4": A})
	// Two: the ACTIVE copy on the down node-4 is not a healthy one.
	mk(meta.FileActive, 10, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A, "node-4": A})
	mk(meta.FileDegraded, 20, map[string]meta.ReplicaStatus{"node-2": A, "node-3": A, "node-1": P})
	// One: copies that are FAILED or being deleted do not count.
	mk(meta.FileDegraded, 100, map[string]meta.ReplicaStatus{"node-1": A, "node-2": F, "node-3": D})
	// None.
	mk(meta.FileFailed, 1000, map[string]meta.ReplicaStatus{"node-4": A, "node-1": F})
	mk(meta.FileFailed, 2000, nil)
	// Not readable: counted nowhere, whatever their copies.
	mk(meta.FilePending, 5, map[string]meta.ReplicaStatus{"node-1": P})
	mk(meta.FilePending, 6, map[string]meta.ReplicaStatus{"node-1": A})
	mk(meta.FileDeleted, 7, map[string]meta.ReplicaStatus{"node-2": D})
	// A file whose own replication factor is 2 has all it asked for.
	rf2 := newFile(1, map[string]meta.ReplicaStatus{"node-1": A, "node-3": A})
	rf2.ReplicationFactor, rf2.SizeBytes = 2, 10000
	createFile(t, s, rf2)

	d, err := s.Durability(ctx, healthy)
	require.NoError(t, err)
	require.Equal(t, map[int]int{3: 2, 2: 3, 1: 1, 0: 2}, d.FilesByCopies)
	require.Equal(t, int64(10+20+100+1000+2000), d.BytesAtRisk)
	require.Equal(t, 8, d.Files())
	lowest, ok := d.MinCopies()
	require.True(t, ok)
	require.Zero(t, lowest)
	require.Equal(t, []meta.NodeDurability{
		{NodeID: "node-1", FilesLeftWithOneCopy: 2, FilesLeftWithNoCopy: 1},
		{NodeID: "node-2", FilesLeftWithOneCopy: 2, FilesLeftWithNoCopy: 0},
		{NodeID: "node-3", FilesLeftWithOneCopy: 2, FilesLeftWithNoCopy: 0},
	}, d.Nodes)

	// node-4 comes back: its copies count again.
	d, err = s.Durability(ctx, append(healthy, "node-4"))
	require.NoError(t, err)
	require.Equal(t, map[int]int{4: 1, 3: 2, 2: 2, 1: 2, 0: 1}, d.FilesByCopies)
	require.Equal(t, int64(20+100+1000+2000), d.BytesAtRisk)
	require.Equal(t, []meta.NodeDurability{
		{NodeID: "node-1", FilesLeftWithOneCopy: 1, FilesLeftWithNoCopy: 1},
		{NodeID: "node-2", FilesLeftWithOneCopy: 1, FilesLeftWithNoCopy: 0},
		{NodeID: "node-3", FilesLeftWithOneCopy: 2, FilesLeftWithNoCopy: 0},
		{NodeID: "node-4", FilesLeftWithOneCopy: 0, FilesLeftWithNoCopy: 1},
	}, d.Nodes)

	// With no healthy node, every readable file has no healthy copy.
	d, err = s.Durability(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, map[int]int{0: 8}, d.FilesByCopies)
	require.Empty(t, d.Nodes)
}

// testDurabilityEmpty: no readable file, and a healthy node with nothing on
// it still has its (zero) entry.
func testDurabilityEmpty(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1")
	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
	rec.Status = meta.FileDeleted
	createFile(t, s, rec)
	d, err := s.Durability(ctx, []string{"node-1", "node-9"})
	require.NoError(t, err)
	require.Empty(t, d.FilesByCopies)
	require.Zero(t, d.BytesAtRisk)
	_, ok := d.MinCopies()
	require.False(t, ok)
	require.Equal(t, []meta.NodeDurability{{NodeID: "node-1"}, {NodeID: "node-9"}}, d.Nodes)
}

// testDurabilityFollowsWrites changes one file's copies through every method
// that can, and reads its healthy copies back after each: a store that keeps
// a count of ACTIVE copies must move it on every such write.
func testDurabilityFollowsWrites(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3", "node-4")
	healthy := []string{"node-1", "node-2", "node-3", "node-4"}
	copies := func() map[int]int {
		t.Helper()
		d, err := s.Durability(ctx, healthy)
		require.NoError(t, err)
		return d.FilesByCopies
	}
	A, F := meta.ReplicaActive, meta.ReplicaFailed
	rec := createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": A, "node-2": A, "node-3": A}))
	require.Equal(t, map[int]int{3: 1}, copies(), "CreateFile")

	set := func(node string, st meta.ReplicaStatus) {
		for i := range rec.Replicas {
			if rec.Replicas[i].NodeID == node {
				rec.Replicas[i].Status = st
			}
		}
	}
	set("node-2", F)
	require.NoError(t, s.UpdateFile(ctx, rec))
	require.Equal(t, map[int]int{2: 1}, copies(), "UpdateFile: a copy fails")

	require.NoError(t, s.UpdateFile(ctx, rec))
	require.Equal(t, map[int]int{2: 1}, copies(), "UpdateFile: nothing changes")

	rec.Replicas = slices.DeleteFunc(rec.Replicas, func(r meta.Replica) bool { return r.NodeID == "node-3" })
	rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: "node-4", Status: A})
	require.NoError(t, s.UpdateFile(ctx, rec))
	require.Equal(t, map[int]int{2: 1}, copies(), "UpdateFile: a copy moves")

	set("node-2", A)
	require.NoError(t, s.UpdateFile(ctx, rec))
	require.Equal(t, map[int]int{3: 1}, copies(), "UpdateFile: a copy is back")

	_, err := s.MarkNodeCopiesLost(ctx, "node-1", "disk replaced")
	require.NoError(t, err)
	require.Equal(t, map[int]int{2: 1}, copies(), "MarkNodeCopiesLost")

	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	got.Status = meta.FileDeleted
	require.NoError(t, s.UpdateFile(ctx, &got))
	require.Empty(t, copies(), "a DELETED file is not counted")
	got.Status = meta.FileDegraded
	require.NoError(t, s.UpdateFile(ctx, &got))
	require.Equal(t, map[int]int{2: 1}, copies())

	require.NoError(t, s.DeleteFile(ctx, rec.ID))
	require.Empty(t, copies(), "DeleteFile")
}

func testCanceledContext(t *testing.T, s meta.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.GetFile(ctx, uuid.NewString())
	require.Error(t, err)
	require.True(t, errors.Is(err, context.Canceled), "the cause is kept: %v", err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
}

// RunBenchmarks measures the hot paths of an upload and a download:
// CreateFile, GetFile and UpdateFile of a file with three copies.
func RunBenchmarks(b *testing.B, open func(b *testing.B) meta.Store) {
	setup := func(b *testing.B) (meta.Store, func(i int) *meta.FileRecord) {
		s := open(b)
		ctx := context.Background()
		for _, id := range []string{"node-1", "node-2", "node-3"} {
			require.NoError(b, s.CreateNode(ctx, newNode(id)))
		}
		return s, func(i int) *meta.FileRecord {
			return newFile(int64(i), map[string]meta.ReplicaStatus{
				"node-1": meta.ReplicaActive, "node-2": meta.ReplicaActive, "node-3": meta.ReplicaPending,
			})
		}
	}
	b.Run("CreateFile", func(b *testing.B) {
		s, mk := setup(b)
		ctx := context.Background()
		i := 0
		for b.Loop() {
			if err := s.CreateFile(ctx, mk(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("GetFile", func(b *testing.B) {
		s, mk := setup(b)
		ctx := context.Background()
		ids := make([]string, 100)
		for i := range ids {
			rec := mk(i)
			require.NoError(b, s.CreateFile(ctx, rec))
			ids[i] = rec.ID
		}
		i := 0
		for b.Loop() {
			if _, err := s.GetFile(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("UpdateFile", func(b *testing.B) {
		s, mk := setup(b)
		ctx := context.Background()
		rec := mk(0)
		require.NoError(b, s.CreateFile(ctx, rec))
		statuses := []meta.ReplicaStatus{meta.ReplicaPending, meta.ReplicaActive}
		i := 0
		for b.Loop() {
			// A typical transition: one copy changes state, the file's status with it.
			rec.Replicas[2].Status = statuses[i%2]
			rec.Status = []meta.FileStatus{meta.FileDegraded, meta.FileActive}[i%2]
			if err := s.UpdateFile(ctx, rec); err != nil {
				b.Fatal(fmt.Errorf("update %d: %w", i, err))
			}
			i++
		}
	})
}

// testFileWritesAreReadBack reads a file's record before and after each
// method that changes one: a store that caches records (redisx.CachedStore,
// localcache) fails it unless every such method drops what it cached.
func testFileWritesAreReadBack(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2")
	get := func(id string) (meta.FileRecord, error) { return s.GetFile(ctx, id) }
	mustGet := func(id string) meta.FileRecord {
		t.Helper()
		rec, err := get(id)
		require.NoError(t, err)
		return rec
	}

	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-2": meta.ReplicaActive})
	_, err := get(rec.ID)
	requireKind(t, err, errs.NotFound)
	createFile(t, s, rec)
	require.Equal(t, rec.Version, mustGet(rec.ID).Version, "CreateFile is read back")

	rec.StatusReason = "updated"
	require.NoError(t, s.UpdateFile(ctx, rec))
	require.Equal(t, "updated", mustGet(rec.ID).StatusReason, "UpdateFile is read back")

	before := mustGet(rec.ID)
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, s.TouchFile(ctx, rec.ID))
	require.True(t, mustGet(rec.ID).UpdatedAt.After(before.UpdatedAt), "TouchFile is read back")

	ids, err := s.MarkNodeCopiesLost(ctx, "node-1", "disk replaced")
	require.NoError(t, err)
	require.Equal(t, []string{rec.ID}, ids)
	r, _ := mustGet(rec.ID).Replica("node-1")
	require.Equal(t, meta.ReplicaFailed, r.Status, "MarkNodeCopiesLost is read back")

	require.NoError(t, s.DeleteFile(ctx, rec.ID))
	_, err = get(rec.ID)
	requireKind(t, err, errs.NotFound)
}

// StoreMethods are the names of meta.Store's methods, sorted. A store that
// embeds meta.Store and overrides some methods compares its own list with
// this one in a test, so that a method added to meta.Store makes its author
// decide whether the wrapper must override it.
func StoreMethods() []string {
	st := reflect.TypeFor[meta.Store]()
	names := make([]string, 0, st.NumMethod())
	for i := range st.NumMethod() {
		names = append(names, st.Method(i).Name)
	}
	return names
}
