package lease_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/lease/leasetest"
	"github.com/dfs-project/dfs/internal/meta/postgres"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/testenv"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openSQLite(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(ctxT(t), filepath.Join(t.TempDir(), "metadata.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPostgresAt(t testing.TB, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(ctxT(t), url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestLockers(t *testing.T) {
	leasetest.Run(t, map[string]leasetest.Pair{
		"store/sqlite": func(t *testing.T) (lease.Locker, lease.Locker) {
			s := openSQLite(t)
			return lease.NewStoreLocker(s, lease.Options{Owner: "a"}), lease.NewStoreLocker(s, lease.Options{Owner: "b"})
		},
		"store/postgres": func(t *testing.T) (lease.Locker, lease.Locker) {
			url := testenv.NewPostgresDB(t)
			return lease.NewStoreLocker(openPostgresAt(t, url), lease.Options{Owner: "a"}),
				lease.NewStoreLocker(openPostgresAt(t, url), lease.Options{Owner: "b"})
		},
		"local": func(t *testing.T) (lease.Locker, lease.Locker) {
			l := lease.NewLocalLocker(lease.Options{})
			return l, l
		},
	})
}

func TestLockValidation(t *testing.T) {
	cases := []struct {
		name string
		ttl  time.Duration
	}{
		{"", time.Second},
		{"x", 0},
		{"x", time.Microsecond},
		{"x", lease.DefaultGrace + time.Second}, // longer than the grace of the Redis-based lockers
	}
	lockers := map[string]lease.Locker{
		"store": lease.NewStoreLocker(openSQLite(t), lease.Options{}),
		"local": lease.NewLocalLocker(lease.Options{}),
	}
	for lname, l := range lockers {
		for _, tc := range cases {
			_, ok, err := l.TryLock(ctxT(t), tc.name, tc.ttl)
			if tc.ttl > lease.DefaultGrace {
				require.NoError(t, err, "%s has no grace to exceed", lname)
				require.True(t, ok)
				continue
			}
			require.Equal(t, errs.Invalid, errs.KindOf(err), "%s: %q for %s", lname, tc.name, tc.ttl)
			require.False(t, ok)
		}
	}
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

var _ lease.Lease = (*fakeLease)(nil)

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
			ctx, stop := lease.KeepAlive(context.Background(), l, 10*time.Millisecond)
			defer stop()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the work context outlived its lease")
			}
			require.ErrorIs(t, context.Cause(ctx), lease.ErrLeaseLost)
		})
	}
}

func TestKeepAliveEndsWithItsParent(t *testing.T) {
	l := &fakeLease{renew: func() (bool, error) { return true, nil }, deadline: time.Now().Add(time.Minute), ttl: time.Minute}
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := lease.KeepAlive(parent, l, time.Millisecond)
	cancel()
	<-ctx.Done()
	stop() // returns: the renewing goroutine has ended
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
}

func TestHoldReleasesWhenTheWorkIsDone(t *testing.T) {
	l := lease.NewLocalLocker(lease.Options{})
	work, release, ok := lease.Hold(ctxT(t), l, "repair", time.Second, nil)
	require.True(t, ok)
	leasetest.RequireTaken(t, l, "repair")
	_, _, again := lease.Hold(ctxT(t), l, "repair", time.Second, nil)
	require.False(t, again, "another holder skips the work")
	release()
	require.ErrorIs(t, context.Cause(work), context.Canceled)
	leasetest.MustLock(t, l, "repair", time.Second)
}

func TestHoldSkipsWhenTheAnswerIsUnknown(t *testing.T) {
	down := lease.LockerFunc(func(context.Context, string, time.Duration) (lease.Lease, bool, error) {
		return nil, false, errs.E(errs.Unavailable, "down")
	})
	ctx := ctxT(t)
	work, release, ok := lease.Hold(ctx, down, "repair", time.Second, nil)
	require.False(t, ok)
	require.Equal(t, ctx, work)
	release()
}

func TestCappedShortensLongLeases(t *testing.T) {
	var got []time.Duration
	rec := lease.LockerFunc(func(_ context.Context, _ string, ttl time.Duration) (lease.Lease, bool, error) {
		got = append(got, ttl)
		return nil, false, nil
	})
	c := lease.Capped(rec, time.Second)
	for _, ttl := range []time.Duration{time.Millisecond, time.Second, time.Hour} {
		_, _, _ = c.TryLock(ctxT(t), "x", ttl)
	}
	require.Equal(t, []time.Duration{time.Millisecond, time.Second, time.Second}, got)
}

// TestHeldKeepsTheLeaseAcrossRounds: the holder renews round after round;
// another process gets the lease only once the holder stops renewing.
func TestHeldKeepsTheLeaseAcrossRounds(t *testing.T) {
	s := openSQLite(t)
	a := lease.NewHeld(lease.NewStoreLocker(s, lease.Options{Owner: "a"}), "detector", 500*time.Millisecond)
	b := lease.NewHeld(lease.NewStoreLocker(s, lease.Options{Owner: "b"}), "detector", 500*time.Millisecond)
	require.True(t, a.Hold(ctxT(t)))
	for range 5 {
		time.Sleep(50 * time.Millisecond)
		require.True(t, a.Hold(ctxT(t)), "the holder renews")
		require.False(t, b.Hold(ctxT(t)))
	}
	require.Eventually(t, func() bool { return b.Hold(ctxT(t)) }, 10*time.Second, 20*time.Millisecond)
	require.False(t, a.Hold(ctxT(t)), "the old holder finds it taken")
}

// TestHeldIsValidUntilItsDeadline: Valid holds from a successful Hold until
// the lease's deadline, whoever holds it after, and never before a Hold.
func TestHeldIsValidUntilItsDeadline(t *testing.T) {
	s := openSQLite(t)
	a := lease.NewHeld(lease.NewStoreLocker(s, lease.Options{Owner: "a"}), "detector", 200*time.Millisecond)
	b := lease.NewHeld(lease.NewStoreLocker(s, lease.Options{Owner: "b"}), "detector", 200*time.Millisecond)
	require.False(t, a.Valid(), "nothing held yet")
	require.True(t, a.Hold(ctxT(t)))
	require.True(t, a.Valid())
	require.False(t, b.Hold(ctxT(t)))
	require.False(t, b.Valid())
	require.Eventually(t, func() bool { return !a.Valid() }, 10*time.Second, 10*time.Millisecond, "a paused holder's lease lapses")
	require.True(t, b.Hold(ctxT(t)))
	require.False(t, a.Valid(), "the lapsed holder stays invalid while another holds the lease")
	require.False(t, a.Hold(ctxT(t)))
	require.False(t, a.Valid())
}
