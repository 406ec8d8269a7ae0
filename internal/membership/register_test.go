package membership

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

func TestNewNodeJoinsAfterExactlySuccessThresholdProbes(t *testing.T) {
	for _, threshold := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("threshold=", threshold), func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.SuccessThreshold = threshold })
			n := h.register(t, "node-1", 9001)
			require.Equal(t, meta.NodeUnhealthy, n.Status)
			require.Equal(t, epoch, n.RegisteredAt)
			require.False(t, h.reg.Ring().Has("node-1"))
			u, ok := h.reg.BaseURL("node-1")
			require.True(t, ok)
			require.Equal(t, "http://127.0.0.1:9001", u)

			for i := 1; i < threshold; i++ {
				h.sweep(t)
				require.False(t, h.reg.Ring().Has("node-1"), "on the ring after %d of %d probes", i, threshold)
				require.Equal(t, i, h.node(t, "node-1").ConsecutiveSuccesses)
				require.Nil(t, h.node(t, "node-1").LastHealthyAt)
			}
			require.Empty(t, h.events.take())

			res := h.sweep(t)
			require.Equal(t, []string{"JOINED node-1"}, h.events.take())
			require.Equal(t, []string{"node-1"}, h.reg.Ring().Nodes())
			got := h.node(t, "node-1")
			require.Equal(t, meta.NodeHealthy, got.Status)
			require.Equal(t, h.clock.now(), *got.LastHealthyAt)
			require.Len(t, res, 1)
			require.True(t, res[0].OnRing)
			require.Len(t, h.logs.matching(slog.LevelInfo, "node node-1 joined the cluster at http://127.0.0.1:9001, ring now has 1 node(s)"), 1)
		})
	}
}

func TestHeartbeatChangesNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	before := h.node(t, "node-1")
	rg := h.reg.Ring()
	logged := len(h.logs.recs)

	for range 3 {
		n := h.register(t, "node-1", 9001)
		require.Equal(t, before, n)
	}
	require.Equal(t, before, h.node(t, "node-1"))
	require.Same(t, rg, h.reg.Ring(), "a heartbeat must not publish a new ring")
	require.Empty(t, h.events.take())
	require.Len(t, h.logs.recs, logged, "a heartbeat that changes nothing logs nothing")
}

func TestAddressClaimOfHealthyNodeIsConflict(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-2", 9002)
	before := h.node(t, "node-2")

	_, err := h.reg.Register(context.Background(), Announcement{NodeID: "node-2", Host: "10.0.0.9", Port: 9002})
	require.Equal(t, errs.Conflict, errs.KindOf(err))
	require.EqualError(t, err, "node-2 is registered at 127.0.0.1:9002 and healthy")
	require.Equal(t, before, h.node(t, "node-2"))
	u, _ := h.reg.BaseURL("node-2")
	require.Equal(t, "http://127.0.0.1:9002", u)
}

func TestDeadNodeIDIsReclaimableAtNewAddress(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	h.prober.set(url(9001), errDown)
	h.sweep(t)
	h.sweep(t)
	require.Equal(t, []string{"FAILED node-1"}, h.events.take())

	n := h.register(t, "node-1", 9101)
	require.Equal(t, meta.NodeUnhealthy, n.Status)
	require.Equal(t, 9101, n.Port)
	require.Zero(t, n.ConsecutiveFailures)
	require.Zero(t, n.ConsecutiveSuccesses)
	u, _ := h.reg.BaseURL("node-1")
	require.Equal(t, "http://127.0.0.1:9101", u)
	require.Len(t, h.logs.matching(slog.LevelInfo, "node node-1 re-registered at 127.0.0.1:9101 (was 127.0.0.1:9001)"), 1)

	// The new address answers; the old one is no longer asked.
	before := h.prober.count(url(9001))
	h.sweep(t)
	h.sweep(t)
	require.Equal(t, before, h.prober.count(url(9001)))
	require.Equal(t, []string{"RECOVERED node-1"}, h.events.take())
	require.True(t, h.reg.Ring().Has("node-1"))
}

func TestRegisterRejectsInvalidInput(t *testing.T) {
	cases := []struct {
		name, id, host string
		port           int
		msg            string
	}{
		{"empty id", "", "h", 1, "invalid node id"},
		{"id starts with dash", "-a", "h", 1, "invalid node id"},
		{"id with slash", "a/b", "h", 1, "invalid node id"},
		{"id with space", "a b", "h", 1, "invalid node id"},
		{"id too long", strings.Repeat("a", 64), "h", 1, "invalid node id"},
		{"empty host", "n", "", 1, "host is required"},
		{"host with space", "n", "a b", 1, "invalid host"},
		{"host with slash", "n", "a/b", 1, "invalid host"},
		{"host as URL", "n", "http://a", 1, "invalid host"},
		{"host with brackets", "n", "[::1]", 1, "invalid host"},
		{"port zero", "n", "h", 0, "invalid port 0"},
		{"port too big", "n", "h", 65536, "invalid port 65536"},
		{"negative port", "n", "h", -1, "invalid port -1"},
	}
	h := newHarness(t, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.reg.Register(context.Background(), Announcement{NodeID: c.id, Host: c.host, Port: c.port})
			require.Equal(t, errs.Invalid, errs.KindOf(err))
			require.ErrorContains(t, err, c.msg)
		})
	}
	nodes, err := h.reg.Nodes(context.Background())
	require.NoError(t, err)
	require.Empty(t, nodes)
}

func TestRegisterAcceptsValidInput(t *testing.T) {
	cases := []struct{ id, host string }{
		{"n", "h"},
		{"storage-node-1.eu_west", "storage-node-1.storage.svc.cluster.local"},
		{strings.Repeat("a", 63), "10.0.0.1"},
		{"v6", "::1"},
	}
	h := newHarness(t, nil)
	for _, c := range cases {
		_, err := h.reg.Register(context.Background(), Announcement{NodeID: c.id, Host: c.host, Port: 65535})
		require.NoError(t, err, c.id)
	}
	u, _ := h.reg.BaseURL("v6")
	require.Equal(t, "http://[::1]:65535", u)
}

func TestDeregisterTakesNodeOffTheRingAtOnceAndIsTerminal(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	h.healthyNode(t, "node-2", 9002)

	n, err := h.reg.Deregister(context.Background(), "node-2")
	require.NoError(t, err)
	require.Equal(t, meta.NodeDeregistered, n.Status)
	require.Equal(t, []string{"node-1"}, h.reg.Ring().Nodes())
	require.Equal(t, []string{"DEREGISTERED node-2"}, h.events.take())
	require.Len(t, h.logs.matching(slog.LevelInfo, "node node-2 deregistered, off the ring, 1 node(s) remain"), 1)
	u, ok := h.reg.BaseURL("node-2")
	require.True(t, ok, "a deregistered node stays a copy source")
	require.Equal(t, "http://127.0.0.1:9002", u)

	// Twice is idempotent.
	again, err := h.reg.Deregister(context.Background(), "node-2")
	require.NoError(t, err)
	require.Equal(t, n, again)
	require.Empty(t, h.events.take())

	// Its heartbeats and good probes never bring it back; the ignored
	// heartbeat is logged once.
	probed := h.prober.count(url(9002))
	for range 4 {
		got := h.register(t, "node-2", 9002)
		require.Equal(t, meta.NodeDeregistered, got.Status)
		res := h.sweep(t)
		require.Equal(t, meta.NodeDeregistered, res[1].Status)
		require.False(t, res[1].OnRing)
	}
	require.Equal(t, probed, h.prober.count(url(9002)), "a deregistered node is not probed")
	require.Equal(t, n, h.node(t, "node-2"))
	require.Equal(t, []string{"node-1"}, h.reg.Ring().Nodes())
	require.Empty(t, h.events.take())
	require.Len(t, h.logs.matching(slog.LevelInfo, "ignoring the registration of deregistered node node-2"), 1)

	// Rejoin, then threshold probes, bring it back as a join.
	n, err = h.reg.Rejoin(context.Background(), "node-2")
	require.NoError(t, err)
	require.Equal(t, meta.NodeUnhealthy, n.Status)
	require.Nil(t, n.LastHealthyAt)
	require.Equal(t, []string{"REJOINED node-2"}, h.events.take())
	require.False(t, h.reg.Ring().Has("node-2"))
	h.sweep(t)
	require.False(t, h.reg.Ring().Has("node-2"))
	h.sweep(t)
	require.Equal(t, []string{"JOINED node-2"}, h.events.take())
	require.Equal(t, []string{"node-1", "node-2"}, h.reg.Ring().Nodes())
	h.requireRingMatchesStore(t)

	// A later deregistration's heartbeat is logged again, once.
	_, err = h.reg.Deregister(context.Background(), "node-2")
	require.NoError(t, err)
	h.register(t, "node-2", 9002)
	h.register(t, "node-2", 9002)
	require.Len(t, h.logs.matching(slog.LevelInfo, "ignoring the registration of deregistered node node-2"), 2)
}

func TestDeregisterAnUnhealthyNode(t *testing.T) {
	h := newHarness(t, nil)
	h.register(t, "node-1", 9001)
	n, err := h.reg.Deregister(context.Background(), "node-1")
	require.NoError(t, err)
	require.Equal(t, meta.NodeDeregistered, n.Status)
	require.Equal(t, []string{"DEREGISTERED node-1"}, h.events.take())
	h.requireRingMatchesStore(t)
}

func TestUnknownNodeIsNodeNotFound(t *testing.T) {
	h := newHarness(t, nil)
	calls := map[string]func() error{
		"Node":       func() error { _, err := h.reg.Node(context.Background(), "ghost"); return err },
		"Deregister": func() error { _, err := h.reg.Deregister(context.Background(), "ghost"); return err },
		"Rejoin":     func() error { _, err := h.reg.Rejoin(context.Background(), "ghost"); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.Equal(t, errs.NotFound, errs.KindOf(err))
			require.Equal(t, "NODE_NOT_FOUND", errs.CodeOf(err))
			require.ErrorContains(t, err, "node ghost is not registered")
		})
	}
	require.Empty(t, h.events.take())
}

func TestRejoinOfANodeThatIsNotDeregisteredIsConflict(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	h.register(t, "node-2", 9002)
	for _, id := range []string{"node-1", "node-2"} {
		before := h.node(t, id)
		_, err := h.reg.Rejoin(context.Background(), id)
		require.Equal(t, errs.Conflict, errs.KindOf(err), id)
		require.ErrorContains(t, err, "not deregistered")
		require.Equal(t, before, h.node(t, id))
	}
	require.Empty(t, h.events.take())
}

func TestNodesAreOrderedByID(t *testing.T) {
	h := newHarness(t, nil)
	for _, id := range []string{"c", "a", "b"} {
		h.register(t, id, 9000)
	}
	nodes, err := h.reg.Nodes(context.Background())
	require.NoError(t, err)
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	require.Equal(t, []string{"a", "b", "c"}, ids)
	n, err := h.reg.Node(context.Background(), "b")
	require.NoError(t, err)
	require.Equal(t, "b", n.ID)
}

func TestRegisterWhenAnotherCoordinatorCreatesTheNodeFirst(t *testing.T) {
	// Another coordinator inserts the row between this one's read and its
	// insert: the announcement then counts as a heartbeat of that row.
	h := newHarness(t, nil)
	var theirs meta.Node
	h.store.beforeCreate = func() {
		h.store.beforeCreate = nil
		theirs = meta.Node{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeUnhealthy, RegisteredAt: epoch.Add(-1), Version: 1}
		h.store.nodes["node-1"] = theirs
	}
	got := h.register(t, "node-1", 9001)
	require.Equal(t, theirs, got)
	require.Equal(t, theirs, h.node(t, "node-1"))
}

func TestStatusFollowsEveryTransition(t *testing.T) {
	h := newHarness(t, nil)
	_, ok := h.reg.Status("node-1")
	require.False(t, ok, "unknown node")

	h.register(t, "node-1", 9001)
	st, ok := h.reg.Status("node-1")
	require.True(t, ok)
	require.Equal(t, meta.NodeUnhealthy, st)

	h.sweep(t)
	h.sweep(t)
	st, _ = h.reg.Status("node-1")
	require.Equal(t, meta.NodeHealthy, st)

	h.prober.set(url(9001), fmt.Errorf("down"))
	h.sweep(t)
	h.sweep(t)
	st, _ = h.reg.Status("node-1")
	require.Equal(t, meta.NodeUnhealthy, st)

	_, err := h.reg.Deregister(context.Background(), "node-1")
	require.NoError(t, err)
	st, _ = h.reg.Status("node-1")
	require.Equal(t, meta.NodeDeregistered, st)

	// A second registry loading the same store sees the same statuses.
	other, err := New(Options{Store: h.store, Prober: h.prober})
	require.NoError(t, err)
	require.NoError(t, other.Load(context.Background()))
	st, ok = other.Status("node-1")
	require.True(t, ok)
	require.Equal(t, meta.NodeDeregistered, st)
}
