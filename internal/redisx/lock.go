package redisx

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
)

// RedisLocker keeps leases in Redis: SET NX PX to take one, compare-and-
// PEXPIRE to renew, compare-and-DEL to release, each keyed by a random token
// per acquisition so that only the holder can renew or release.
//
// Redis without persistence forgets every lease when it restarts, while their
// holders are still working. Holders take their lease back at their next
// renewal (a renewal takes a lease nobody holds), so for Grace after a
// restart that this process noticed (the server's run_id changed) it grants
// no new lease. A process that never saw the old server cannot notice, and
// may be granted a lease whose old holder has not renewed yet; that holder
// then finds it taken at its next renewal and stops (see lease.KeepAlive). A first
// start of Redis withholds nothing. On a cluster each master is watched on its
// own: a restart of one withholds the leases whose keys live on it. A replica
// promoted in a failover is a server this process never saw, and it may lack
// the last leases its master granted.
type RedisLocker struct {
	c     *Client
	owner string
	grace time.Duration
}

var (
	_ lease.Locker  = (*RedisLocker)(nil)
	_ lease.Backend = (*RedisLocker)(nil)
)

// NewRedisLocker returns a Locker over c.
func NewRedisLocker(c *Client, o lease.Options) *RedisLocker {
	o = o.WithDefaults()
	return &RedisLocker{c: c, owner: o.Owner, grace: o.Grace}
}

// TryLock takes the lease name in Redis. A Redis failure is an errs.Unavailable
// error.
func (r *RedisLocker) TryLock(ctx context.Context, name string, ttl time.Duration) (lease.Lease, bool, error) {
	if err := lease.Check(name, ttl, r.grace); err != nil {
		return nil, false, err
	}
	return lease.Take(ctx, r, r.owner, name, ttl)
}

// lockKey is the one key of a lease, so a lease lives on one shard of a
// cluster without a hash tag.
func (r *RedisLocker) lockKey(name string) string { return r.c.key("lock:" + name) }

// node names the server that holds the lease name (see Client.nodeOf); ""
// when it cannot tell, as on one server.
func (r *RedisLocker) node(ctx context.Context, name string) string {
	n, _ := r.c.nodeOf(ctx, r.lockKey(name))
	return n
}

// acquireScript takes, takes back or extends a lease, and reports the
// server's run_id and uptime so that the client notices restarts.
// KEYS: lock. ARGV: token, ttl ms, grace in seconds, "1" to honour the
// grace, the run_id the client last saw ("" for none).
// Returns {1, run_id, uptime} when token holds the lease, {0, …} when
// another token does, {-1, …} when the lease is free but the server restarted
// (its run_id is not the one the client saw) less than grace ago.
var acquireScript = redis.NewScript(`
local info = redis.call('INFO', 'server')
local run = string.match(info, 'run_id:(%x+)') or ''
local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or 0
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return {1, run, up}
end
if cur then
	return {0, run, up}
end
if ARGV[4] == '1' and ARGV[5] ~= '' and run ~= ARGV[5] and up < tonumber(ARGV[3]) then
	return {-1, run, up}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, run, up}`)

// releaseScript deletes a lease its token holds.
// KEYS: lock. ARGV: token.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// Acquire runs acquireScript. A migrating holder, and a renewal, may take a
// lease nobody holds at any time: either it still held the lease until now
// (its deadline has not passed) or it holds it elsewhere.
func (r *RedisLocker) Acquire(ctx context.Context, name, token string, ttl time.Duration, migrating bool) (bool, error) {
	return r.run(ctx, "lock_acquire", name, token, ttl, !migrating)
}

// Renew extends the lease for token, or takes it back when nobody holds it.
func (r *RedisLocker) Renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	return r.run(ctx, "lock_renew", name, token, ttl, false)
}

func (r *RedisLocker) run(ctx context.Context, op, name, token string, ttl time.Duration, honourGrace bool) (bool, error) {
	key := r.lockKey(name)
	node, err := r.c.nodeOf(ctx, key)
	if err != nil {
		return false, r.c.check(ctx, op, err)
	}
	if honourGrace && r.c.restartedWithin(node, r.grace) {
		return false, nil
	}
	// uptime counts whole seconds; rounding the grace up keeps it whole.
	graceSecs := int64((r.grace + time.Second - 1) / time.Second)
	honour := "0"
	if honourGrace {
		honour = "1"
	}
	cctx, cancel := r.c.cmdCtx(ctx)
	defer cancel()
	res, err := acquireScript.Run(cctx, r.c.rdb, []string{key},
		token, ttl.Milliseconds(), graceSecs, honour, r.c.lastRunID(node)).Slice()
	if err := r.c.check(ctx, op, err); err != nil {
		return false, err
	}
	n, run, up, err := parseAcquire(res)
	if err != nil {
		return false, errs.Wrap(errs.Other, err, "redis %s", op)
	}
	r.c.observeRun(node, run, up)
	return n == 1, nil
}

func parseAcquire(res []any) (n int64, run string, up int64, err error) {
	if len(res) == 3 {
		var ok1, ok2, ok3 bool
		n, ok1 = res[0].(int64)
		run, ok2 = res[1].(string)
		up, ok3 = res[2].(int64)
		if ok1 && ok2 && ok3 {
			return n, run, up, nil
		}
	}
	return 0, "", 0, fmt.Errorf("unexpected lock script answer %v", res)
}

// Release deletes the lease if token holds it.
func (r *RedisLocker) Release(ctx context.Context, name, token string) error {
	cctx, cancel := r.c.cmdCtx(ctx)
	defer cancel()
	return r.c.check(ctx, "lock_release", releaseScript.Run(cctx, r.c.rdb, []string{r.lockKey(name)}, token).Err())
}
