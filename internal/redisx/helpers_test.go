package redisx

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/postgres"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/testenv"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// counters is an Options.OnError and CacheOptions.OnHit/OnMiss sink.
type counters struct {
	errors, hits, misses atomic.Int64
}

func (c *counters) onError(string) { c.errors.Add(1) }
func (c *counters) onHit()         { c.hits.Add(1) }
func (c *counters) onMiss()        { c.misses.Add(1) }

// openClient opens a client on url with a key prefix of the test's own, and
// deletes the test's keys when it ends.
func openClient(t testing.TB, url string, o Options) *Client {
	t.Helper()
	if o.KeyPrefix == "" {
		o.KeyPrefix = "dfstest:" + newToken() + ":"
	}
	c, err := Open(ctxT(t), url, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if keys, err := c.rdb.Keys(ctx, o.KeyPrefix+"*").Result(); err == nil && len(keys) > 0 {
			c.rdb.Del(ctx, keys...)
		}
		_ = c.Close()
	})
	return c
}

// sharedClient is a client on the shared test Redis (DFS_TEST_REDIS_URL).
func sharedClient(t testing.TB, o Options) *Client {
	t.Helper()
	return openClient(t, testenv.RedisURL(t), o)
}

func openSQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(ctxT(t), filepath.Join(t.TempDir(), "metadata.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPostgres(t testing.TB) *postgres.Store {
	t.Helper()
	return openPostgresAt(t, testenv.NewPostgresDB(t))
}

func openPostgresAt(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(ctxT(t), url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// countingStore counts the GetFile calls that reach the store, and can hold
// one after it has read, to stage races.
type countingStore struct {
	meta.Store
	gets atomic.Int64
	// afterGet, when set, runs after the store has answered a GetFile.
	afterGet atomic.Pointer[func()]
}

var _ meta.Store = (*countingStore)(nil)

func (s *countingStore) GetFile(ctx context.Context, id string) (meta.FileRecord, error) {
	s.gets.Add(1)
	rec, err := s.Store.GetFile(ctx, id)
	if f := s.afterGet.Load(); f != nil {
		(*f)()
	}
	return rec, err
}

func addNodes(t testing.TB, s meta.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, s.CreateNode(ctxT(t), &meta.Node{ID: id, Host: "127.0.0.1", Port: 9000, Status: meta.NodeHealthy}))
	}
}

// newFile returns an ACTIVE file with copies on node-1..3 (which must exist).
func newFile(t testing.TB, s meta.Store) *meta.FileRecord {
	t.Helper()
	rec := &meta.FileRecord{
		File: meta.File{
			ID: uuid.NewString(), Name: "a.txt", ContentType: "text/plain", SizeBytes: 3,
			Checksum: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
			Status:   meta.FileActive, PrimaryNodeID: "node-1", ReplicationFactor: 3, RingPosition: 42,
		},
		Replicas: []meta.Replica{
			{NodeID: "node-1", Status: meta.ReplicaActive},
			{NodeID: "node-2", Status: meta.ReplicaActive},
			{NodeID: "node-3", Status: meta.ReplicaActive},
		},
	}
	require.NoError(t, s.CreateFile(ctxT(t), rec))
	return rec
}
