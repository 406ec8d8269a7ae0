package membership

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
)

// TestRingChangesBumpTheEpochBeforeTheyAreWritten follows a node through
// its life and checks, at each step, the store's log of epoch bumps and
// node writes, and the epoch each event carries.
func TestRingChangesBumpTheEpochBeforeTheyAreWritten(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SuccessThreshold = 1; o.FailureThreshold = 1 })
	ctx := context.Background()
	steps := []struct {
		name   string
		do     func(t *testing.T)
		ops    []string
		events []string
	}{
		{"registration of a new node: off the ring, no epoch",
			func(t *testing.T) { h.register(t, "node-1", 9001) },
			nil, nil},
		{"admission",
			func(t *testing.T) { h.sweep(t) },
			[]string{"bump 1", "update node-1 HEALTHY"}, []string{"JOINED node-1 @1"}},
		{"a good probe of a node on the ring changes no membership",
			func(t *testing.T) { h.sweep(t) },
			[]string{"update node-1 HEALTHY"}, nil},
		{"eviction",
			func(t *testing.T) { h.prober.set(url(9001), errDown); h.sweep(t) },
			[]string{"bump 2", "update node-1 UNHEALTHY"}, []string{"FAILED node-1 @2"}},
		{"a failed probe of an evicted node",
			func(t *testing.T) { h.sweep(t) },
			[]string{"update node-1 UNHEALTHY"}, nil},
		{"recovery",
			func(t *testing.T) { h.prober.set(url(9001), nil); h.sweep(t) },
			[]string{"bump 3", "update node-1 HEALTHY"}, []string{"RECOVERED node-1 @3"}},
		{"deregistration",
			func(t *testing.T) {
				_, err := h.reg.Deregister(ctx, "node-1")
				require.NoError(t, err)
			},
			[]string{"bump 4", "update node-1 DEREGISTERED"}, []string{"DEREGISTERED node-1 @4"}},
		{"deregistering again changes nothing",
			func(t *testing.T) {
				_, err := h.reg.Deregister(ctx, "node-1")
				require.NoError(t, err)
			},
			nil, nil},
		{"rejoin: off the ring until it joins, no epoch",
			func(t *testing.T) {
				_, err := h.reg.Rejoin(ctx, "node-1")
				require.NoError(t, err)
			},
			[]string{"update node-1 UNHEALTHY"}, []string{"REJOINED node-1 @0"}},
		{"the rejoined node's admission",
			func(t *testing.T) { h.sweep(t) },
			[]string{"bump 5", "update node-1 HEALTHY"}, []string{"JOINED node-1 @5"}},
	}
	for _, st := range steps {
		st.do(t)
		require.Equal(t, st.ops, h.store.takeOps(), st.name)
		require.Equal(t, st.events, h.events.takeEpochs(), st.name)
	}
}

// TestAFailedBumpWritesNothing: without its epoch a ring change is not
// written, so the store never holds a change no rebalance is owed for.
func TestAFailedBumpWritesNothing(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SuccessThreshold = 1; o.FailureThreshold = 1 })
	ctx := context.Background()
	h.register(t, "node-1", 9001)
	h.register(t, "node-2", 9002)
	h.store.put(meta.Node{ID: "node-3", Host: "127.0.0.1", Port: 9003, Status: meta.NodeHealthy, RegisteredAt: epoch, LastHealthyAt: &epoch, DiskID: diskA})
	require.NoError(t, h.reg.Load(ctx))
	h.prober.setDisk(url(9003), diskB)
	h.store.takeOps()
	before := map[string]meta.Node{}
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		before[id] = h.node(t, id)
	}
	h.store.failBump = errors.New("database gone")

	_, err := h.reg.Sweep(ctx)
	require.ErrorContains(t, err, "record the probe of node node-1: database gone", "the admission is not recorded")
	require.ErrorContains(t, err, "record the probe of node node-3: database gone", "nor the new disk")
	_, err = h.reg.Deregister(ctx, "node-2")
	require.ErrorContains(t, err, "database gone")

	require.Empty(t, h.store.takeOps(), "no node was written")
	for id, n := range before {
		require.Equal(t, n, h.node(t, id), id)
	}
	require.Empty(t, h.events.take())
	require.Equal(t, []string{"node-3"}, h.reg.Ring().Nodes())

	// Once the store takes bumps again, the same probes are recorded.
	h.store.failBump = nil
	h.sweep(t)
	require.Equal(t, []string{"JOINED node-1 @1", "JOINED node-2 @2", "DISK_REPLACED node-3 @3"}, h.events.takeEpochs())
}

// TestARetriedChangeBumpsOnce: a change that loses a race with another
// writer re-reads and re-applies, with the epoch it already took.
func TestARetriedChangeBumpsOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	h.store.takeOps()
	require.Equal(t, int64(1), h.store.bumps(), "the join")
	h.store.beforeUpdate = func(stored *meta.Node) {
		h.store.beforeUpdate = nil
		stored.ConsecutiveSuccesses++ // another coordinator's probe got in first
		stored.Version++
	}
	_, err := h.reg.Deregister(context.Background(), "node-1")
	require.NoError(t, err)
	require.Equal(t, []string{"bump 2", "update node-1 DEREGISTERED"}, h.store.takeOps(),
		"one bump for the change, before the write that won")
	require.Equal(t, []string{"DEREGISTERED node-1 @2"}, h.events.takeEpochs())
}
