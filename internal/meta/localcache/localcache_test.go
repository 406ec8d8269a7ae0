package localcache

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
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
	rec := newActiveFile(t, s.Store, "n1") // written behind the cache: the first read misses

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
	a, b, d := newActiveFile(t, s.Store, "n1"), newActiveFile(t, s.Store, "n1"), newActiveFile(t, s.Store, "n1")
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
	rec := newActiveFile(t, base, "n1") // behind the cache, so that the read goes to the store

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
	cached := []string{"GetFile", "CreateFile", "UpdateFile", "UpdateFileAndPutObject", "CreateFileAndPutObject", "TouchFile", "DeleteFile", "MarkNodeCopiesLost",
		"FinishPart", "CompleteSession", "DeleteSession"}
	passThrough := []string{
		"Ping", "Close", "CreateNode", "GetNode", "ListNodes", "UpdateNode", "FileByIdempotencyKey", "ListFiles",
		"FileIDsOnNode", "FileIDsByStatus", "FileIDsInRanges", "CountFilesByStatus", "AcquireLease", "PruneLeases",
		"ReleaseLease", "FilesAfter", "GetState", "PutState", "BumpMembershipEpoch", "Epochs", "CompleteRebalance",
		"Durability", "ZoneDurability", "ChunksOf", "CreateSession", "GetSession", "ListSessions", "ExpiredSessions", "BeginPart",
		"FileIDsByRisk", "RepairQueue",
	}
	require.ElementsMatch(t, metatest.StoreMethods(), append(cached, passThrough...))
}

// requireSameAsStore checks that the cache answers id with exactly what the
// store underneath holds.
func requireSameAsStore(t *testing.T, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	want, err := s.Store.GetFile(ctx, id)
	require.NoError(t, err)
	got, err := s.GetFile(ctx, id)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestAWriteKeepsTheRecordItWrote(t *testing.T) {
	ctx := context.Background()
	s, c := newCached(t, openSQLite(t), 10)
	for _, n := range []string{"n1", "n2", "n3"} {
		addNode(t, s, n)
	}
	id := uuid.NewString()
	rec := &meta.FileRecord{File: meta.File{
		ID: id, Name: "f", ContentType: "text/plain", SizeBytes: 4, Status: meta.FilePending,
		ReplicationFactor: 3, RingPosition: ring.Position(id),
	}, Replicas: []meta.Replica{ // not in node order: the store sorts them
		{NodeID: "n3", Status: meta.ReplicaPending}, {NodeID: "n1", Status: meta.ReplicaPending},
	}}
	require.NoError(t, s.CreateFile(ctx, rec))
	require.Zero(t, s.Len(), "a PENDING record is not kept")

	rec.Status, rec.PrimaryNodeID, rec.Checksum = meta.FileActive, "n1", "ab"
	rec.Replicas[0].Status, rec.Replicas[1].Status = meta.ReplicaActive, meta.ReplicaFailed
	rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: "n2", Status: meta.ReplicaActive})
	rec.Chunks = []meta.FileRecord{{}} // the file service's; the store's reads have none
	require.NoError(t, s.UpdateFile(ctx, rec))
	rec.Replicas[0].NodeID = "scribbled" // the caller's copy stays the caller's
	requireSameAsStore(t, s, id)
	require.EqualValues(t, 1, c.hits.Load(), "the first read after the update is a hit")
	require.Zero(t, c.misses.Load())

	created := newActiveFile(t, s, "n2")
	requireSameAsStore(t, s, created.ID)
	require.EqualValues(t, 2, c.hits.Load(), "so is the first read after an ACTIVE CreateFile")

	stale := rules.CloneRecord(created)
	require.NoError(t, s.UpdateFile(ctx, created))
	stale.StatusReason = "never stored"
	require.True(t, errs.Is(s.UpdateFile(ctx, &stale), errs.Conflict))
	require.Equal(t, 1, s.Len(), "a failed write keeps nothing")
	requireSameAsStore(t, s, created.ID)
}

// gatedStore can hold a method before or after the store runs it, until
// released: after, it is a write that has committed but not yet returned.
type gatedStore struct {
	meta.Store
	mu    sync.Mutex
	gates map[string]*gate // by "Method:before" or "Method:after"; each holds once
}

type gate struct{ reached, release chan struct{} }

func newGated(t *testing.T) *gatedStore {
	return &gatedStore{Store: openSQLite(t), gates: map[string]*gate{}}
}

func (g *gatedStore) arm(point string) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := &gate{reached: make(chan struct{}), release: make(chan struct{})}
	g.gates[point] = gt
	return gt
}

func (g *gatedStore) pass(point string) {
	g.mu.Lock()
	gt := g.gates[point]
	delete(g.gates, point)
	g.mu.Unlock()
	if gt != nil {
		close(gt.reached)
		<-gt.release
	}
}

func (g *gatedStore) UpdateFile(ctx context.Context, rec *meta.FileRecord) error {
	g.pass("UpdateFile:before")
	err := g.Store.UpdateFile(ctx, rec)
	g.pass("UpdateFile:after")
	return err
}

func (g *gatedStore) MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error) {
	g.pass("MarkNodeCopiesLost:before")
	ids, err := g.Store.MarkNodeCopiesLost(ctx, nodeID, reason)
	g.pass("MarkNodeCopiesLost:after")
	return ids, err
}

// Two updates of one record whose calls overlap: the first to commit is the
// last to return, and must not leave its older record cached.
func TestOverlappingWritesOfOneRecordKeepNeither(t *testing.T) {
	ctx := context.Background()
	base := newGated(t)
	s, _ := newCached(t, base, 10)
	addNode(t, s, "n1")
	rec := newActiveFile(t, s, "n1")

	held := base.arm("UpdateFile:after")
	first := rules.CloneRecord(rec)
	first.StatusReason = "first"
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, s.UpdateFile(ctx, &first)) })
	<-held.reached // committed, not yet returned

	second := rules.CloneRecord(&first)
	second.StatusReason = "second"
	require.NoError(t, s.UpdateFile(ctx, &second))
	close(held.release)
	wg.Wait()

	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, "second", got.StatusReason)
	requireSameAsStore(t, s, rec.ID)
}

// An update that commits before MarkNodeCopiesLost commits but returns after
// it: what the update wrote is no longer what the store holds.
func TestAWriteOvertakenByAWholesaleWriteIsNotKept(t *testing.T) {
	ctx := context.Background()
	base := newGated(t)
	s, _ := newCached(t, base, 10)
	addNode(t, s, "n1")
	rec := newActiveFile(t, s, "n1")

	lostBefore := base.arm("MarkNodeCopiesLost:before")
	lostAfter := base.arm("MarkNodeCopiesLost:after")
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := s.MarkNodeCopiesLost(ctx, "n1", "disk replaced")
		require.NoError(t, err)
	})
	<-lostBefore.reached

	update := base.arm("UpdateFile:after")
	updated := make(chan error)
	go func() {
		rec.StatusReason = "updated"
		updated <- s.UpdateFile(ctx, rec)
	}()
	<-update.reached // the update has committed
	close(lostBefore.release)
	<-lostAfter.reached // and so has MarkNodeCopiesLost, after it
	close(update.release)
	require.NoError(t, <-updated)
	requireSameAsStore(t, s, rec.ID)
	close(lostAfter.release)
	wg.Wait()
	got, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	r, _ := got.Replica("n1")
	require.Equal(t, meta.ReplicaFailed, r.Status)
}

// Many writers and readers of a few records, with wholesale writes among
// them (run with -race): whatever order the calls return in, the cache ends
// holding what the store holds.
func TestConcurrentWritesLeaveTheStoresRecords(t *testing.T) {
	ctx := context.Background()
	s, _ := newCached(t, openSQLite(t), 10)
	addNode(t, s, "n1")
	addNode(t, s, "n2")
	ids := make([]string, 3)
	for i := range ids {
		ids[i] = newActiveFile(t, s, "n1").ID
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 40 {
				id := ids[(w+i)%len(ids)]
				rec, err := s.GetFile(ctx, id)
				require.NoError(t, err)
				rec.StatusReason = fmt.Sprintf("writer %d, write %d", w, i)
				if err := s.UpdateFile(ctx, &rec); err != nil {
					require.True(t, errs.Is(err, errs.Conflict), "%v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_, err := s.MarkNodeCopiesLost(ctx, "n2", "no copies there")
			require.NoError(t, err)
			require.NoError(t, s.TouchFile(ctx, ids[0]))
		}
	})
	wg.Wait()
	for _, id := range ids {
		requireSameAsStore(t, s, id)
	}
}
