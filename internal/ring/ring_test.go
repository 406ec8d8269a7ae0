package ring

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeHash places the strings of table where it says and any decimal string
// at its own value, so tests can work out every answer by hand.
func fakeHash(table map[string]int64) func(string) int64 {
	return func(s string) int64 {
		if p, ok := table[s]; ok {
			return p
		}
		p, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			panic("fakeHash: no position for " + s)
		}
		return p
	}
}

// handRing is, clockwise: 10 A, 20 B, 30 C, 40 C, 50 A, 60 B.
func handRing(t *testing.T) *Ring {
	t.Helper()
	h := fakeHash(map[string]int64{"A#0": 10, "A#1": 50, "B#0": 20, "B#1": 60, "C#0": 30, "C#1": 40})
	r := NewWithHash(2, h, "A", "B", "C")
	require.Equal(t, []Point{{10, "A"}, {20, "B"}, {30, "C"}, {40, "C"}, {50, "A"}, {60, "B"}}, r.Points())
	return r
}

func owners(r *Ring) []string {
	var out []string
	for _, p := range r.Points() {
		out = append(out, p.Node)
	}
	return out
}

func TestPositionVectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"node-1#0", 6903187661124769136},
		{"P#0", 8881220912001310062},
		{"x5", 8430220832983623584},
	} {
		require.Equal(t, tc.want, Position(tc.in), tc.in)
	}
}

func TestPositionRange(t *testing.T) {
	for i := 0; i < 1000; i++ {
		require.GreaterOrEqual(t, Position("k"+strconv.Itoa(i)), int64(0))
	}
	long := string(make([]byte, 1000)) // longer than Position's stack buffer
	require.Equal(t, Position(long), Position(string([]byte(long))))
}

func TestContractPlacementVector(t *testing.T) {
	r := New(3, "P", "Q", "R")
	require.Equal(t, []string{"R", "Q", "P", "R", "Q", "R", "Q", "P", "P"}, owners(r))
	require.Equal(t, []string{"P", "R", "Q"}, r.Preference("x5", 3))
	primary, ok := r.Lookup("x5")
	require.True(t, ok)
	require.Equal(t, "P", primary)
}

func TestContractSharesVector(t *testing.T) {
	shares := New(100, "node-1", "node-2", "node-3").Shares()
	rounded := map[string]string{}
	for n, s := range shares {
		rounded[n] = fmt.Sprintf("%.2f", s)
	}
	require.Equal(t, map[string]string{"node-1": "32.40", "node-2": "32.39", "node-3": "35.21"}, rounded)
}

func TestLookupWrapAround(t *testing.T) {
	r := handRing(t)
	for _, tc := range []struct {
		key  string
		want string
	}{
		{"0", "A"},
		{"10", "A"}, // at a point: that point
		{"11", "B"},
		{"25", "C"},
		{"60", "B"},
		{"61", "A"}, // past the last point: wraps to the first
		{strconv.FormatInt(math.MaxInt64, 10), "A"},
	} {
		got, ok := r.Lookup(tc.key)
		require.True(t, ok)
		require.Equal(t, tc.want, got, "key %s", tc.key)
	}
}

func TestPreferenceByHand(t *testing.T) {
	r := handRing(t)
	for _, tc := range []struct {
		key  string
		n    int
		want []string
	}{
		{"5", 3, []string{"A", "B", "C"}},
		{"25", 3, []string{"C", "A", "B"}}, // C's second point is skipped
		{"25", 2, []string{"C", "A"}},
		{"35", 1, []string{"C"}},
		{"45", 3, []string{"A", "B", "C"}}, // walk wraps past the end
		{"55", 3, []string{"B", "A", "C"}}, // walk order, not sorted
		{"61", 2, []string{"A", "B"}},
		{"5", 4, []string{"A", "B", "C"}},  // fewer nodes than n: all
		{"5", 99, []string{"A", "B", "C"}}, // and the walk still ends
		{"5", 0, nil},
		{"5", -1, nil},
	} {
		require.Equal(t, tc.want, r.Preference(tc.key, tc.n), "key %s n %d", tc.key, tc.n)
	}
}

func TestPreferenceDuplicateVNodesOfOneMachine(t *testing.T) {
	// Four consecutive points of A: a walk over raw points would answer A,A.
	h := fakeHash(map[string]int64{"A#0": 1, "A#1": 2, "A#2": 3, "A#3": 4, "B#0": 5, "B#1": 6, "B#2": 7, "B#3": 8})
	r := NewWithHash(4, h, "A", "B")
	require.Equal(t, []string{"A", "B"}, r.Preference("0", 2))
	require.Equal(t, []string{"B", "A"}, r.Preference("6", 5))
}

func TestTiedPositionsOrderedByNode(t *testing.T) {
	h := fakeHash(map[string]int64{"B#0": 7, "A#0": 7, "C#0": 9})
	r := NewWithHash(1, h, "C", "B", "A")
	require.Equal(t, []Point{{7, "A"}, {7, "B"}, {9, "C"}}, r.Points())
	require.Equal(t, []string{"A", "B", "C"}, r.Preference("7", 3))
	require.Equal(t, []string{"C", "A", "B"}, r.Preference("8", 3))
}

func TestEmptyRing(t *testing.T) {
	for name, r := range map[string]*Ring{
		"new":         New(0),
		"all removed": New(0, "a", "b").Without("a", "b"),
		"atomic zero": (&Atomic{}).Load(),
	} {
		node, ok := r.Lookup("k")
		require.False(t, ok, name)
		require.Empty(t, node, name)
		require.Nil(t, r.Preference("k", 3), name)
		require.Nil(t, r.PreferenceAt(0, 3), name)
		require.Equal(t, []string{"x"}, r.AppendPreference([]string{"x"}, "k", 3), name)
		require.Empty(t, r.Shares(), name)
		require.Empty(t, r.Nodes(), name)
		require.Zero(t, r.Len(), name)
		require.Nil(t, r.RangesIncluding("a", 1), name)
		require.Equal(t, DefaultVNodes, r.VNodes(), name)
	}
}

func TestDeterministicAcrossInstancesAndOrders(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	want := New(50, nodes...)
	reversed := slices.Clone(nodes)
	slices.Reverse(reversed)
	for name, r := range map[string]*Ring{
		"reversed":        New(50, reversed...),
		"one at a time":   New(50).With("n3").With("n1").With("n5").With("n2").With("n4"),
		"with duplicates": New(50, "n2", "n2", "n1", "n3", "n5", "n4", "n1"),
		"add then remove": New(50, append(nodes, "extra", "n6")...).Without("n6", "extra"),
		"re-placed":       New(7, nodes...).WithVNodes(50),
	} {
		require.Equal(t, want.Points(), r.Points(), name)
		require.Equal(t, nodes, r.Nodes(), name)
		for i := 0; i < 200; i++ {
			k := "key-" + strconv.Itoa(i)
			require.Equal(t, want.Preference(k, 3), r.Preference(k, 3), name)
		}
	}
}

func TestSnapshotsAreImmutable(t *testing.T) {
	r := New(20, "a", "b", "c")
	before := r.Points()
	require.Same(t, r, r.With("a", "b"), "adding present nodes changes nothing")
	require.Same(t, r, r.Without("zzz"), "removing an absent node changes nothing")
	require.Same(t, r, r.WithVNodes(20))

	grown := r.With("d")
	shrunk := r.Without("a")
	replaced := r.WithVNodes(5)
	require.Equal(t, before, r.Points())
	require.Equal(t, []string{"a", "b", "c"}, r.Nodes())

	require.Equal(t, []string{"a", "b", "c", "d"}, grown.Nodes())
	require.Equal(t, 80, grown.Len())
	require.Equal(t, []string{"b", "c"}, shrunk.Nodes())
	require.Equal(t, 40, shrunk.Len())
	require.Equal(t, 15, replaced.Len())
	require.Equal(t, 5, replaced.VNodes())

	nodes := r.Nodes()
	nodes[0] = "mutated"
	require.True(t, r.Has("a"), "Nodes returns a copy")
	require.False(t, r.Has("mutated"))
}

func TestDefaultVNodes(t *testing.T) {
	require.Equal(t, DefaultVNodes, New(0, "a").VNodes())
	require.Equal(t, DefaultVNodes, New(-3, "a").Len())
	require.Equal(t, DefaultVNodes, New(4, "a").WithVNodes(0).VNodes())
}

func TestSharesByHand(t *testing.T) {
	r := handRing(t)
	pct := func(arc float64) float64 { return arc / float64(keyspace) * 100 }
	// A owns (60, 2^63) ∪ [0, 10] and (40, 50]; B (10, 20] and (50, 60];
	// C (20, 40].
	want := map[string]float64{
		"A": pct(float64(keyspace) - 60 + 10 + 10),
		"B": pct(20),
		"C": pct(20),
	}
	got := r.Shares()
	require.Len(t, got, 3)
	for n, w := range want {
		require.InDelta(t, w, got[n], 1e-12, n)
	}

	require.Equal(t, map[string]float64{"solo": 100}, New(1, "solo").Shares())
	all := 0.0
	for _, s := range New(100, "a", "b", "c", "d", "e").Shares() {
		all += s
	}
	require.InDelta(t, 100, all, 1e-9)
}

func TestRangeContains(t *testing.T) {
	for _, tc := range []struct {
		g    Range
		pos  int64
		want bool
	}{
		{Range{10, 20}, 10, false},
		{Range{10, 20}, 11, true},
		{Range{10, 20}, 20, true},
		{Range{10, 20}, 21, false},
		{Range{20, 10}, 21, true},
		{Range{20, 10}, math.MaxInt64, true},
		{Range{20, 10}, 0, true},
		{Range{20, 10}, 10, true},
		{Range{20, 10}, 15, false},
		{Range{20, 10}, 20, false},
		{Range{7, 7}, 7, true}, // equal ends: the whole ring
		{Range{7, 7}, 0, true},
	} {
		require.Equal(t, tc.want, tc.g.Contains(tc.pos), "%v contains %d", tc.g, tc.pos)
	}
}

func TestRangesIncludingByHand(t *testing.T) {
	r := handRing(t)
	// Lists of length 2 by point: 10 AB, 20 BC, 30 CA, 40 CA, 50 AB, 60 BA.
	for _, tc := range []struct {
		node string
		n    int
		want []Range
	}{
		{"A", 2, []Range{{20, 10}}},
		{"B", 2, []Range{{40, 20}}},
		{"C", 2, []Range{{10, 40}}},
		{"C", 1, []Range{{20, 40}}},
		{"A", 1, []Range{{60, 10}, {40, 50}}},
		{"A", 3, []Range{{10, 10}}}, // every list holds every node
		{"D", 2, nil},
		{"A", 0, nil},
	} {
		require.Equal(t, tc.want, r.RangesIncluding(tc.node, tc.n), "%s n=%d", tc.node, tc.n)
	}
}

func TestRangesIncludingAllPointsTied(t *testing.T) {
	// Every key belongs to A's point, the first of the tie: A is every
	// primary, B never.
	r := NewWithHash(1, fakeHash(map[string]int64{"A#0": 7, "B#0": 7}), "A", "B")
	require.Nil(t, r.RangesIncluding("B", 1))
	require.Equal(t, []Range{{7, 7}}, r.RangesIncluding("A", 1))
	require.Equal(t, []Range{{7, 7}}, r.RangesIncluding("B", 2))
}
