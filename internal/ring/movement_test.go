package ring

import (
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

const movementKeys = 10000

func key(i int) string { return "key-" + strconv.Itoa(i) }

func TestAddingFourthNodeMovesOnlyItsShareOfPrimaries(t *testing.T) {
	before := New(100, "node-1", "node-2", "node-3")
	after := before.With("node-4")
	moved, movedModulo := 0, 0
	for i := 0; i < movementKeys; i++ {
		k := key(i)
		was, _ := before.Lookup(k)
		now, _ := after.Lookup(k)
		if was != now {
			moved++
			require.Equal(t, "node-4", now, "a moved key can only move to the newcomer")
		}
		if h := uint64(Position(k)); h%3 != h%4 {
			movedModulo++
		}
	}
	// Measured: 2308 ring moves, 7394 modulo moves.
	require.GreaterOrEqual(t, moved, movementKeys*15/100)
	require.LessOrEqual(t, moved, movementKeys*40/100)
	require.Greater(t, movedModulo, movementKeys*70/100)
	require.Less(t, moved, movedModulo/2)
}

func TestFourthNodeAtRF3TouchesMostFilesButMovesAQuarterOfCopies(t *testing.T) {
	// The CONTRACT's movement note: only primaries follow 1/(n+1).
	for _, names := range [][]string{
		{"node-1", "node-2", "node-3", "node-4"},
		{"A", "B", "C", "D"},
		{"s1", "s2", "s3", "s4"},
	} {
		before := New(100, names[:3]...)
		after := before.With(names[3])
		affected, copiesMoved := 0, 0
		for i := 0; i < movementKeys; i++ {
			was, now := before.Preference(key(i), 3), after.Preference(key(i), 3)
			fresh := 0
			for _, n := range now {
				if !slices.Contains(was, n) {
					fresh++
				}
			}
			require.LessOrEqual(t, fresh, 1, "a join moves at most one copy of a file")
			copiesMoved += fresh
			if slices.Contains(now, names[3]) {
				affected++
				require.Equal(t, 1, fresh)
			}
		}
		// Measured: affected 6711, 7464, 7473 of 10000; copies moved 22.4 %,
		// 24.9 %, 24.9 % of 30000.
		require.GreaterOrEqual(t, affected, movementKeys*60/100, names)
		require.LessOrEqual(t, affected, movementKeys*80/100, names)
		copyShare := float64(copiesMoved) / (3 * movementKeys)
		require.GreaterOrEqual(t, copyShare, 0.20, names)
		require.LessOrEqual(t, copyShare, 0.28, names)
	}
}

func TestRemovingNodeMovesOnlyItsKeys(t *testing.T) {
	before := New(100, "node-1", "node-2", "node-3", "node-4")
	after := before.Without("node-2")
	movedPrimaries, changedLists := 0, 0
	for i := 0; i < movementKeys; i++ {
		k := key(i)
		was, _ := before.Lookup(k)
		now, _ := after.Lookup(k)
		if was != now {
			movedPrimaries++
			require.Equal(t, "node-2", was, "only the removed node's keys move")
		}
		wasList, nowList := before.Preference(k, 3), after.Preference(k, 3)
		if !slices.Contains(wasList, "node-2") {
			require.Equal(t, wasList, nowList, "a list without the removed node is untouched")
			continue
		}
		changedLists++
		// The survivors keep their order and one successor joins at the end.
		survivors := slices.DeleteFunc(slices.Clone(wasList), func(n string) bool { return n == "node-2" })
		require.Equal(t, survivors, nowList[:2])
	}
	require.NotZero(t, movedPrimaries)
	require.NotZero(t, changedLists)
}

func shareSpread(shares map[string]float64) (stddev, maxOverMin float64) {
	lo, hi, sum, sq := math.Inf(1), 0.0, 0.0, 0.0
	for _, s := range shares {
		lo, hi = min(lo, s), max(hi, s)
		sum += s
		sq += s * s
	}
	mean := sum / float64(len(shares))
	return math.Sqrt(sq/float64(len(shares)) - mean*mean), hi / lo
}

func TestMoreVirtualNodesBalanceBetter(t *testing.T) {
	var nodes []string
	for i := 0; i < 10; i++ {
		nodes = append(nodes, "node-"+strconv.Itoa(i))
	}
	// Measured on these ten names (stddev of percent shares, max/min):
	// 1 point 8.45 and 47, 100 points 0.73 and 1.27, 200 points 0.53 and 1.17.
	sd1, ratio1 := shareSpread(New(1, nodes...).Shares())
	sd100, ratio100 := shareSpread(New(100, nodes...).Shares())
	sd200, ratio200 := shareSpread(New(200, nodes...).Shares())
	require.Greater(t, sd1, 5*sd100)
	require.Greater(t, sd1, 5*sd200)
	require.Greater(t, ratio1, 10.0)
	require.Less(t, ratio100, 1.5)
	require.Less(t, ratio200, 1.5)
	require.Less(t, sd100, 1.5)
	require.Less(t, sd200, 1.5)
}
