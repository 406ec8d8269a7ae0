package redisx

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
)

// Fallback is a Locker that keeps leases in Redis while Redis answers and in
// the metadata store (or, without a shared store, in this process) while it
// does not, so that background work stays single-writer across coordinators
// sharing a database whether or not Redis is up.
//
// Switching backends must not let two holders overlap:
//
//   - When Redis stops answering, the holders of Redis leases carry them
//     over to the store at their next renewal (same token, so nobody can
//     slip in between), and holders that do not renew must finish within
//     their TTL anyway. So Fallback grants no new store lease for Grace after
//     it first sees Redis fail.
//   - On a Redis Cluster each master counts on its own: while one is down,
//     the leases whose keys it holds move to the store and the others stay
//     in Redis.
//   - When Redis comes back, store holders carry their leases back to Redis
//     at their next renewal. If it restarted it has forgotten every lease,
//     and RedisLocker withholds new ones for Grace after it notices the
//     restart.
//
// What it cannot rule out: a coordinator that reaches the database but not
// Redis while another reaches both (a partial network partition) can hold a
// store lease while the other holds the same name in Redis. Once the first
// reaches Redis again its renewal finds the name taken and reports the lease
// lost.
type Fallback struct {
	redis *RedisLocker
	other lease.Backend
	owner string
	grace time.Duration
	log   *slog.Logger

	mu sync.Mutex
	// downSince is when Redis was first seen failing in the current outage,
	// by node (see Client.nodeOf: "" on one server, each master of a
	// cluster on its own, since one fails while the others answer); absent
	// while it answers.
	downSince map[string]time.Time
}

var _ lease.Locker = (*Fallback)(nil)

// NewFallback returns a Locker over Redis that falls back to lease rows in
// store, or to process-local leases when store is nil.
func NewFallback(c *Client, store meta.Store, o lease.Options) *Fallback {
	o = o.WithDefaults()
	f := &Fallback{redis: NewRedisLocker(c, o), owner: o.Owner, grace: o.Grace, log: o.Logger, downSince: map[string]time.Time{}}
	if store != nil {
		f.other = lease.NewStoreLocker(store, o)
	} else {
		f.other = lease.NewLocalLocker(o)
	}
	return f
}

func (f *Fallback) redisAnswered(node string) {
	f.mu.Lock()
	if since, ok := f.downSince[node]; ok {
		f.log.Info("leases are taken in Redis again", append(nodeAttr(node), "after", time.Since(since).Round(time.Millisecond))...)
		delete(f.downSince, node)
	}
	f.mu.Unlock()
}

// redisFailed notes a failure of node and reports how long it has been seen
// down.
func (f *Fallback) redisFailed(node string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	since, ok := f.downSince[node]
	if !ok {
		since = time.Now()
		f.downSince[node] = since
		f.log.Warn("Redis does not answer; leases move to the fallback", append(nodeAttr(node), "grace", f.grace)...)
	}
	return time.Since(since)
}

// nodeAttr is the log attribute naming a cluster's node; none on one server.
func nodeAttr(node string) []any {
	if node == "" {
		return nil
	}
	return []any{"node", node}
}

// TryLock takes the lease in Redis, or, when Redis fails, in the fallback
// once Redis has been failing for Grace (until then, ok is false). An error
// means the fallback failed too (or ctx ended).
func (f *Fallback) TryLock(ctx context.Context, name string, ttl time.Duration) (lease.Lease, bool, error) {
	if err := lease.Check(name, ttl, f.grace); err != nil {
		return nil, false, err
	}
	l := &fallbackLease{f: f, name: name, token: lease.NewToken(f.owner), ttl: ttl}
	start := time.Now()
	node := f.redis.node(ctx, name)
	ok, err := f.redis.Acquire(ctx, name, l.token, ttl, false)
	switch {
	case err == nil:
		f.redisAnswered(node)
		l.inRedis = true
	case ctx.Err() != nil:
		return nil, false, err
	case f.redisFailed(node) < f.grace:
		return nil, false, nil
	default:
		ok, err = f.other.Acquire(ctx, name, l.token, ttl, false)
	}
	if err != nil || !ok {
		return nil, false, err
	}
	l.deadline = start.Add(ttl)
	return l, true, nil
}

// fallbackLease is a lease that lives in Redis or in the fallback, and moves
// between them on renewal.
type fallbackLease struct {
	f     *Fallback
	name  string
	token string
	ttl   time.Duration

	mu       sync.Mutex // serialises Renew and Release
	inRedis  bool
	deadline time.Time
}

var _ lease.Lease = (*fallbackLease)(nil)

func (l *fallbackLease) Name() string { return l.name }

func (l *fallbackLease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *fallbackLease) Renew(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := time.Now()
	ok, err := l.renew(ctx)
	if ok && err == nil {
		l.deadline = start.Add(l.ttl)
	}
	return ok, err
}

func (l *fallbackLease) renew(ctx context.Context) (bool, error) {
	f := l.f
	node := f.redis.node(ctx, l.name)
	if l.inRedis {
		ok, err := f.redis.Renew(ctx, l.name, l.token, l.ttl)
		if err == nil {
			f.redisAnswered(node)
			return ok, nil
		}
		if ctx.Err() != nil {
			return false, err
		}
		f.redisFailed(node)
		ok, err = f.other.Acquire(ctx, l.name, l.token, l.ttl, true)
		if ok && err == nil {
			l.inRedis = false
			f.log.Info("lease moved to the fallback", "lease", l.name)
		}
		return ok, err
	}
	ok, err := f.redis.Acquire(ctx, l.name, l.token, l.ttl, true)
	if err == nil {
		f.redisAnswered(node)
		// Whether the lease moved back or was found taken, the fallback
		// row is no longer ours to keep.
		if rerr := f.other.Release(context.WithoutCancel(ctx), l.name, l.token); rerr != nil {
			f.log.Warn("could not drop the fallback lease; it expires on its own", "lease", l.name, "err", rerr)
		}
		if ok {
			l.inRedis = true
			f.log.Info("lease moved back to Redis", "lease", l.name)
		}
		return ok, nil
	}
	if ctx.Err() != nil {
		return false, err
	}
	f.redisFailed(node)
	return f.other.Renew(ctx, l.name, l.token, l.ttl)
}

func (l *fallbackLease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	if l.inRedis {
		return l.f.redis.Release(ctx, l.name, l.token)
	}
	return l.f.other.Release(ctx, l.name, l.token)
}
