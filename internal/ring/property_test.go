package ring

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// drawRing draws a ring of 1–8 distinct nodes with real MD5 positions.
func drawRing(t *rapid.T) *Ring {
	names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z][a-z0-9-]{0,6}`), 1, 8, rapid.ID[string]).Draw(t, "nodes")
	return New(rapid.IntRange(1, 40).Draw(t, "vnodes"), names...)
}

// drawTiedRing draws a ring whose points sit on a few small positions, so
// ties between nodes and between a node's own points are common.
func drawTiedRing(t *rapid.T) *Ring {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"A", "B", "C", "D", "E", "F"}), 1, 6, rapid.ID[string]).Draw(t, "nodes")
	vnodes := rapid.IntRange(1, 4).Draw(t, "vnodes")
	table := map[string]int64{}
	for _, n := range names {
		for i := 0; i < vnodes; i++ {
			v := fmt.Sprintf("%s#%d", n, i)
			table[v] = rapid.Int64Range(0, 40).Draw(t, v)
		}
	}
	return NewWithHash(vnodes, fakeHash(table), names...)
}

func TestPropertyPreferenceLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawRing(t)
		k := rapid.String().Draw(t, "key")
		n := rapid.IntRange(1, 10).Draw(t, "n")
		list := r.Preference(k, n)
		require.Len(t, list, min(n, len(r.Nodes())))
		seen := map[string]bool{}
		for _, node := range list {
			require.False(t, seen[node], "distinct nodes: %v", list)
			require.True(t, r.Has(node))
			seen[node] = true
		}
		primary, ok := r.Lookup(k)
		require.True(t, ok)
		require.Equal(t, primary, list[0])
		require.Equal(t, list, r.Preference(k, n+1)[:len(list)], "the list for n is a prefix of the list for n+1")
		require.Equal(t, list, r.AppendPreference(nil, k, n))
	})
}

func TestPropertyAddingNodeMovesKeysOnlyToIt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := drawRing(t)
		x := rapid.StringMatching(`[A-Z][a-z0-9]{0,6}`).Draw(t, "newcomer") // never a drawn name
		after := before.With(x)
		n := rapid.IntRange(1, 5).Draw(t, "n")
		for _, k := range rapid.SliceOfN(rapid.String(), 1, 50).Draw(t, "keys") {
			was, _ := before.Lookup(k)
			now, _ := after.Lookup(k)
			if was != now {
				require.Equal(t, x, now)
			}
			wasList, nowList := before.Preference(k, n), after.Preference(k, n)
			if slices.Equal(wasList, nowList) {
				continue
			}
			// The newcomer slots in where the walk first meets it; the old
			// list keeps its order and loses at most its last node.
			i := slices.Index(nowList, x)
			require.GreaterOrEqual(t, i, 0, "a changed list includes the newcomer")
			rest := slices.Delete(slices.Clone(nowList), i, i+1)
			require.Equal(t, wasList[:len(rest)], rest)
		}
	})
}

func TestPropertyRemovingNodeMovesOnlyItsKeys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		before := drawRing(t)
		gone := rapid.SampledFrom(before.Nodes()).Draw(t, "removed")
		after := before.Without(gone)
		n := rapid.IntRange(1, 5).Draw(t, "n")
		for _, k := range rapid.SliceOfN(rapid.String(), 1, 50).Draw(t, "keys") {
			wasList, nowList := before.Preference(k, n), after.Preference(k, n)
			if !slices.Contains(wasList, gone) {
				require.Equal(t, wasList, nowList)
				continue
			}
			require.Len(t, nowList, min(n, len(after.Nodes())))
			survivors := slices.DeleteFunc(slices.Clone(wasList), func(s string) bool { return s == gone })
			require.True(t, slices.Equal(survivors, nowList[:len(survivors)]), "survivors %v keep their order in %v", survivors, nowList)
		}
	})
}

// checkRanges compares RangesIncluding with the preference lists at pos and
// requires the ranges to be the fewest possible: non-empty, and no two of
// them meeting end to start (they would merge into one).
func checkRanges(t *rapid.T, r *Ring, node string, n int, positions []int64) {
	ranges := r.RangesIncluding(node, n)
	for i, a := range ranges {
		for j, b := range ranges {
			if i != j {
				require.NotEqual(t, a.To, b.From, "ranges %v could merge", ranges)
			}
		}
	}
	for _, pos := range positions {
		in := slices.ContainsFunc(ranges, func(g Range) bool { return g.Contains(pos) })
		want := slices.Contains(r.PreferenceAt(pos, n), node)
		require.Equal(t, want, in, "pos %d, ranges %v, list %v", pos, ranges, r.PreferenceAt(pos, n))
	}
}

func TestPropertyRangesIncludingMatchesPreference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawRing(t)
		node := rapid.SampledFrom(r.Nodes()).Draw(t, "node")
		n := rapid.IntRange(1, 9).Draw(t, "n")
		positions := []int64{0, math.MaxInt64}
		for _, p := range r.Points() {
			// Both sides of every boundary.
			positions = append(positions, p.Pos, p.Pos+1, max(p.Pos-1, 0))
		}
		for _, k := range rapid.SliceOfN(rapid.String(), 1, 100).Draw(t, "keys") {
			positions = append(positions, Position(k))
		}
		checkRanges(t, r, node, n, positions)
	})
}

func TestPropertyRangesIncludingOnTiedPositions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := drawTiedRing(t)
		node := rapid.SampledFrom(r.Nodes()).Draw(t, "node")
		n := rapid.IntRange(1, 7).Draw(t, "n")
		// The drawn positions lie in [0, 40]: every distinct answer is seen.
		positions := []int64{math.MaxInt64}
		for p := int64(0); p <= 42; p++ {
			positions = append(positions, p)
		}
		checkRanges(t, r, node, n, positions)
	})
}
