package redisx

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dfs-project/dfs/internal/meta"
)

// DefaultCacheTTL is how long a cached file record lives (CACHE_METADATA_TTL).
const DefaultCacheTTL = 2 * time.Minute

// maxFillWindow caps how long after its first look at Redis a cache miss may
// still store what it read from the metadata store (see CachedStore).
const maxFillWindow = 5 * time.Second

// CacheOptions configure a CachedStore. The zero value is usable.
type CacheOptions struct {
	// TTL is the lifetime of a cached record. Default DefaultCacheTTL.
	TTL time.Duration
	// OnHit and OnMiss, when set, count GetFile calls answered from Redis
	// and from the metadata store. A call that bypasses Redis (because Redis
	// just failed, see CachedStore) is a miss.
	OnHit, OnMiss func()
}

// CachedStore is a meta.Store that answers GetFile from Redis when it can,
// and otherwise from the store it wraps, storing the answer in Redis for the
// next reader. Every write of a file drops that file's cached record, and
// every other method goes straight to the store. A Redis failure only makes a
// read a miss; the store's answer and errors are returned unchanged.
//
// It must wrap every writer of the store: a coordinator hands the same
// CachedStore to everything that writes files, and every coordinator sharing
// the database and Redis uses one, since they share the cached records.
//
// # Consistency
//
// After a write returns, no reader — on this coordinator or another one
// sharing the Redis — is served the record as it was before the write, as
// long as the invalidation reached Redis. Two mechanisms give that:
//
//   - Invalidation happens after every write attempt, whatever its outcome
//     (a failed call may still have committed; a version conflict means the
//     caller read a stale record and is about to read again), and it is not
//     cut short by the caller's context ending.
//
//   - A miss may race a write: the reader reads the old row, the writer
//     commits and invalidates, and the reader then stores the old row, which
//     would live for a whole TTL. So each invalidation also sets a short-lived
//     generation token next to the cached record, and a reader fills the cache
//     only if the token is still the one it saw when it missed (a Lua script
//     compares and sets in one step). The token lives twice as long as the
//     fill window, and a reader that took longer than the fill window between
//     its miss and its fill does not fill at all, so an expired token can
//     never look unchanged to a late reader.
//
// When an invalidation cannot reach Redis, a stale record may remain there,
// so this CachedStore stops using Redis for reads and fills for one TTL plus
// the fill window — by then every record stored before the failure has
// expired. Its own coordinator therefore always reads its writes; another
// coordinator that can reach Redis while this one cannot may be served the
// old record until it expires (at most TTL).
//
// PENDING records are never cached: they change while an upload runs, and the
// repair loop decides on their age.
//
// Only the methods that read or change one file's record are its own; the
// others are the embedded store's: Ping asks the store, whose health is the
// readiness, never Redis; FilesAfter serves the sweep, which must see the
// store; epochs are never cached, since a coordinator that read a stale one
// could skip a rebalance it owes. TestEveryStoreMethodIsDecided makes whoever
// adds a method to meta.Store say which kind it is.
type CachedStore struct {
	meta.Store
	c      *Client
	ttl    time.Duration
	window time.Duration // fill window
	onHit  func()
	onMiss func()

	// base is the origin of the monotonic clock readings in distrustUntil.
	base time.Time
	// distrustUntil is the time (since base) before which Redis is not used
	// for reads, because an invalidation failed.
	distrustUntil atomic.Int64
}

var _ meta.Store = (*CachedStore)(nil)

// NewCachedStore returns store with a read-through cache of file records in c.
// Closing the CachedStore closes store, not c.
func NewCachedStore(store meta.Store, c *Client, o CacheOptions) *CachedStore {
	if o.TTL <= 0 {
		o.TTL = DefaultCacheTTL
	}
	return &CachedStore{
		Store:  store,
		c:      c,
		ttl:    o.TTL,
		window: min(o.TTL/2, maxFillWindow),
		onHit:  o.OnHit,
		onMiss: o.OnMiss,
		base:   time.Now(),
	}
}

// fillScript stores a record if the generation token is still the one the
// reader saw on its miss ("" for none).
// KEYS: record, generation. ARGV: token seen, record JSON, TTL in ms.
var fillScript = redis.NewScript(`
local g = redis.call('GET', KEYS[2])
if (g == false and ARGV[1] == '') or g == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1
end
return 0`)

// invalidateScript drops a record and sets a new generation token, so that a
// reader that missed before the write cannot store what it read.
// KEYS: record, generation. ARGV: new token, token TTL in ms.
var invalidateScript = redis.NewScript(`
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[1])
return 1`)

// The record key carries a format version, so that a coordinator with a
// changed FileRecord never decodes another version's JSON.
// Both keys of a file share its hash tag on a cluster (see taggedKey).
func (s *CachedStore) recordKey(id string) string { return s.c.taggedKey("file:v1:", id) }
func (s *CachedStore) genKey(id string) string    { return s.c.taggedKey("filegen:", id) }

func (s *CachedStore) now() int64 { return int64(time.Since(s.base)) }

func (s *CachedStore) trusted() bool { return s.now() >= s.distrustUntil.Load() }

// distrust stops using Redis for reads until every record that might be
// stale has expired.
func (s *CachedStore) distrust() {
	until := s.now() + int64(s.ttl+s.window)
	for {
		cur := s.distrustUntil.Load()
		if cur >= until || s.distrustUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

func count(f func()) {
	if f != nil {
		f()
	}
}

// GetFile returns the cached record when Redis has one, and otherwise reads
// the store and, if no write intervened, caches what it read.
func (s *CachedStore) GetFile(ctx context.Context, id string) (meta.FileRecord, error) {
	if !s.trusted() {
		count(s.onMiss)
		return s.Store.GetFile(ctx, id)
	}
	start := time.Now()
	cctx, cancel := s.c.cmdCtx(ctx)
	vals, err := s.c.rdb.MGet(cctx, s.recordKey(id), s.genKey(id)).Result()
	cancel()
	if s.c.check(ctx, "cache_get", err) != nil {
		// Redis failed just now: do not wait on it again to fill.
		count(s.onMiss)
		return s.Store.GetFile(ctx, id)
	}
	if raw, ok := vals[0].(string); ok {
		var rec meta.FileRecord
		if json.Unmarshal([]byte(raw), &rec) == nil && rec.ID == id {
			count(s.onHit)
			return rec, nil
		}
		// Unreadable: the fill below replaces it.
	}
	count(s.onMiss)
	rec, err := s.Store.GetFile(ctx, id)
	if err != nil || rec.Status == meta.FilePending {
		return rec, err
	}
	gen, _ := vals[1].(string)
	if time.Since(start) < s.window && s.trusted() {
		s.fill(ctx, id, gen, rec)
	}
	return rec, nil
}

func (s *CachedStore) fill(ctx context.Context, id, gen string, rec meta.FileRecord) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return
	}
	cctx, cancel := s.c.cmdCtx(ctx)
	defer cancel()
	err = fillScript.Run(cctx, s.c.rdb, []string{s.recordKey(id), s.genKey(id)}, gen, raw, s.ttl.Milliseconds()).Err()
	_ = s.c.check(ctx, "cache_fill", err)
}

// invalidate drops id's record after a write attempt. The caller's context
// may already have ended (a client that hung up); the write may still have
// happened, so the invalidation runs regardless, bounded by the command
// timeout.
func (s *CachedStore) invalidate(ctx context.Context, id string) {
	ctx = context.WithoutCancel(ctx)
	cctx, cancel := s.c.cmdCtx(ctx)
	defer cancel()
	err := invalidateScript.Run(cctx, s.c.rdb, []string{s.recordKey(id), s.genKey(id)},
		newToken(), (2 * s.window).Milliseconds()).Err()
	if s.c.check(ctx, "cache_invalidate", err) != nil {
		s.distrust()
	}
}

// CreateFile creates the file, then drops any record cached under its ID.
func (s *CachedStore) CreateFile(ctx context.Context, rec *meta.FileRecord) error {
	err := s.Store.CreateFile(ctx, rec)
	s.invalidate(ctx, rec.ID)
	return err
}

// UpdateFile updates the file, then drops its cached record.
func (s *CachedStore) UpdateFile(ctx context.Context, rec *meta.FileRecord) error {
	parent := rec.Chunk.ParentID // a chunk's write moves its file's stored status too
	err := s.Store.UpdateFile(ctx, rec)
	s.invalidate(ctx, rec.ID)
	if parent != "" {
		s.invalidate(ctx, parent)
	}
	return err
}

// UpdateFileAndPutObject updates the file and moves a key to it, then drops
// the file's cached record. Object rows are not cached here.
func (s *CachedStore) UpdateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	parent := rec.Chunk.ParentID // as in UpdateFile
	replaced, err := s.Store.UpdateFileAndPutObject(ctx, rec, o)
	s.invalidate(ctx, rec.ID)
	if parent != "" {
		s.invalidate(ctx, parent)
	}
	return replaced, err
}

// CreateFileAndPutObject creates the file and moves a key to it, then
// drops any record cached under the file's ID, as CreateFile does.
func (s *CachedStore) CreateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	replaced, err := s.Store.CreateFileAndPutObject(ctx, rec, o)
	s.invalidate(ctx, rec.ID)
	return replaced, err
}

// TouchFile touches the file, then drops its cached record (UpdatedAt changed).
func (s *CachedStore) TouchFile(ctx context.Context, id string) error {
	err := s.Store.TouchFile(ctx, id)
	s.invalidate(ctx, id)
	return err
}

// DeleteFile deletes the file, then drops its cached record.
func (s *CachedStore) DeleteFile(ctx context.Context, id string) error {
	// A manifest's delete marks its chunks DELETED too: read which they are
	// first, to drop them after.
	chunks, _ := s.Store.ChunksOf(ctx, id)
	err := s.Store.DeleteFile(ctx, id)
	s.invalidate(ctx, id)
	for _, c := range chunks {
		s.invalidate(ctx, c.ID)
	}
	return err
}

// FinishPart marks the chunks of the attempts it replaces DELETED, then
// drops them from the cache.
func (s *CachedStore) FinishPart(ctx context.Context, p *meta.UploadPart) ([]string, error) {
	ids, err := s.Store.FinishPart(ctx, p)
	s.invalidateAll(ctx, ids)
	return ids, err
}

// CompleteSession moves the kept chunks into the new file and marks the
// others DELETED, then drops all of them from the cache.
func (s *CachedStore) CompleteSession(ctx context.Context, sessionID string, manifest *meta.FileRecord, partIDs []string) ([]string, error) {
	ids, err := s.Store.CompleteSession(ctx, sessionID, manifest, partIDs)
	s.invalidateAll(ctx, ids)
	if err == nil {
		kept, _ := s.Store.ChunksOf(ctx, manifest.ID)
		for _, c := range kept {
			s.invalidate(ctx, c.ID)
		}
	}
	return ids, err
}

// DeleteSession marks the session's chunks DELETED, then drops them from
// the cache.
func (s *CachedStore) DeleteSession(ctx context.Context, id string) ([]string, error) {
	ids, err := s.Store.DeleteSession(ctx, id)
	s.invalidateAll(ctx, ids)
	return ids, err
}

func (s *CachedStore) invalidateAll(ctx context.Context, ids []string) {
	for _, id := range ids {
		s.invalidate(ctx, id)
	}
}

// MarkNodeCopiesLost changes many file records at once, then drops each of
// them from the cache.
func (s *CachedStore) MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error) {
	ids, err := s.Store.MarkNodeCopiesLost(ctx, nodeID, reason)
	s.invalidateAll(ctx, ids)
	return ids, err
}
