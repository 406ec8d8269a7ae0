package localcache

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metatest"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/ring"
)

func openSQLite(t *testing.T) meta.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// The cached store meets the whole store specification: a cache that served
// a stale record after any write would fail it.
func TestConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		return New(openSQLite(t), Options{Entries: 100})
	})
}

type counted struct{ hits, misses atomic.Int64 }

func newCached(t *testing.T, base meta.Store, entries int) (*Store, *counted) {
	c := &counted{}
	s := New(base, Options{Entries: entries, Hits: func() { c.hits.Add(1) }, Misses: func() { c.misses.Add(1) }})
	return s.(*Store), c
}

func newActiveFile(t *testing.T, s meta.Store, node string) *meta.FileRecord {
	t.Helper()
	id := uuid.NewString()
	rec := &meta.FileRecord{File: meta.File{
		ID: id, Name: "f", ContentType: "application/octet-stream", SizeBytes: 1,
		Checksum: "0000000000000000000000000000000000000000000000000000000000000000",
		Status:   meta.FileActive, PrimaryNodeID: node, ReplicationFactor: 1, RingPosition: ring.Position(id),
	}, Replicas: []meta.Replica{{FileID: id, NodeID: node, Status: meta.ReplicaActive}}}
	require.NoError(t, s.CreateFile(context.Background(), rec))
	return rec
}

func addNode(t *testing.T, s meta.Store, id string) {
	require.NoError(t, s.CreateNode(context.Background(), &meta.Node{ID: id, Host: id, Port: 1, Status: meta.NodeHealthy}))
}

func TestRepeatedReadsAreServedFromMemoryAndWritesAreSeen(t *testing.T) {
	ctx := context.Background()
	s, c := newCached(t, openSQLite(t), 10)
	addNode(t, s, "n1")
	addNode(t, s, "n2")
	rec := newActiveFile(t, s, "n1")

	first, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	first.Replicas[0].NodeID = "scribbled" // a caller's change stays the caller's
	second, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, "n1", second.Replicas[0].NodeID)
	require.EqualValues(t, 1, c.misses.Load())
	require.EqualValues(t, 1, c.hits.Load())

	second.Replicas = append(second.Replicas, meta.Replica{FileID: rec.ID, NodeID: "n2", Status: meta.ReplicaActive})
	require.NoError(t, s.UpdateFile(ctx, &second))
	third, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Len(t, third.Replicas, 2, "an update is visible at once")

	require.NoError(t, s.TouchFile(ctx, rec.ID))
	touched, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.True(t, touched.UpdatedAt.After(third.UpdatedAt) || touched.UpdatedAt.Equal(third.UpdatedAt))
	require.Greater(t, touched.Version, int64(0))

	require.NoError(t, s.DeleteFile(ctx, rec.ID))
	_, err = s.GetFile(ctx, rec.ID)
	require.True(t, errs.Is(err, errs.NotFound), "a deleted row is gone from the cache too: %v", err)
}

func TestPendingRecordsAreNotKept(t *testing.T) {
	ctx := context.Background()
	s, c := newCached(t, openSQLite(t), 10)
	addNode(t, s, "n1")
	rec := newActiveFile(t, s, "n1")
	rec.Status = meta.FilePending
	require.NoError(t, s.UpdateFile(ctx, rec))
	for range 3 {
		_, err := s.GetFile(ctx, rec.ID)
		require.NoError(t, err)
	}
	require.Zero(t, c.hits.Load())
	require.Zero(t, s.Len())
}

func TestLeastRecentlyUsedRecordIsDropped(t *testing.T) {
	ctx := context.Background()
	s, c := newCached(t, openSQLite(t), 2)
	addNode(t, s, "n1")
	a, b, d := newActiveFile(t, s, "n1"), newActiveFile(t, s, "n1"), newActiveFile(t, s, "n1")
	for _, id := range []string{a.ID, b.ID, a.ID, d.ID} { // b is the least recent when d arrives
		_, err := s.GetFile(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, 2, s.Len())
	hits := c.hits.Load()
	_, err := s.GetFile(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, hits+1, c.hits.Load(), "a was kept")
	_, err = s.GetFile(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, hits+1, c.hits.Load(), "b was dropped")
}

// slowStore holds GetFile until released, returning what the store held when
// the read began: a read that overlaps a write.
type slowStore struct {
	meta.Store
	started chan struct{}
	release chan struct{}
	hold    atomic.Bool
}

func (s *slowStore) GetFile(ctx context.Context, id string) (meta.FileRecord, error) {
	rec, err := s.Store.GetFile(ctx, id)
	if s.hold.Load() {
		s.started <- struct{}{}
		<-s.release
	}
	return rec, err
}

func TestAReadOverlappingAWriteIsNotKept(t *testing.T) {
	ctx := context.Background()
	base := &slowStore{Store: openSQLite(t), started: make(chan struct{}), release: make(chan struct{})}
	s, _ := newCached(t, base, 10)
	addNode(t, s, "n1")
	rec := newActiveFile(t, s, "n1")

	base.hold.Store(true)
	var wg sync.WaitGroup
	var stale meta.FileRecord
	wg.Go(func() {
		var err error
		stale, err = s.GetFile(ctx, rec.ID)
		require.NoError(t, err)
	})
	<-base.started // the read has the old record in hand
	rec.Status, rec.StatusReason = meta.FileDegraded, "1 of 3 copies written"
	require.NoError(t, s.UpdateFile(ctx, rec))
	close(base.release)
	wg.Wait()
	base.hold.Store(false)
	require.Equal(t, meta.FileActive, stale.Status, "the overlapping read saw the old row")

	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, got.Status, "and did not leave it in the cache")
}

func TestZeroEntriesIsNoCache(t *testing.T) {
	base := openSQLite(t)
	require.Same(t, base, New(base, Options{Entries: 0}))
}

// TestEveryStoreMethodIsDecided: Store embeds meta.Store, so a method added
// there would pass through unseen. Whoever adds one decides here whether it
// changes file records (Store must override it and drop what it cached, and
// FileWritesAreReadBack in metatest must cover it) or passes through.
func TestEveryStoreMethodIsDecided(t *testing.T) {
	cached := []string{"GetFile", "CreateFile", "UpdateFile", "TouchFile", "DeleteFile", "MarkNodeCopiesLost",
		"FinishPart", "CompleteSession", "DeleteSession"}
	passThrough := []string{
		"Ping", "Close", "CreateNode", "GetNode", "ListNodes", "UpdateNode", "FileByIdempotencyKey", "ListFiles",
		"FileIDsOnNode", "FileIDsByStatus", "FileIDsInRanges", "CountFilesByStatus", "AcquireLease", "PruneLeases",
		"ReleaseLease", "FilesAfter", "GetState", "PutState", "BumpMembershipEpoch", "Epochs", "CompleteRebalance",
		"Durability", "ChunksOf", "CreateSession", "GetSession", "ListSessions", "ExpiredSessions", "BeginPart",
		"FileIDsByRisk", "RepairQueue",
	}
	require.ElementsMatch(t, metatest.StoreMethods(), append(cached, passThrough...))
}
