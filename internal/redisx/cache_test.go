package redisx

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metatest"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

// TestCachedStoreConformance holds the cached store to the whole meta.Store
// specification: the cache must never change an answer.
func TestCachedStoreConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		return NewCachedStore(openSQLite(t), sharedClient(t, Options{}), CacheOptions{})
	})
}

// cachedNamespace is a coordinator's view with Redis: file records through
// the cache, the namespace (which Redis does not cache) from the store.
type cachedNamespace struct {
	*CachedStore
	meta.Namespace
}

// TestCachedStoreNamespaceConformance holds the cached store to the
// namespace specification too, whose final writes (UpdateFileAndPutObject)
// change file records.
func TestCachedStoreNamespaceConformance(t *testing.T) {
	metatest.RunNamespace(t, func(t *testing.T) metatest.NamespaceStore {
		st := openSQLite(t)
		return cachedNamespace{NewCachedStore(st, sharedClient(t, Options{}), CacheOptions{}), st}
	})
}

type cacheFixture struct {
	store *countingStore
	cache *CachedStore
	c     *Client
	n     *counters
}

func newCacheFixture(t *testing.T, c *Client, n *counters, ttl time.Duration) *cacheFixture {
	t.Helper()
	store := &countingStore{Store: openSQLite(t)}
	addNodes(t, store, "node-1", "node-2", "node-3")
	cache := NewCachedStore(store, c, CacheOptions{TTL: ttl, OnHit: n.onHit, OnMiss: n.onMiss})
	return &cacheFixture{store: store, cache: cache, c: c, n: n}
}

func sharedCacheFixture(t *testing.T, ttl time.Duration) *cacheFixture {
	var n counters
	return newCacheFixture(t, sharedClient(t, Options{OnError: n.onError}), &n, ttl)
}

// cached is what Redis holds for id, or nil.
func (f *cacheFixture) cached(t *testing.T, id string) *meta.FileRecord {
	t.Helper()
	raw, err := f.c.rdb.Get(ctxT(t), f.cache.recordKey(id)).Result()
	if err != nil {
		return nil
	}
	var rec meta.FileRecord
	require.NoError(t, json.Unmarshal([]byte(raw), &rec))
	return &rec
}

func TestCacheHit(t *testing.T) {
	f := sharedCacheFixture(t, time.Minute)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)

	first, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	second, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)

	require.Equal(t, int64(1), f.store.gets.Load(), "the second read is answered by Redis")
	require.Equal(t, first, second, "the cached record is the stored one, field for field")
	require.Equal(t, int64(1), f.n.hits.Load())
	require.Equal(t, int64(1), f.n.misses.Load())
	require.Zero(t, f.n.errors.Load())
}

func TestCacheTTL(t *testing.T) {
	f := sharedCacheFixture(t, 90*time.Second)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	_, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)

	ttl, err := f.c.rdb.PTTL(ctx, f.cache.recordKey(rec.ID)).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 80*time.Second, "the record expires after the configured TTL")
	require.LessOrEqual(t, ttl, 90*time.Second)
}

func TestCacheExpiry(t *testing.T) {
	f := sharedCacheFixture(t, 100*time.Millisecond)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	_, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.cached(t, rec.ID) == nil }, 5*time.Second, 20*time.Millisecond)
	_, err = f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), f.store.gets.Load(), "an expired record is read from the store again")
}

// TestEveryWriteInvalidates changes a cached file through each writing
// method and checks that the next read sees the change.
func TestEveryWriteInvalidates(t *testing.T) {
	cases := []struct {
		name  string
		write func(ctx context.Context, s meta.Store, rec *meta.FileRecord) error
		check func(t *testing.T, got meta.FileRecord, err error, before meta.FileRecord)
	}{
		{
			name: "UpdateFile",
			write: func(ctx context.Context, s meta.Store, rec *meta.FileRecord) error {
				rec.Status = meta.FileDegraded
				rec.Replicas = rec.Replicas[:2]
				return s.UpdateFile(ctx, rec)
			},
			check: func(t *testing.T, got meta.FileRecord, err error, before meta.FileRecord) {
				require.NoError(t, err)
				require.Equal(t, meta.FileDegraded, got.Status)
				require.Len(t, got.Replicas, 2)
				require.Equal(t, before.Version+1, got.Version)
			},
		},
		{
			name: "TouchFile",
			write: func(ctx context.Context, s meta.Store, rec *meta.FileRecord) error {
				time.Sleep(2 * time.Millisecond) // a later UpdatedAt than creation
				return s.TouchFile(ctx, rec.ID)
			},
			check: func(t *testing.T, got meta.FileRecord, err error, before meta.FileRecord) {
				require.NoError(t, err)
				require.True(t, got.UpdatedAt.After(before.UpdatedAt), "touched at %v, created at %v", got.UpdatedAt, before.UpdatedAt)
			},
		},
		{
			name: "DeleteFile",
			write: func(ctx context.Context, s meta.Store, rec *meta.FileRecord) error {
				return s.DeleteFile(ctx, rec.ID)
			},
			check: func(t *testing.T, _ meta.FileRecord, err error, _ meta.FileRecord) {
				require.Equal(t, errs.NotFound, errs.KindOf(err))
			},
		},
		{
			name: "UpdateFile that conflicts",
			write: func(ctx context.Context, s meta.Store, rec *meta.FileRecord) error {
				stale := *rec
				stale.Version--
				return s.UpdateFile(ctx, &stale)
			},
			check: func(t *testing.T, got meta.FileRecord, err error, before meta.FileRecord) {
				require.NoError(t, err)
				require.Equal(t, before, got)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := sharedCacheFixture(t, time.Minute)
			ctx := ctxT(t)
			rec := newFile(t, f.cache)
			before, err := f.cache.GetFile(ctx, rec.ID)
			require.NoError(t, err)
			require.NotNil(t, f.cached(t, rec.ID), "filled")

			_ = tc.write(ctx, f.cache, rec)
			require.Nil(t, f.cached(t, rec.ID), "the write dropped the cached record")

			got, err := f.cache.GetFile(ctx, rec.ID)
			require.Equal(t, int64(2), f.store.gets.Load(), "the read after the write reaches the store")
			tc.check(t, got, err, before)
		})
	}
}

func TestCreateFileInvalidates(t *testing.T) {
	f := sharedCacheFixture(t, time.Minute)
	ctx := ctxT(t)
	rec := newFile(t, f.store) // created behind the cache's back
	// Plant a record under the ID, as a cache left over from before would.
	raw, err := json.Marshal(meta.FileRecord{File: meta.File{ID: rec.ID, Name: "planted"}})
	require.NoError(t, err)
	require.NoError(t, f.c.rdb.Set(ctx, f.cache.recordKey(rec.ID), raw, time.Minute).Err())
	require.NoError(t, f.store.DeleteFile(ctx, rec.ID))

	require.NoError(t, f.cache.CreateFile(ctx, rec))
	got, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, "a.txt", got.Name)
}

func TestPendingFilesAreNotCached(t *testing.T) {
	f := sharedCacheFixture(t, time.Minute)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	rec.Status = meta.FilePending
	require.NoError(t, f.cache.UpdateFile(ctx, rec))
	for range 2 {
		_, err := f.cache.GetFile(ctx, rec.ID)
		require.NoError(t, err)
	}
	require.Equal(t, int64(2), f.store.gets.Load())
	require.Nil(t, f.cached(t, rec.ID))
}

func TestUnreadableCacheEntryIsReplaced(t *testing.T) {
	f := sharedCacheFixture(t, time.Minute)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	require.NoError(t, f.c.rdb.Set(ctx, f.cache.recordKey(rec.ID), "{not json", time.Minute).Err())

	got, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, rec.ID, got.ID)
	require.NotNil(t, f.cached(t, rec.ID), "the good record replaced the bad one")
}

// TestReadYourWrites: once a write has returned, every reader sees it —
// through this cache or another one over the same Redis (a second
// coordinator).
func TestReadYourWrites(t *testing.T) {
	f := sharedCacheFixture(t, time.Minute)
	other := NewCachedStore(f.store, f.c, CacheOptions{TTL: time.Minute})
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	for i := range 20 {
		_, err := other.GetFile(ctx, rec.ID) // keeps the record cached
		require.NoError(t, err)
		rec.SizeBytes = int64(i)
		require.NoError(t, f.cache.UpdateFile(ctx, rec))
		for _, s := range []*CachedStore{f.cache, other} {
			got, err := s.GetFile(ctx, rec.ID)
			require.NoError(t, err)
			require.Equal(t, int64(i), got.SizeBytes)
			require.Equal(t, rec.Version, got.Version)
		}
	}
}

// TestStaleFillIsRefused stages the race the generation token exists for: a
// reader misses and reads the old row; a write commits and invalidates; only
// then does the reader try to cache what it read. The cache must not take it.
func TestStaleFillIsRefused(t *testing.T) {
	f := sharedCacheFixture(t, time.Minute)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)

	read, proceed := make(chan struct{}), make(chan struct{})
	hold := func() { close(read); <-proceed }
	f.store.afterGet.Store(&hold)
	var wg sync.WaitGroup
	var old meta.FileRecord
	var oldErr error
	wg.Go(func() { old, oldErr = f.cache.GetFile(ctx, rec.ID) })
	<-read // the reader has the old row and has not filled yet
	f.store.afterGet.Store(nil)
	rec.Status = meta.FileDegraded
	require.NoError(t, f.cache.UpdateFile(ctx, rec))
	close(proceed)
	wg.Wait()

	require.NoError(t, oldErr)
	require.Equal(t, meta.FileActive, old.Status, "the reader itself was concurrent with the write")
	require.Nil(t, f.cached(t, rec.ID), "the old row was not cached")
	got, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, got.Status)
}

// TestSlowReaderDoesNotFill stages the race the fill window exists for: a
// reader misses while no generation token exists and reads the old row; a
// write sets a token, and the token expires before the reader gets to fill.
// The token now looks unchanged (absent), so only the reader's own clock can
// tell that it is too late.
func TestSlowReaderDoesNotFill(t *testing.T) {
	f := sharedCacheFixture(t, 200*time.Millisecond) // fill window 100ms, token 200ms
	ctx := ctxT(t)
	rec := newFile(t, f.store) // behind the cache: no token
	slow := func() {
		f.store.afterGet.Store(nil)
		updated := *rec
		updated.Status = meta.FileDegraded
		require.NoError(t, f.cache.UpdateFile(ctx, &updated))
		require.Eventually(t, func() bool {
			return f.c.rdb.Exists(ctx, f.cache.genKey(rec.ID)).Val() == 0
		}, 5*time.Second, 10*time.Millisecond, "the token expires")
	}
	f.store.afterGet.Store(&slow)
	old, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, old.Status)
	require.Nil(t, f.cached(t, rec.ID), "the late reader did not fill")

	got, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, got.Status)
	require.NotNil(t, f.cached(t, rec.ID), "a prompt reader fills")
}

// TestCacheSurvivesRedisKilled kills a private Redis under a cached store:
// every call keeps its answer, reads become misses, errors are counted; a
// write during the outage makes this store ignore Redis until everything
// cached before it has expired; after that, hits return.
func TestCacheSurvivesRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	var n counters
	const ttl = 300 * time.Millisecond
	f := newCacheFixture(t, openClient(t, srv.URL(), Options{OnError: n.onError}), &n, ttl)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	for range 2 {
		_, err := f.cache.GetFile(ctx, rec.ID)
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), n.hits.Load())

	srv.Kill()
	for range 5 {
		got, err := f.cache.GetFile(ctx, rec.ID)
		require.NoError(t, err)
		require.Equal(t, rec.ID, got.ID)
	}
	require.Equal(t, int64(1), n.hits.Load())
	require.Equal(t, int64(6), n.misses.Load())
	require.Positive(t, n.errors.Load())

	// Writes go on; their invalidation fails, so the store stops trusting Redis.
	rec.Status = meta.FileDegraded
	require.NoError(t, f.cache.UpdateFile(ctx, rec))
	require.False(t, f.cache.trusted())
	another := newFile(t, f.cache)
	require.NoError(t, f.cache.DeleteFile(ctx, another.ID))

	srv.Restart()
	errorsBefore := n.errors.Load()
	got, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, got.Status)
	require.Equal(t, errorsBefore, n.errors.Load(), "a distrusted Redis is not even asked")

	require.Eventually(t, func() bool {
		_, err := f.cache.GetFile(ctx, rec.ID)
		require.NoError(t, err)
		return n.hits.Load() > 1
	}, 10*time.Second, 50*time.Millisecond, "hits resume once the distrust has run out")
	require.Equal(t, meta.FileDegraded, f.cached(t, rec.ID).Status)
}

// TestCacheWithHungRedis pauses Redis: reads and writes still succeed, each
// waiting at most the command timeout.
func TestCacheWithHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	var n counters
	f := newCacheFixture(t, openClient(t, srv.URL(), Options{OnError: n.onError, CommandTimeout: 50 * time.Millisecond}), &n, time.Minute)
	ctx := ctxT(t)
	rec := newFile(t, f.cache)
	_, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)

	srv.Pause()
	defer srv.Resume()
	got, err := f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, rec.ID, got.ID)
	rec.Status = meta.FileDegraded
	require.NoError(t, f.cache.UpdateFile(ctx, rec))
	got, err = f.cache.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, got.Status)
	require.Positive(t, n.errors.Load())
}

func BenchmarkGetFile(b *testing.B) {
	bench := func(b *testing.B, s meta.Store) {
		ctx := context.Background()
		addNodes(b, s, "node-1", "node-2", "node-3")
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = newFile(b, s).ID
		}
		i := 0
		for b.Loop() {
			if _, err := s.GetFile(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("sqlite", func(b *testing.B) { bench(b, openSQLite(b)) })
	b.Run("sqlite+redis", func(b *testing.B) {
		bench(b, NewCachedStore(openSQLite(b), sharedClient(b, Options{}), CacheOptions{}))
	})
	b.Run("postgres", func(b *testing.B) { bench(b, openPostgres(b)) })
	b.Run("postgres+redis", func(b *testing.B) {
		bench(b, NewCachedStore(openPostgres(b), sharedClient(b, Options{}), CacheOptions{}))
	})
}

func BenchmarkCachedStore(b *testing.B) {
	metatest.RunBenchmarks(b, func(b *testing.B) meta.Store {
		return NewCachedStore(openSQLite(b), sharedClient(b, Options{}), CacheOptions{})
	})
}

// TestEveryStoreMethodIsDecided: CachedStore embeds meta.Store, so a method
// added there would pass through unseen. Whoever adds one decides here
// whether it changes file records (CachedStore must override it and drop what
// it cached, and FileWritesAreReadBack in metatest must cover it) or passes
// through.
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
