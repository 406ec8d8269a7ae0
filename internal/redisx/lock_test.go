package redisx

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

// lockers returns two Lockers that contend for the same names, as two
// coordinators would.
type lockerPair func(t *testing.T) (a, b Locker)

func lockerPairs() map[string]lockerPair {
	return map[string]lockerPair{
		"redis": func(t *testing.T) (Locker, Locker) {
			c := sharedClient(t, Options{})
			return NewRedisLocker(c, LockOptions{Owner: "a"}), NewRedisLocker(c, LockOptions{Owner: "b"})
		},
		"store/sqlite": func(t *testing.T) (Locker, Locker) {
			s := openSQLite(t)
			return NewStoreLocker(s, LockOptions{Owner: "a"}), NewStoreLocker(s, LockOptions{Owner: "b"})
		},
		"store/postgres": func(t *testing.T) (Locker, Locker) {
			url := testenvPostgres(t)
			return NewStoreLocker(openPostgresAt(t, url), LockOptions{Owner: "a"}),
				NewStoreLocker(openPostgresAt(t, url), LockOptions{Owner: "b"})
		},
		"local": func(t *testing.T) (Locker, Locker) {
			l := NewLocalLocker(LockOptions{})
			return l, l
		},
		"fallback": func(t *testing.T) (Locker, Locker) {
			c, s := sharedClient(t, Options{}), openSQLite(t)
			return NewFallback(c, s, LockOptions{Owner: "a"}), NewFallback(c, s, LockOptions{Owner: "b"})
		},
	}
}

func forEachLocker(t *testing.T, test func(t *testing.T, a, b Locker)) {
	for name, pair := range lockerPairs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := pair(t)
			test(t, a, b)
		})
	}
}

func mustLock(t *testing.T, l Locker, name string, ttl time.Duration) Lease {
	t.Helper()
	lease, ok, err := l.TryLock(ctxT(t), name, ttl)
	require.NoError(t, err)
	require.True(t, ok, "lease %s is free", name)
	require.Equal(t, name, lease.Name())
	return lease
}

func requireTaken(t *testing.T, l Locker, name string) {
	t.Helper()
	lease, ok, err := l.TryLock(ctxT(t), name, 50*time.Millisecond)
	require.NoError(t, err, "contention is not an error")
	require.False(t, ok, "lease %s is held by someone else", name)
	require.Nil(t, lease)
}

// eventuallyLock waits until l gets the lease (another's has expired).
func eventuallyLock(t *testing.T, l Locker, name string, ttl time.Duration) Lease {
	t.Helper()
	var lease Lease
	require.Eventually(t, func() bool {
		var ok bool
		var err error
		lease, ok, err = l.TryLock(ctxT(t), name, ttl)
		require.NoError(t, err)
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	return lease
}

func TestLockContention(t *testing.T) {
	forEachLocker(t, func(t *testing.T, a, b Locker) {
		held := mustLock(t, a, "rebalance", time.Second)
		requireTaken(t, b, "rebalance")
		requireTaken(t, a, "rebalance") // a second acquisition is another holder, even in one process
		other := mustLock(t, b, "reconcile:f1", time.Second)

		require.NoError(t, held.Release(ctxT(t)))
		mustLock(t, b, "rebalance", time.Second)
		require.NoError(t, other.Release(ctxT(t)))
	})
}

func TestLockExpiryLetsAnotherTakeIt(t *testing.T) {
	forEachLocker(t, func(t *testing.T, a, b Locker) {
		old := mustLock(t, a, "rebalance", 100*time.Millisecond)
		now := eventuallyLock(t, b, "rebalance", time.Second)

		ok, err := old.Renew(ctxT(t))
		require.NoError(t, err)
		require.False(t, ok, "the expired holder learns that it lost the lease")
		require.NoError(t, old.Release(ctxT(t)), "releasing a lost lease is not an error")
		requireTaken(t, a, "rebalance") // ... and did not release the new holder's

		ok, err = now.Renew(ctxT(t))
		require.NoError(t, err)
		require.True(t, ok)
	})
}

func TestLockRenewalExtends(t *testing.T) {
	forEachLocker(t, func(t *testing.T, a, b Locker) {
		// Each renewal must land within one ttl of the last: 600 ms leaves
		// room for a loaded machine running the suite under -race.
		const ttl = 600 * time.Millisecond
		l := mustLock(t, a, "rebalance", ttl)
		first := l.Deadline()
		for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
			ok, err := l.Renew(ctxT(t))
			require.NoError(t, err)
			require.True(t, ok)
			requireTaken(t, b, "rebalance")
		}
		require.True(t, l.Deadline().After(first), "renewals move the deadline")
		eventuallyLock(t, b, "rebalance", 3*time.Second) // once renewals stop, it expires
	})
}

func TestReleaseReleasesEvenWithAnEndedContext(t *testing.T) {
	forEachLocker(t, func(t *testing.T, a, b Locker) {
		l := mustLock(t, a, "rebalance", time.Minute/2)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, l.Release(ctx))
		mustLock(t, b, "rebalance", time.Second)
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
		{"x", DefaultGrace + time.Second}, // longer than the grace of the Redis-based lockers
	}
	lockers := map[string]Locker{
		"redis":    NewRedisLocker(c, LockOptions{}),
		"fallback": NewFallback(c, nil, LockOptions{}),
		"store":    NewStoreLocker(openSQLite(t), LockOptions{}),
		"local":    NewLocalLocker(LockOptions{}),
	}
	for lname, l := range lockers {
		for _, tc := range cases {
			_, ok, err := l.TryLock(ctxT(t), tc.name, tc.ttl)
			if tc.ttl > DefaultGrace && (lname == "store" || lname == "local") {
				require.NoError(t, err, "%s has no grace to exceed", lname)
				require.True(t, ok)
				continue
			}
			require.Equal(t, errs.Invalid, errs.KindOf(err), "%s: %q for %s", lname, tc.name, tc.ttl)
			require.False(t, ok)
		}
	}
}

func TestRedisLeaseIsAKeyWithTheTTL(t *testing.T) {
	c := sharedClient(t, Options{})
	l := mustLock(t, NewRedisLocker(c, LockOptions{Owner: "coord-7"}), "rebalance", 20*time.Second)
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
	o := LockOptions{Grace: time.Second}
	ca := openClient(t, srv.URL(), Options{})
	cb := openClient(t, srv.URL(), Options{KeyPrefix: ca.prefix})
	a, b := NewRedisLocker(ca, o), NewRedisLocker(cb, o)
	ctx := ctxT(t)
	const ttl = 500 * time.Millisecond

	held := mustLock(t, a, "rebalance", ttl) // a fresh Redis grants at once
	requireTaken(t, b, "rebalance")          // and b has now seen this server

	srv.Kill()
	_, err := held.Renew(ctx)
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	_, _, err = b.TryLock(ctx, "rebalance", ttl)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))

	srv.Restart()
	require.Eventually(t, func() bool { return cb.Ping(ctx) == nil }, 10*time.Second, 20*time.Millisecond)
	require.Zero(t, cb.rdb.Exists(ctx, ca.key("lock:rebalance")).Val(), "the restart lost the lease")
	requireTaken(t, b, "rebalance") // free, but b noticed the restart
	ok, err := held.Renew(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the holder takes its lease back from the restarted Redis")
	requireTaken(t, b, "rebalance")

	require.NoError(t, held.Release(ctx))
	requireTaken(t, b, "other-name") // every name waits out the grace
	eventuallyLock(t, b, "rebalance", ttl)
}

// TestFallbackAcrossARedisOutage runs two coordinators' Fallback lockers over
// one database while their Redis is killed and restarted: at every step at
// most one holds the lease, and no call fails.
func TestFallbackAcrossARedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	c := openClient(t, srv.URL(), Options{})
	store := openSQLite(t)
	o := LockOptions{Grace: time.Second}
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
	renew := func(l Lease) {
		t.Helper()
		ok, err := l.Renew(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	}

	la := mustLock(t, a, "rebalance", ttl)
	require.True(t, strings.HasPrefix(c.rdb.Get(ctx, key).Val(), "a:"), "held in Redis")
	require.False(t, inStore())
	requireTaken(t, b, "rebalance")

	srv.Kill()
	requireTaken(t, b, "rebalance") // Redis fails: b waits out the grace
	renew(la)                       // a carries its lease over to the store
	require.True(t, inStore())
	for end := time.Now().Add(o.Grace); time.Now().Before(end); time.Sleep(ttl / 5) {
		renew(la) // as KeepAlive would, while b's grace runs out
	}
	requireTaken(t, b, "rebalance") // the grace is over, and the store says a holds it

	require.NoError(t, la.Release(ctx))
	lb := mustLock(t, b, "rebalance", ttl)
	require.True(t, inStore(), "with Redis down the lease is a store row")
	requireTaken(t, a, "rebalance")
	renew(lb)

	srv.Restart()
	require.Eventually(t, func() bool { return c.Ping(ctx) == nil }, 10*time.Second, 20*time.Millisecond)
	renew(lb) // b carries its lease back to Redis
	require.True(t, strings.HasPrefix(c.rdb.Get(ctx, key).Val(), "b:"), "held in Redis again")
	require.False(t, inStore(), "the store row was dropped")
	requireTaken(t, a, "rebalance")

	require.NoError(t, lb.Release(ctx))
	eventuallyLock(t, a, "rebalance", ttl)
	require.True(t, strings.HasPrefix(c.rdb.Get(ctx, key).Val(), "a:"), "new leases are taken in Redis")
}

func TestFallbackWithoutStoreIsLocal(t *testing.T) {
	var n counters
	c, err := Open(ctxT(t), "redis://"+closedPort(t)+"/0", Options{OnError: n.onError})
	require.NoError(t, err)
	defer c.Close()
	f := NewFallback(c, nil, LockOptions{Grace: 100 * time.Millisecond})
	l := eventuallyLock(t, f, "rebalance", 100*time.Millisecond)
	requireTaken(t, f, "rebalance")
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
	f := NewFallback(c, store, LockOptions{Grace: 100 * time.Millisecond})
	srv.Kill()
	ctx := ctxT(t)
	l := eventuallyLock(t, f, "rebalance", 100*time.Millisecond)
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

// fakeLease renews with the answers it is given.
type fakeLease struct {
	renew    func() (bool, error)
	deadline time.Time
	ttl      time.Duration
}

func (f *fakeLease) Name() string        { return "fake" }
func (f *fakeLease) Deadline() time.Time { return f.deadline }
func (f *fakeLease) Release(context.Context) error {
	return nil
}

func (f *fakeLease) Renew(context.Context) (bool, error) {
	ok, err := f.renew()
	if ok && err == nil {
		f.deadline = time.Now().Add(f.ttl)
	}
	return ok, err
}

var _ Lease = (*fakeLease)(nil)

func TestKeepAlive(t *testing.T) {
	cases := []struct {
		name  string
		renew func() (bool, error)
	}{
		{"renewal says lost", func() (bool, error) { return false, nil }},
		{"renewal fails until the deadline", func() (bool, error) { return false, errs.E(errs.Unavailable, "down") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &fakeLease{renew: tc.renew, deadline: time.Now().Add(100 * time.Millisecond), ttl: 100 * time.Millisecond}
			ctx, stop := KeepAlive(context.Background(), l, 10*time.Millisecond)
			defer stop()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the work context outlived its lease")
			}
			require.ErrorIs(t, context.Cause(ctx), ErrLeaseLost)
		})
	}
}

func TestKeepAliveHoldsTheLease(t *testing.T) {
	c := sharedClient(t, Options{})
	a, b := NewRedisLocker(c, LockOptions{}), NewRedisLocker(c, LockOptions{})
	// Long enough that a renewal delayed by a loaded test machine still
	// lands in time; the loop spans several TTLs.
	const ttl = 300 * time.Millisecond
	l := mustLock(t, a, "rebalance", ttl)
	ctx, stop := KeepAlive(context.Background(), l, ttl/6)
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(ttl / 10) {
		require.NoError(t, ctx.Err(), "renewed in time")
		requireTaken(t, b, "rebalance")
	}
	stop()
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
	requireTaken(t, b, "rebalance") // stop does not release
	require.NoError(t, l.Release(ctxT(t)))
	mustLock(t, b, "rebalance", ttl)
}

// TestKeepAliveStopsWorkWhenTheLeaseIsTaken: another coordinator took the
// lease (the holder stalled past its TTL); the holder's next renewal fails and
// its work is cancelled.
func TestKeepAliveStopsWorkWhenTheLeaseIsTaken(t *testing.T) {
	c := sharedClient(t, Options{})
	l := mustLock(t, NewRedisLocker(c, LockOptions{}), "rebalance", time.Second)
	ctx, stop := KeepAlive(context.Background(), l, 20*time.Millisecond)
	defer stop()
	require.NoError(t, c.rdb.Set(ctxT(t), c.key("lock:rebalance"), "other", time.Minute).Err())
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("work went on under a lost lease")
	}
	require.ErrorIs(t, context.Cause(ctx), ErrLeaseLost)
}

func TestKeepAliveEndsWithItsParent(t *testing.T) {
	l := &fakeLease{renew: func() (bool, error) { return true, nil }, deadline: time.Now().Add(time.Minute), ttl: time.Minute}
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := KeepAlive(parent, l, time.Millisecond)
	cancel()
	<-ctx.Done()
	stop() // returns: the renewing goroutine has ended
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
}
