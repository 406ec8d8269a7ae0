package redisx

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/lease/leasetest"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

func TestLockers(t *testing.T) {
	leasetest.Run(t, map[string]leasetest.Pair{
		"redis": func(t *testing.T) (lease.Locker, lease.Locker) {
			c := sharedClient(t, Options{})
			return NewRedisLocker(c, lease.Options{Owner: "a"}), NewRedisLocker(c, lease.Options{Owner: "b"})
		},
		"fallback": func(t *testing.T) (lease.Locker, lease.Locker) {
			c, s := sharedClient(t, Options{}), openSQLite(t)
			return NewFallback(c, s, lease.Options{Owner: "a"}), NewFallback(c, s, lease.Options{Owner: "b"})
		},
	})
}

func TestLockValidation(t *testing.T) {
	c := sharedClient(t, Options{})
	cases := []struct {
		name string
		ttl  time.Duration
	}{
		{"", time.Second},
		{"x", 0},
		{"x", time.Microsecond},
		{"x", lease.DefaultGrace + time.Second}, // longer than the grace of the Redis-based lockers
	}
	// The store and local lockers, which have no grace, are checked in
	// package lease.
	lockers := map[string]lease.Locker{
		"redis":    NewRedisLocker(c, lease.Options{}),
		"fallback": NewFallback(c, nil, lease.Options{}),
	}
	for lname, l := range lockers {
		for _, tc := range cases {
			_, ok, err := l.TryLock(ctxT(t), tc.name, tc.ttl)
			require.Equal(t, errs.Invalid, errs.KindOf(err), "%s: %q for %s", lname, tc.name, tc.ttl)
			require.False(t, ok)
		}
	}
}

func TestRedisLeaseIsAKeyWithTheTTL(t *testing.T) {
	c := sharedClient(t, Options{})
	l := leasetest.MustLock(t, NewRedisLocker(c, lease.Options{Owner: "coord-7"}), "rebalance", 20*time.Second)
	ctx := ctxT(t)
	key := c.key("lock:rebalance")
	v, err := c.rdb.Get(ctx, key).Result()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v, "coord-7:"), "the value names the owner: %q", v)
	pttl, err := c.rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	require.Greater(t, pttl, 15*time.Second)
	require.LessOrEqual(t, pttl, 20*time.Second)

	require.NoError(t, l.Release(ctx))
	require.Zero(t, c.rdb.Exists(ctx, key).Val())
}

// TestRedisLocksAfterRestart: a restarted Redis has forgotten every lease
// while the holders still work, so a process that notices the restart grants
// none for the grace period — but a holder renewing takes its own back. A
// first start withholds nothing.
func TestRedisLocksAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	o := lease.Options{Grace: time.Second}
	ca := openClient(t, srv.URL(), Options{})
	cb := openClient(t, srv.URL(), Options{KeyPrefix: ca.prefix})
	a, b := NewRedisLocker(ca, o), NewRedisLocker(cb, o)
	ctx := ctxT(t)
	const ttl = 500 * time.Millisecond

	held := leasetest.MustLock(t, a, "rebalance", ttl) // a fresh Redis grants at once
	leasetest.RequireTaken(t, b, "rebalance")          // and b has now seen this server

	srv.Kill()
	_, err := held.Renew(ctx)
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	_, _, err = b.TryLock(ctx, "rebalance", ttl)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))

	srv.Restart()
	require.Eventually(t, func() bool { return cb.Ping(ctx) == nil }, 10*time.Second, 20*time.Millisecond)
	require.Zero(t, cb.rdb.Exists(ctx, ca.key("lock:rebalance")).Val(), "the restart lost the lease")
	leasetest.RequireTaken(t, b, "rebalance") // free, but b noticed the restart
	ok, err := held.Renew(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the holder takes its lease back from the restarted Redis")
	leasetest.RequireTaken(t, b, "rebalance")

	require.NoError(t, held.Release(ctx))
	leasetest.RequireTaken(t, b, "other-name") // every name waits out the grace
	leasetest.EventuallyLock(t, b, "rebalance", ttl)
}

// TestFallbackAcrossARedisOutage runs two coordinators' Fallback lockers over
// one database while their Redis is killed and restarted: at every step at
// most one holds the lease, and no call fails.
func TestFallbackAcrossARedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	c := openClient(t, srv.URL(), Options{})
	store := openSQLite(t)
	o := lease.Options{Grace: time.Second}
	oa, ob := o, o
	oa.Owner, ob.Owner = "a", "b"
	a, b := NewFallback(c, store, oa), NewFallback(c, store, ob)
	ctx := ctxT(t)
	const ttl = 500 * time.Millisecond
	key := c.key("lock:rebalance")
	// inStore reports whether the store has a live lease row for the name.
	inStore := func() bool {
		ok, err := store.AcquireLease(ctx, "rebalance", "probe", time.Millisecond)
		require.NoError(t, err)
		return !ok
	}
	renew := func(l lease.Lease) {
		t.Helper()
		ok, err := l.Renew(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}

	la := leasetest.MustLock(t, a, "rebalance", ttl)
	require.True(t, strings.HasPrefix(c.rdb.Get(ctx, key).Val(), "a:"), "held in Redis")
	require.False(t, inStore())
	leasetest.RequireTaken(t, b, "rebalance")

	srv.Kill()
	leasetest.RequireTaken(t, b, "rebalance") // Redis fails: b waits out the grace
	renew(la)                                 // a carries its lease over to the store
	require.True(t, inStore())
	for end := time.Now().Add(o.Grace); time.Now().Before(end); time.Sleep(ttl / 5) {
		renew(la) // as KeepAlive would, while b's grace runs out
	}
	leasetest.RequireTaken(t, b, "rebalance") // the grace is over, and the store says a holds it

	require.NoError(t, la.Release(ctx))
	lb := leasetest.MustLock(t, b, "rebalance", ttl)
	require.True(t, inStore(), "with Redis down the lease is a store row")
	leasetest.RequireTaken(t, a, "rebalance")
	renew(lb)

	srv.Restart()
	require.Eventually(t, func() bool { return c.Ping(ctx) == nil }, 10*time.Second, 20*time.Millisecond)
	renew(lb) // b carries its lease back to Redis
	require.True(t, strings.HasPrefix(c.rdb.Get(ctx, key).Val(), "b:"), "held in Redis again")
	require.False(t, inStore(), "the store row was dropped")
	leasetest.RequireTaken(t, a, "rebalance")

	require.NoError(t, lb.Release(ctx))
	leasetest.EventuallyLock(t, a, "rebalance", ttl)
	require.True(t, strings.HasPrefix(c.rdb.Get(ctx, key).Val(), "a:"), "new leases are taken in Redis")
}

func TestFallbackWithoutStoreIsLocal(t *testing.T) {
	var n counters
	c, err := Open(ctxT(t), "redis://"+closedPort(t)+"/0", Options{OnError: n.onError})
	require.NoError(t, err)
	defer c.Close()
	f := NewFallback(c, nil, lease.Options{Grace: 100 * time.Millisecond})
	l := leasetest.EventuallyLock(t, f, "rebalance", 100*time.Millisecond)
	leasetest.RequireTaken(t, f, "rebalance")
	ok, err := l.Renew(ctxT(t))
	require.NoError(t, err)
	require.True(t, ok)
	require.Positive(t, n.errors.Load())
}

// TestFallbackLeaseLostInRedis: a lease found taken in Redis on the way back
// from the store is lost, and its store row dropped.
func TestFallbackLeaseLostInRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := openClient(t, srv.URL(), Options{})
	store := openSQLite(t)
	f := NewFallback(c, store, lease.Options{Grace: 100 * time.Millisecond})
	srv.Kill()
	ctx := ctxT(t)
	l := leasetest.EventuallyLock(t, f, "rebalance", 100*time.Millisecond)
	srv.Restart()
	// Someone (a coordinator that never lost Redis) holds the name there.
	require.NoError(t, c.rdb.Set(ctx, c.key("lock:rebalance"), "other", time.Minute).Err())
	require.Eventually(t, func() bool { return c.Ping(ctx) == nil }, 10*time.Second, 20*time.Millisecond)
	ok, err := l.Renew(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = store.AcquireLease(ctx, "rebalance", "probe", time.Second)
	require.NoError(t, err)
	require.True(t, ok, "the store row was dropped")
}

func TestKeepAliveHoldsTheLease(t *testing.T) {
	c := sharedClient(t, Options{})
	a, b := NewRedisLocker(c, lease.Options{}), NewRedisLocker(c, lease.Options{})
	// Long enough that a renewal delayed by a loaded test machine still
	// lands in time; the loop spans several TTLs.
	const ttl = 300 * time.Millisecond
	l := leasetest.MustLock(t, a, "rebalance", ttl)
	ctx, stop := lease.KeepAlive(context.Background(), l, ttl/6)
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		require.NoError(t, ctx.Err(), "renewed in time")
		leasetest.RequireTaken(t, b, "rebalance")
	}
	stop()
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
	leasetest.RequireTaken(t, b, "rebalance") // stop does not release
	require.NoError(t, l.Release(ctxT(t)))
	leasetest.MustLock(t, b, "rebalance", ttl)
}

// TestKeepAliveStopsWorkWhenTheLeaseIsTaken: another coordinator took the
// lease (the holder stalled past its TTL); the holder's next renewal fails and
// its work is cancelled.
func TestKeepAliveStopsWorkWhenTheLeaseIsTaken(t *testing.T) {
	c := sharedClient(t, Options{})
	l := leasetest.MustLock(t, NewRedisLocker(c, lease.Options{}), "rebalance", time.Second)
	ctx, stop := lease.KeepAlive(context.Background(), l, 20*time.Millisecond)
	defer stop()
	require.NoError(t, c.rdb.Set(ctxT(t), c.key("lock:rebalance"), "other", time.Minute).Err())
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("work went on under a lost lease")
	}
	require.ErrorIs(t, context.Cause(ctx), lease.ErrLeaseLost)
}
