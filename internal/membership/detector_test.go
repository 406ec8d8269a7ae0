package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

func TestOneFailedProbeDoesNotEvict(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	lastHealthy := h.node(t, "node-1").LastHealthyAt
	rg := h.reg.Ring()

	h.prober.set(url(9001), errDown)
	res := h.sweep(t)
	require.Same(t, rg, h.reg.Ring())
	require.Empty(t, h.events.take())
	require.Equal(t, NodeHealth{
		NodeID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeHealthy, OnRing: true,
		ConsecutiveFailures: 1, ConsecutiveSuccesses: 0,
		LastCheckAt: ptr(h.clock.now()), LastHealthyAt: lastHealthy,
		Error: "connection refused",
	}, res[0])
	require.Len(t, h.logs.matching(slog.LevelWarn, "health probe of node node-1 failed (1 in a row)"), 1)
}

func TestFailureThresholdEvicts(t *testing.T) {
	for _, threshold := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("threshold=", threshold), func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.FailureThreshold = threshold })
			for i, id := range []string{"node-1", "node-2", "node-3"} {
				h.healthyNode(t, id, 9001+i)
			}
			h.prober.set(url(9002), errDown)
			for i := 1; i < threshold; i++ {
				h.sweep(t)
				require.True(t, h.reg.Ring().Has("node-2"), "evicted after %d of %d failures", i, threshold)
			}
			require.Empty(t, h.events.take())

			res := h.sweep(t)
			require.Equal(t, []string{"FAILED node-2"}, h.events.take())
			require.Equal(t, []string{"node-1", "node-3"}, h.reg.Ring().Nodes())
			require.Equal(t, meta.NodeUnhealthy, res[1].Status)
			require.False(t, res[1].OnRing)
			require.Equal(t, threshold, res[1].ConsecutiveFailures)
			want := fmt.Sprintf("node node-2 failed %d consecutive health checks, evicted from the ring, 2 node(s) remain", threshold)
			require.Len(t, h.logs.matching(slog.LevelError, want), 1)
			h.requireRingMatchesStore(t)

			// A dead node failing on is not news: no event, no more errors.
			h.sweep(t)
			require.Empty(t, h.events.take())
			require.Len(t, h.logs.matching(slog.LevelError, "evicted"), 1)
			u, ok := h.reg.BaseURL("node-2")
			require.True(t, ok)
			require.Equal(t, url(9002), u)
		})
	}
}

func TestFlappingNodeNeverChangesTheRing(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "up", 9001)
	h.register(t, "down", 9002)
	h.prober.set(url(9002), errDown)
	h.sweep(t)
	rg := h.reg.Ring()

	for i := range 10 {
		// Each node alternates, in opposite phase, so both directions flap.
		if i%2 == 0 {
			h.prober.set(url(9001), errDown)
			h.prober.set(url(9002), nil)
		} else {
			h.prober.set(url(9001), nil)
			h.prober.set(url(9002), errDown)
		}
		h.sweep(t)
		require.Same(t, rg, h.reg.Ring(), "round %d", i)
		require.Equal(t, meta.NodeHealthy, h.node(t, "up").Status)
		require.Equal(t, meta.NodeUnhealthy, h.node(t, "down").Status)
	}
	require.Empty(t, h.events.take())
}

func TestRecoveryNeedsConsecutiveSuccesses(t *testing.T) {
	for _, threshold := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("threshold=", threshold), func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.SuccessThreshold = threshold; o.FailureThreshold = 1 })
			h.healthyNode(t, "node-1", 9001)
			h.prober.set(url(9001), errDown)
			h.sweep(t)
			require.Equal(t, []string{"FAILED node-1"}, h.events.take())

			// Successes interrupted by a failure start over.
			h.prober.set(url(9001), nil)
			for range threshold - 1 {
				h.sweep(t)
			}
			h.prober.set(url(9001), errDown)
			h.sweep(t)
			h.prober.set(url(9001), nil)
			for i := 1; i < threshold; i++ {
				h.sweep(t)
				require.False(t, h.reg.Ring().Has("node-1"))
			}
			require.Empty(t, h.events.take())

			h.sweep(t)
			require.Equal(t, []string{"RECOVERED node-1"}, h.events.take())
			require.True(t, h.reg.Ring().Has("node-1"))
			want := fmt.Sprintf("node node-1 recovered after %d consecutive successful probes, back on the ring (1 node(s))", threshold)
			require.Len(t, h.logs.matching(slog.LevelInfo, want), 1)
		})
	}
}

func TestHangingProbeIsCutAtProbeTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.ProbeTimeout = 20 * time.Millisecond })
	h.healthyNode(t, "node-1", 9001)
	h.healthyNode(t, "node-2", 9002)
	h.prober.setHang(url(9001))

	res := h.sweep(t)
	require.Equal(t, 1, res[0].ConsecutiveFailures)
	require.Contains(t, res[0].Error, "deadline exceeded")
	require.Equal(t, 0, res[1].ConsecutiveFailures, "the other node's probe is unaffected")
	require.Empty(t, res[1].Error)
}

func TestProbeTimeoutDefaultsToAtMostTheInterval(t *testing.T) {
	cases := []struct {
		interval, timeout, want time.Duration
	}{
		{0, 0, DefaultProbeTimeout},
		{500 * time.Millisecond, 0, 500 * time.Millisecond},
		{time.Minute, 0, DefaultProbeTimeout},
		{time.Minute, 5 * time.Second, 5 * time.Second},
	}
	for _, c := range cases {
		r, err := New(Options{Store: newMemStore(), Prober: newFakeProber(), Interval: c.interval, ProbeTimeout: c.timeout})
		require.NoError(t, err)
		require.Equal(t, c.want, r.probeTimeout, "interval %v timeout %v", c.interval, c.timeout)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := map[string]Options{
		"no store":           {Prober: newFakeProber()},
		"no prober":          {Store: newMemStore()},
		"negative threshold": {Store: newMemStore(), Prober: newFakeProber(), FailureThreshold: -1},
		"negative interval":  {Store: newMemStore(), Prober: newFakeProber(), Interval: -time.Second},
	}
	for name, o := range cases {
		_, err := New(o)
		require.Equal(t, errs.Invalid, errs.KindOf(err), name)
	}
}

func TestCancelledSweepCountsNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	before := h.node(t, "node-1")
	h.prober.setHang(url(9001))

	ctx, cancel := context.WithCancel(context.Background())
	h.prober.onProbe = func(string) { cancel() }
	_, err := h.reg.Sweep(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, h.node(t, "node-1"))
}

func TestStaleWriteIsReReadAndReApplied(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	h.prober.set(url(9001), errDown)
	h.sweep(t)

	// Another writer records a failure of its own between this sweep's read
	// and its write; the sweep must re-read and count on top of it.
	h.store.beforeUpdate = func(stored *meta.Node) {
		h.store.beforeUpdate = nil
		stored.ConsecutiveFailures++
		stored.Version++
	}
	updates := h.store.updates
	res := h.sweep(t)
	require.Equal(t, 2, h.store.updates-updates, "one stale write, one retry")
	require.Equal(t, 3, res[0].ConsecutiveFailures)
	require.Equal(t, meta.NodeUnhealthy, res[0].Status)
	require.Equal(t, []string{"FAILED node-1"}, h.events.take())
	h.requireRingMatchesStore(t)
}

func TestProbeOfAMovedOrDeregisteredNodeIsDiscarded(t *testing.T) {
	cases := map[string]func(h *harness){
		"deregistered": func(h *harness) {
			_, err := h.reg.Deregister(context.Background(), "node-1")
			require.NoError(t, err)
		},
		"moved": func(h *harness) {
			_, err := h.reg.Register(context.Background(), Announcement{NodeID: "node-1", Host: "127.0.0.1", Port: 9101})
			require.NoError(t, err)
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.register(t, "node-1", 9001)
			var once sync.Once
			h.prober.onProbe = func(string) { once.Do(func() { change(h) }) }
			before := h.prober.count(url(9001))
			h.sweep(t)
			require.Equal(t, before+1, h.prober.count(url(9001)))
			n := h.node(t, "node-1")
			require.Nil(t, n.LastCheckAt, "the outcome must be discarded")
			require.Zero(t, n.ConsecutiveSuccesses)
		})
	}
}

func TestSweepReportsEveryNodeAsJSON(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "a", 9001)
	h.register(t, "b", 9002)
	h.prober.set(url(9002), errDown)
	res := h.sweep(t)

	raw, err := json.Marshal(res)
	require.NoError(t, err)
	at := h.clock.now().Format(time.RFC3339)
	require.JSONEq(t, `[
	  {"nodeId":"a","host":"127.0.0.1","port":9001,"status":"HEALTHY","onRing":true,
	   "consecutiveFailures":0,"consecutiveSuccesses":3,"lastCheckAt":"`+at+`","lastHealthyAt":"`+at+`"},
	  {"nodeId":"b","host":"127.0.0.1","port":9002,"status":"UNHEALTHY","onRing":false,
	   "consecutiveFailures":1,"consecutiveSuccesses":0,"lastCheckAt":"`+at+`","lastHealthyAt":null,
	   "error":"connection refused"}
	]`, string(raw))
}

func TestSweepsNeverOverlap(t *testing.T) {
	h := newHarness(t, nil)
	h.register(t, "node-1", 9001)

	// The first probe waits until either a second probe starts (the sweeps
	// overlap) or a window passes in which an overlapping sweep would have
	// started.
	var once sync.Once
	second := make(chan struct{})
	var mu sync.Mutex
	inFlight, maxInFlight := 0, 0
	h.prober.onProbe = func(string) {
		mu.Lock()
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		mu.Unlock()
		first := false
		once.Do(func() { first = true })
		if first {
			select {
			case <-second:
			case <-time.After(200 * time.Millisecond):
			}
		} else {
			close(second)
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	var wg sync.WaitGroup
	sweepErrs := make([]error, 2)
	for i := range sweepErrs {
		wg.Go(func() { _, sweepErrs[i] = h.reg.Sweep(context.Background()) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(sweepErrs...))
	require.Equal(t, 1, maxInFlight)
	require.Equal(t, 2, h.node(t, "node-1").ConsecutiveSuccesses)
	require.Equal(t, []string{"JOINED node-1"}, h.events.take())
}

func ptr[T any](v T) *T { return &v }
