// Package leasetest is the conformance suite every lease.Locker passes: the
// store and process-local lockers in package lease, the Redis and fallback
// lockers in redisx.
package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/lease"
)

// Pair returns two Lockers that contend for the same names, as two
// coordinators would.
type Pair func(t *testing.T) (a, b lease.Locker)

// Run runs the suite, in parallel, for each pair.
func Run(t *testing.T, pairs map[string]Pair) {
	tests := map[string]func(t *testing.T, a, b lease.Locker){
		"Contention":                            testContention,
		"ExpiryLetsAnotherTakeIt":               testExpiryLetsAnotherTakeIt,
		"RenewalExtends":                        testRenewalExtends,
		"ReleaseReleasesEvenWithAnEndedContext": testReleaseWithAnEndedContext,
	}
	for tname, test := range tests {
		t.Run(tname, func(t *testing.T) {
			for name, pair := range pairs {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					a, b := pair(t)
					test(t, a, b)
				})
			}
		})
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// MustLock takes a lease that must be free.
func MustLock(t testing.TB, l lease.Locker, name string, ttl time.Duration) lease.Lease {
	t.Helper()
	ls, ok, err := l.TryLock(ctxT(t), name, ttl)
	require.NoError(t, err)
	require.True(t, ok, "lease %s is free", name)
	require.Equal(t, name, ls.Name())
	return ls
}

// RequireTaken checks that l cannot take the lease, without error.
func RequireTaken(t testing.TB, l lease.Locker, name string) {
	t.Helper()
	ls, ok, err := l.TryLock(ctxT(t), name, 50*time.Millisecond)
	require.NoError(t, err, "contention is not an error")
	require.False(t, ok, "lease %s is held by someone else", name)
	require.Nil(t, ls)
}

// EventuallyLock waits until l gets the lease (another's has expired).
func EventuallyLock(t testing.TB, l lease.Locker, name string, ttl time.Duration) lease.Lease {
	t.Helper()
	var ls lease.Lease
	require.Eventually(t, func() bool {
		var ok bool
		var err error
		ls, ok, err = l.TryLock(ctxT(t), name, ttl)
		require.NoError(t, err)
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	return ls
}

func testContention(t *testing.T, a, b lease.Locker) {
	held := MustLock(t, a, "rebalance", time.Second)
	RequireTaken(t, b, "rebalance")
	RequireTaken(t, a, "rebalance") // a second acquisition is another holder, even in one process
	other := MustLock(t, b, "reconcile:f1", time.Second)

	require.NoError(t, held.Release(ctxT(t)))
	MustLock(t, b, "rebalance", time.Second)
	require.NoError(t, other.Release(ctxT(t)))
}

func testExpiryLetsAnotherTakeIt(t *testing.T, a, b lease.Locker) {
	old := MustLock(t, a, "rebalance", 100*time.Millisecond)
	now := EventuallyLock(t, b, "rebalance", time.Second)

	ok, err := old.Renew(ctxT(t))
	require.NoError(t, err)
	require.False(t, ok, "the expired holder learns that it lost the lease")
	require.NoError(t, old.Release(ctxT(t)), "releasing a lost lease is not an error")
	RequireTaken(t, a, "rebalance") // ... and did not release the new holder's

	ok, err = now.Renew(ctxT(t))
	require.NoError(t, err)
	require.True(t, ok)
}

func testRenewalExtends(t *testing.T, a, b lease.Locker) {
	// Each renewal must land within one ttl of the last: 600 ms leaves
	// room for a loaded machine running the suite under -race.
	const ttl = 600 * time.Millisecond
	l := MustLock(t, a, "rebalance", ttl)
	first := l.Deadline()
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		ok, err := l.Renew(ctxT(t))
		require.NoError(t, err)
		require.True(t, ok)
		RequireTaken(t, b, "rebalance")
	}
	require.True(t, l.Deadline().After(first), "renewals move the deadline")
	EventuallyLock(t, b, "rebalance", 3*time.Second) // once renewals stop, it expires
}

func testReleaseWithAnEndedContext(t *testing.T, a, b lease.Locker) {
	l := MustLock(t, a, "rebalance", time.Minute/2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, l.Release(ctx))
	MustLock(t, b, "rebalance", time.Second)
}
