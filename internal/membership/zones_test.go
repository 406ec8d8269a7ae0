package membership

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/ring"
)

func (h *harness) announce(t *testing.T, id string, port int, zone string, weight float64) {
	t.Helper()
	_, err := h.reg.Register(context.Background(), Announcement{NodeID: id, Host: "127.0.0.1", Port: port, Zone: zone, Weight: weight})
	require.NoError(t, err)
}

func TestTheRingCarriesReportedZonesAndWeights(t *testing.T) {
	h := newHarness(t, nil)
	h.announce(t, "node-1", 9001, "z1", 2)
	h.announce(t, "node-2", 9002, "z2", 0)
	for range h.reg.okThresh {
		h.sweep(t)
	}
	rg := h.reg.Ring()
	require.Equal(t, []ring.Member{{Node: "node-1", Zone: "z1", Weight: 2}, {Node: "node-2", Zone: "z2", Weight: 1}}, rg.Members())
	require.Equal(t, 2*rg.VNodes(), rg.PointsOf("node-1"))
	h.events.take()

	// Another coordinator loading the same store builds the same ring.
	fresh, err := New(Options{Store: h.store, Prober: h.prober, VNodes: rg.VNodes()})
	require.NoError(t, err)
	require.NoError(t, fresh.Load(context.Background()))
	require.Equal(t, rg.Members(), fresh.Ring().Members())
	require.Equal(t, rg.Points(), fresh.Ring().Points())
}

func TestAReportedChangeOfZoneOrWeightIsAMembershipChange(t *testing.T) {
	h := newHarness(t, nil)
	h.healthyNode(t, "node-1", 9001)
	h.healthyNode(t, "node-2", 9002)
	h.events.take()
	bumps := h.store.bumps()

	h.announce(t, "node-1", 9001, "", 1) // weight 1 written out: the same placement
	require.Empty(t, h.events.take(), "no placement change")
	require.Equal(t, bumps, h.store.bumps())

	h.announce(t, "node-1", 9001, "rack-a", 1)
	require.Equal(t, []string{"PLACEMENT_CHANGED node-1 @" + strconv.FormatInt(bumps+1, 10)}, h.events.takeEpochs())
	require.Equal(t, "rack-a", h.reg.Ring().Zone("node-1"))
	require.Equal(t, "rack-a", h.node(t, "node-1").Zone)

	h.announce(t, "node-1", 9001, "rack-a", 3)
	require.Len(t, h.events.take(), 1)
	require.Equal(t, 3*h.reg.Ring().VNodes(), h.reg.Ring().PointsOf("node-1"))

	h.announce(t, "node-1", 9001, "rack-a", 3)
	require.Empty(t, h.events.take(), "a heartbeat changes nothing")
	h.requireRingMatchesStore(t)
}

func TestAnEvictedNodesNewZoneWaitsForItsReturn(t *testing.T) {
	h := newHarness(t, nil)
	h.register(t, "node-1", 9001) // not on the ring yet
	h.announce(t, "node-1", 9001, "rack-b", 2)
	require.Empty(t, h.events.take(), "off the ring: nothing moves")
	require.Zero(t, h.store.bumps())
	for range h.reg.okThresh {
		h.sweep(t)
	}
	m, ok := h.reg.Ring().Member("node-1")
	require.True(t, ok)
	require.Equal(t, ring.Member{Node: "node-1", Zone: "rack-b", Weight: 2}, m, "it joins with what it reported")
}

func TestAnOperatorsOverrideWinsUntilReset(t *testing.T) {
	h := newHarness(t, nil)
	h.announce(t, "node-1", 9001, "reported", 1)
	for range h.reg.okThresh {
		h.sweep(t)
	}
	h.events.take()

	zone, weight := "rack-9", 2.0
	n, err := h.reg.SetPlacement(context.Background(), "node-1", PlacementEdit{Zone: &zone, Weight: &weight})
	require.NoError(t, err)
	require.Equal(t, "rack-9", n.PlacementZone())
	require.Len(t, h.events.take(), 1)
	require.Equal(t, ring.Member{Node: "node-1", Zone: "rack-9", Weight: 2}, must(h.reg.Ring().Member("node-1")))

	// The node's own reports no longer move it.
	h.announce(t, "node-1", 9001, "elsewhere", 5)
	require.Empty(t, h.events.take())
	require.Equal(t, "rack-9", h.reg.Ring().Zone("node-1"))
	require.Equal(t, "elsewhere", h.node(t, "node-1").Zone, "what it reports is kept for when the override goes")

	// Setting what is set changes nothing.
	_, err = h.reg.SetPlacement(context.Background(), "node-1", PlacementEdit{Zone: &zone})
	require.NoError(t, err)
	require.Empty(t, h.events.take())

	// An override to no zone.
	none := ""
	_, err = h.reg.SetPlacement(context.Background(), "node-1", PlacementEdit{Zone: &none})
	require.NoError(t, err)
	require.Len(t, h.events.take(), 1)
	require.False(t, h.reg.Ring().Zoned())

	_, err = h.reg.SetPlacement(context.Background(), "node-1", PlacementEdit{ResetZone: true, ResetWeight: true})
	require.NoError(t, err)
	require.Len(t, h.events.take(), 1)
	require.Equal(t, ring.Member{Node: "node-1", Zone: "elsewhere", Weight: 5}, must(h.reg.Ring().Member("node-1")))
	h.requireRingMatchesStore(t)
}

func TestSetPlacementRefusesBadInput(t *testing.T) {
	h := newHarness(t, nil)
	h.register(t, "node-1", 9001)
	bad, zero, big, z := "a b", 0.0, 1001.0, "z"
	for _, e := range []PlacementEdit{{Zone: &bad}, {Weight: &zero}, {Weight: &big}, {Zone: &z, ResetZone: true}} {
		_, err := h.reg.SetPlacement(context.Background(), "node-1", e)
		require.Equal(t, errs.Invalid, errs.KindOf(err), "%+v: %v", e, err)
	}
	_, err := h.reg.SetPlacement(context.Background(), "nope", PlacementEdit{Zone: &z})
	require.Equal(t, errs.NotFound, errs.KindOf(err))
	_, err = h.reg.Register(context.Background(), Announcement{NodeID: "node-2", Host: "h", Port: 1, Weight: -1})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	_, err = h.reg.Register(context.Background(), Announcement{NodeID: "node-2", Host: "h", Port: 1, Zone: "x\ny"})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
}

func must[T any](v T, ok bool) T {
	if !ok {
		panic("not found")
	}
	return v
}
