package membership

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

func TestLoadRebuildsTheRingFromTheStore(t *testing.T) {
	h := newHarness(t, nil)
	statuses := map[string]meta.NodeStatus{
		"node-1": meta.NodeHealthy,
		"node-2": meta.NodeUnhealthy,
		"node-3": meta.NodeHealthy,
		"node-4": meta.NodeDeregistered,
	}
	port := 9000
	for id, st := range statuses {
		port++
		h.store.put(meta.Node{ID: id, Host: "10.0.0.1", Port: port, Status: st, RegisteredAt: epoch})
	}
	require.Empty(t, h.reg.Ring().Nodes())

	require.NoError(t, h.reg.Load(context.Background()))
	require.Equal(t, []string{"node-1", "node-3"}, h.reg.Ring().Nodes())
	require.Equal(t, 10, h.reg.Ring().VNodes())
	for id := range statuses {
		u, ok := h.reg.BaseURL(id)
		require.True(t, ok, id)
		require.Contains(t, u, "http://10.0.0.1:90")
	}
	_, ok := h.reg.BaseURL("ghost")
	require.False(t, ok)
	require.Empty(t, h.events.take(), "loading is not a membership change")

	// The same ring a coordinator would have built: a restart moves no data.
	want := ring.New(10, "node-1", "node-3")
	require.Equal(t, want.Points(), h.reg.Ring().Points())

	// Loading again with nothing changed publishes nothing new.
	rg := h.reg.Ring()
	require.NoError(t, h.reg.Load(context.Background()))
	require.Same(t, rg, h.reg.Ring())
}

func TestCoordinatorsSharingAStoreConverge(t *testing.T) {
	h := newHarness(t, nil)
	other, err := New(Options{Store: h.store, Prober: h.prober, VNodes: 10})
	require.NoError(t, err)

	h.healthyNode(t, "node-1", 9001)
	h.healthyNode(t, "node-2", 9002)
	require.NoError(t, other.Load(context.Background()))
	require.Equal(t, h.reg.Ring().Points(), other.Ring().Points())

	_, err = h.reg.Deregister(context.Background(), "node-1")
	require.NoError(t, err)
	require.NoError(t, other.Load(context.Background()))
	require.Equal(t, []string{"node-2"}, other.Ring().Nodes())
	requireRingMatches(t, other, h.store)
}

func TestConcurrentChangesKeepTheRingEqualToTheHealthySet(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SuccessThreshold = 1; o.FailureThreshold = 1 })
	const nodes = 12
	for i := range nodes {
		if i%3 == 0 {
			h.prober.set(url(9000+i), errDown)
		}
	}
	var wg sync.WaitGroup
	for i := range nodes {
		id := fmt.Sprint("node-", i)
		wg.Go(func() {
			for range 5 {
				_, _ = h.reg.Register(context.Background(), Announcement{NodeID: id, Host: "127.0.0.1", Port: 9000 + i})
			}
			if i%4 == 0 {
				_, _ = h.reg.Deregister(context.Background(), id)
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 5 {
				_, _ = h.reg.Sweep(context.Background())
				_ = h.reg.Load(context.Background())
				_ = h.reg.Ring().Preference("some-file", 3)
			}
		})
	}
	wg.Wait()
	h.requireRingMatchesStore(t)

	// One more sweep settles every node that was registered after the last
	// one; the ring must still match, and hold exactly the healthy survivors.
	h.sweep(t)
	h.requireRingMatchesStore(t)
	var want []string
	for i := range nodes {
		if i%3 != 0 && i%4 != 0 {
			want = append(want, fmt.Sprint("node-", i))
		}
	}
	got := h.reg.Ring().Nodes()
	require.ElementsMatch(t, want, got)
}

func TestRunSweepsAndProbesNewNodesAtOnce(t *testing.T) {
	// With an hour between sweeps, the node can only reach the success
	// threshold of 2 through Run's first sweep plus the immediate probe its
	// registration asked for.
	joined := make(chan Event, 1)
	h := newHarness(t, func(o *Options) {
		o.Interval = time.Hour
		o.OnEvent = func(e Event) {
			if e.Kind == Joined {
				joined <- e
			}
		}
	})
	h.register(t, "node-1", 9001)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.reg.Run(ctx)
	}()
	select {
	case e := <-joined:
		require.Equal(t, "node-1", e.Node.ID)
		require.True(t, e.Ring.Has("node-1"))
	case <-time.After(10 * time.Second):
		t.Fatal("node-1 did not join")
	}
	cancel()
	<-done
	require.Equal(t, 2, h.prober.count(url(9001)))
}

func TestRunRefreshesTheRingFromTheStore(t *testing.T) {
	// Another coordinator marks a node HEALTHY in the shared store. This
	// registry's own probes fail but stay far below its failure threshold, so
	// only Run's refresh can put the node on its ring; the next probe after
	// that sees it there.
	h := newHarness(t, func(o *Options) { o.Interval = time.Millisecond; o.FailureThreshold = 1 << 20 })
	h.prober.set(url(9001), errDown)
	h.store.put(meta.Node{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeUnhealthy, RegisteredAt: epoch})
	published := make(chan struct{})
	var once sync.Once
	h.prober.onProbe = func(string) {
		if h.reg.Ring().Has("node-1") {
			once.Do(func() { close(published) })
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.reg.Run(ctx)
	}()
	_, _, _, err := h.reg.update(context.Background(), "node-1", func(n *meta.Node) (edit, error) {
		n.Status = meta.NodeHealthy
		return write, nil
	})
	require.NoError(t, err)
	select {
	case <-published:
	case <-time.After(10 * time.Second):
		t.Fatal("the ring was not refreshed from the store")
	}
	cancel()
	<-done
	require.Empty(t, h.events.take(), "a change made by another coordinator is not re-announced")
}

func TestRunSweepsOnlyWhileItHoldsTheSweepLock(t *testing.T) {
	// Without the lock Run still refreshes the ring from the store but never
	// probes, so two coordinators never count one node's failures twice.
	var held atomic.Bool
	asked := make(chan struct{}, 64)
	h := newHarness(t, func(o *Options) {
		o.Interval = time.Millisecond
		o.SweepLock = lease.LockerFunc(func(_ context.Context, name string, ttl time.Duration) (lease.Lease, bool, error) {
			select {
			case asked <- struct{}{}:
			default:
			}
			if !held.Load() {
				return nil, false, nil
			}
			return lease.NewLocalLocker(lease.Options{}).TryLock(context.Background(), name, ttl)
		})
	})
	h.store.put(meta.Node{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeHealthy, RegisteredAt: epoch})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.reg.Run(ctx)
	}()
	for range 5 { // five rounds asked and refused
		<-asked
	}
	require.Zero(t, h.prober.count(url(9001)), "no probe without the lock")
	require.Eventually(t, func() bool { return h.reg.Ring().Has("node-1") }, 10*time.Second, time.Millisecond, "the refresh still runs")
	held.Store(true)
	require.Eventually(t, func() bool { return h.prober.count(url(9001)) > 0 }, 10*time.Second, time.Millisecond)
	cancel()
	<-done
}

// A sweep whose lease lapsed while it probed (the process was paused, say)
// writes none of its outcomes: another coordinator may have taken the lease
// and changed the nodes meanwhile, and what the stale probes saw would undo
// that. Here the paused sweep saw the node answer just before it died and
// the new holder evicted it; with one good probe enough to recover, writing
// the stale answer would put a dead node back on the ring.
func TestASweepWhoseLeaseLapsedWritesNothing(t *testing.T) {
	var lapse atomic.Bool
	h := newHarness(t, func(o *Options) {
		o.SuccessThreshold = 1
		o.SweepLock = lease.LockerFunc(func(_ context.Context, name string, _ time.Duration) (lease.Lease, bool, error) {
			return &lapsingLease{name: name, lapsed: &lapse}, true, nil
		})
	})
	h.store.put(meta.Node{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeHealthy, RegisteredAt: epoch})
	require.NoError(t, h.reg.Load(context.Background()))
	h.prober.onProbe = func(string) {
		n := h.node(t, "node-1")
		n.Status, n.ConsecutiveFailures = meta.NodeUnhealthy, 2
		h.store.put(n)
		lapse.Store(true)
	}
	h.reg.round(context.Background())
	n := h.node(t, "node-1")
	require.Equal(t, meta.NodeUnhealthy, n.Status, "%+v", n)
	require.Equal(t, 2, n.ConsecutiveFailures, "the new holder's count stands")
	require.False(t, h.reg.Ring().Has("node-1"))
	require.Empty(t, h.events.take())
	require.Len(t, h.logs.matching(slog.LevelWarn, "lease lapsed"), 1)
}

// lapsingLease is held until lapsed is set, then its deadline is past.
type lapsingLease struct {
	name   string
	lapsed *atomic.Bool
}

func (l *lapsingLease) Name() string { return l.name }
func (l *lapsingLease) Deadline() time.Time {
	if l.lapsed.Load() {
		return time.Now().Add(-time.Second)
	}
	return time.Now().Add(time.Hour)
}
func (l *lapsingLease) Renew(context.Context) (bool, error) { return !l.lapsed.Load(), nil }
func (l *lapsingLease) Release(context.Context) error       { return nil }
