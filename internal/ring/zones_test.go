package ring

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestContractZoneVector(t *testing.T) {
	r := New(3).WithMembers(
		Member{Node: "P", Zone: "z1"},
		Member{Node: "Q", Zone: "z2"},
		Member{Node: "R", Zone: "z1"},
	)
	require.Equal(t, []string{"R", "Q", "P", "R", "Q", "R", "Q", "P", "P"}, owners(r), "zones move no point")
	require.Equal(t, []string{"P", "Q", "R"}, r.Preference("x5", 3))
	require.Equal(t, []string{"P", "Q"}, r.Preference("x5", 2))
	require.Equal(t, []string{"P"}, r.Preference("x5", 1))
	primary, _ := r.Lookup("x5")
	require.Equal(t, "P", primary)
}

func TestPointsFor(t *testing.T) {
	for _, tc := range []struct {
		v    int
		w    float64
		want int
	}{
		{100, 1, 100},
		{100, 0, 100}, // no weight given: 1
		{100, 2, 200},
		{100, 0.5, 50},
		{100, 1.005, 101}, // 100.5 + 0.5, exactly
		{100, 0.285, 29},  // 28.5 + 0.5: the decimal, not its binary neighbour 28.4999…
		{100, 0.015, 2},
		{100, 0.005, 1},
		{100, 0.004, 1}, // floor(0.9) = 0, raised to the minimum of one point
		{3, 1.5, 5},     // 4.5 + 0.5
		{1, 0.4, 1},
		{100, 1e300, 1 << 31},
	} {
		require.Equal(t, tc.want, PointsFor(tc.v, tc.w), "V=%d w=%v", tc.v, tc.w)
	}
}

func TestWeightGivesPoints(t *testing.T) {
	r := New(10).WithMembers(Member{Node: "a", Weight: 2}, Member{Node: "b"}, Member{Node: "c", Weight: 0.25})
	require.Equal(t, 20, r.PointsOf("a"))
	require.Equal(t, 10, r.PointsOf("b"))
	require.Equal(t, 3, r.PointsOf("c"))
	require.Equal(t, 0, r.PointsOf("d"))
	require.Equal(t, 33, r.Len())
	// The points are a's "a#0" … "a#19": the first ten are those of weight 1.
	plain := New(10, "a")
	for _, p := range plain.Points() {
		require.Contains(t, r.Points(), p)
	}
	m, ok := r.Member("a")
	require.True(t, ok)
	require.Equal(t, Member{Node: "a", Weight: 2}, m)
	m, _ = r.Member("b")
	require.Equal(t, Member{Node: "b", Weight: 1}, m)
	_, ok = r.Member("d")
	require.False(t, ok)
	// Re-placing with other points per node keeps each weight.
	r = r.WithVNodes(20)
	require.Equal(t, 40, r.PointsOf("a"))
	require.Equal(t, 5, r.PointsOf("c"))
	require.Equal(t, 65, r.Len())
}

func TestWithMembersChangesOnlyWhatDiffers(t *testing.T) {
	r := New(5).WithMembers(Member{Node: "a", Zone: "z1"}, Member{Node: "b", Zone: "z2"})
	require.Same(t, r, r.WithMembers(Member{Node: "a", Zone: "z1", Weight: 1}), "nothing changed")
	require.Same(t, r, r.With("a", "b"), "With ignores present nodes and keeps their zones")
	moved := r.WithMembers(Member{Node: "a", Zone: "z3"})
	require.Equal(t, "z3", moved.Zone("a"))
	require.Equal(t, "z1", r.Zone("a"), "the old snapshot is unchanged")
	require.Equal(t, r.Points(), moved.Points(), "a zone change moves no point")
	cleared := moved.WithMembers(Member{Node: "a"}, Member{Node: "b"})
	require.False(t, cleared.Zoned())
	require.Equal(t, New(5, "a", "b").Points(), cleared.Points())
	require.True(t, r.Without("b").Zoned())
	require.False(t, r.Without("a", "b").Zoned())
	require.Equal(t, "", r.Without("a").Zone("a"))
}

func TestZonesAndZoneCount(t *testing.T) {
	r := New(5).WithMembers(Member{Node: "a", Zone: "z1"}, Member{Node: "b", Zone: "z1"}, Member{Node: "c"}, Member{Node: "d"})
	require.Equal(t, []string{"", "z1"}, r.Zones())
	require.Equal(t, 3, r.ZoneCount(), "z1, and c and d each on its own")
	require.Equal(t, 0, New(5).ZoneCount())
}

func TestFewerZonesThanCopies(t *testing.T) {
	// Two zones, three copies: pass 1 takes one node of each, pass 2 the
	// first node skipped.
	r := New(50).WithMembers(
		Member{Node: "a1", Zone: "a"}, Member{Node: "a2", Zone: "a"},
		Member{Node: "b1", Zone: "b"}, Member{Node: "b2", Zone: "b"},
	)
	for i := 0; i < 200; i++ {
		list := r.Preference("key-"+strconv.Itoa(i), 3)
		require.Len(t, list, 3)
		require.NotEqual(t, r.Zone(list[0]), r.Zone(list[1]), "%v", list)
	}
	// One zone: the lists are today's.
	one := New(50).WithMembers(Member{Node: "a1", Zone: "a"}, Member{Node: "a2", Zone: "a"}, Member{Node: "a3", Zone: "a"})
	plain := New(50, "a1", "a2", "a3")
	for i := 0; i < 200; i++ {
		k := "key-" + strconv.Itoa(i)
		require.Equal(t, plain.Preference(k, 3), one.Preference(k, 3))
	}
}

var zoneNames = []string{"", "z1", "z2", "z3"}

// drawMembers draws 1–8 distinct nodes, each with a zone from a small set
// (or none) and a weight from a few sizes.
func drawMembers(t *rapid.T) []Member {
	names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z][a-z0-9-]{0,6}`), 1, 8, rapid.ID[string]).Draw(t, "nodes")
	ms := make([]Member, len(names))
	for i, n := range names {
		ms[i] = Member{
			Node:   n,
			Zone:   rapid.SampledFrom(zoneNames).Draw(t, "zone of "+n),
			Weight: rapid.SampledFrom([]float64{0.5, 1, 1.5, 2, 3}).Draw(t, "weight of "+n),
		}
	}
	return ms
}

func TestPropertyZonedPreferenceLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := New(rapid.IntRange(1, 30).Draw(t, "vnodes")).WithMembers(drawMembers(t)...)
		k := rapid.String().Draw(t, "key")
		n := rapid.IntRange(1, 10).Draw(t, "n")
		list := r.Preference(k, n)
		require.Len(t, list, min(n, len(r.Nodes())))
		seen := map[string]bool{}
		zones := map[string]bool{}
		for _, node := range list {
			require.False(t, seen[node], "distinct nodes: %v", list)
			require.True(t, r.Has(node))
			seen[node] = true
			zones[r.zoneKey(node)] = true
		}
		// Never two copies in one zone while a zone on the ring is unused.
		require.Equal(t, min(len(list), r.ZoneCount()), len(zones), "list %v", list)
		primary, ok := r.Lookup(k)
		require.True(t, ok)
		require.Equal(t, primary, list[0])
		require.Equal(t, list, r.Preference(k, n+1)[:len(list)], "the list for n is a prefix of the list for n+1")
		require.Equal(t, list, r.AppendPreference([]string{"x"}, k, n)[1:])
	})
}

func TestPropertyZonelessRingIsTodaysRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := drawMembers(t)
		names := make([]string, len(ms))
		for i := range ms {
			ms[i].Zone, ms[i].Weight = "", 1
			names[i] = ms[i].Node
		}
		v := rapid.IntRange(1, 30).Draw(t, "vnodes")
		plain, members := New(v, names...), New(v).WithMembers(ms...)
		require.Equal(t, plain.Points(), members.Points())
		require.False(t, members.Zoned())
		for _, k := range rapid.SliceOfN(rapid.String(), 1, 50).Draw(t, "keys") {
			for n := 1; n <= 4; n++ {
				require.Equal(t, plain.Preference(k, n), members.Preference(k, n))
			}
		}
	})
}

func TestPropertyRaisingAWeightMovesKeysOnlyToThatNode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ms := drawMembers(t)
		zoned := rapid.Bool().Draw(t, "zoned")
		if !zoned {
			for i := range ms {
				ms[i].Zone = ""
			}
		}
		before := New(rapid.IntRange(1, 30).Draw(t, "vnodes")).WithMembers(ms...)
		x := rapid.SampledFrom(ms).Draw(t, "raised")
		x.Weight *= rapid.SampledFrom([]float64{1.5, 2, 4}).Draw(t, "factor")
		after := before.WithMembers(x)
		n := rapid.IntRange(1, 5).Draw(t, "n")
		for _, k := range rapid.SliceOfN(rapid.String(), 1, 50).Draw(t, "keys") {
			was, _ := before.Lookup(k)
			now, _ := after.Lookup(k)
			if was != now {
				require.Equal(t, x.Node, now)
			}
			wasList, nowList := before.Preference(k, n), after.Preference(k, n)
			if slices.Equal(wasList, nowList) {
				continue
			}
			require.Contains(t, nowList, x.Node, "a list that changes gains the raised node")
			if !zoned {
				i := slices.Index(nowList, x.Node)
				rest := slices.Delete(slices.Clone(nowList), i, i+1)
				require.Equal(t, slices.DeleteFunc(slices.Clone(wasList), func(s string) bool { return s == x.Node })[:len(rest)], rest)
			}
		}
	})
}

func TestPropertyZonedRangesIncludingMatchesPreference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := New(rapid.IntRange(1, 20).Draw(t, "vnodes")).WithMembers(drawMembers(t)...)
		node := rapid.SampledFrom(r.Nodes()).Draw(t, "node")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		positions := []int64{0, math.MaxInt64}
		for _, p := range r.Points() {
			positions = append(positions, p.Pos, p.Pos+1, max(p.Pos-1, 0))
		}
		checkRanges(t, r, node, n, positions)
	})
}

// TestSharesFollowWeights checks, on a fixed ring, that each node's share of
// the keyspace and of primaries over many keys is its weight's share within
// 20 % of it: with 256 points per unit of weight a node's arc varies by a few
// percent, far inside the tolerance.
func TestSharesFollowWeights(t *testing.T) {
	weights := []float64{1, 1, 2, 1, 3, 0.5, 1, 2}
	ms := make([]Member, len(weights))
	var total float64
	for i, w := range weights {
		ms[i] = Member{Node: fmt.Sprintf("node-%d", i+1), Zone: "z" + strconv.Itoa(i%3), Weight: w}
		total += w
	}
	r := New(256).WithMembers(ms...)
	shares := r.Shares()
	const keys = 200_000
	owned := map[string]int{}
	for i := 0; i < keys; i++ {
		p, _ := r.Lookup("key-" + strconv.Itoa(i))
		owned[p]++
	}
	for _, m := range ms {
		want := m.Weight / total * 100
		require.InEpsilon(t, want, shares[m.Node], 0.2, "%s keyspace share", m.Node)
		require.InEpsilon(t, want, float64(owned[m.Node])/keys*100, 0.2, "%s primaries", m.Node)
	}
}
