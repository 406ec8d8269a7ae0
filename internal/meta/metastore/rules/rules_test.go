package rules

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

func position() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(0, 20),
		rapid.SampledFrom([]int64{0, 1, math.MaxInt64 - 1, math.MaxInt64}),
		rapid.Int64Range(0, math.MaxInt64),
	)
}

func inRange(r meta.PositionRange, p int64) bool {
	if r.From < r.To {
		return r.From < p && p <= r.To
	}
	return p > r.From || p <= r.To
}

// TestIntervalsCoverExactlyTheRanges: a position is in some interval exactly
// when it is in some range, and the intervals are sorted, disjoint and not
// adjacent (so a join returns each file once).
func TestIntervalsCoverExactlyTheRanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ranges := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) meta.PositionRange {
			return meta.PositionRange{From: position().Draw(t, "from"), To: position().Draw(t, "to")}
		}), 0, 6).Draw(t, "ranges")
		iv, err := Intervals(ranges)
		require.NoError(t, err)
		for i, x := range iv {
			require.LessOrEqual(t, x.Lo, x.Hi)
			require.GreaterOrEqual(t, x.Lo, int64(0))
			if i > 0 {
				require.Greater(t, x.Lo, iv[i-1].Hi+1, "intervals are disjoint and not adjacent")
			}
		}
		probes := rapid.SliceOfN(position(), 1, 20).Draw(t, "probes")
		for _, r := range ranges {
			// The bounds and their neighbours are where mistakes hide.
			for _, p := range []int64{r.From, r.From + 1, r.To, r.To + 1} {
				if p >= 0 {
					probes = append(probes, p)
				}
			}
		}
		for _, p := range probes {
			want := false
			for _, r := range ranges {
				want = want || inRange(r, p)
			}
			got := false
			for _, x := range iv {
				got = got || (x.Lo <= p && p <= x.Hi)
			}
			require.Equal(t, want, got, "position %d", p)
		}
	})
}

func TestIntervalsRefuseNegativeBounds(t *testing.T) {
	_, err := Intervals([]meta.PositionRange{{From: 3, To: -1}})
	require.Equal(t, errs.Invalid, errs.KindOf(err))
}

func TestMergeReplicas(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stored := []meta.Replica{
		{ID: 1, NodeID: "a", Status: meta.ReplicaActive, CreatedAt: t0, UpdatedAt: t0, Version: 3},
		{ID: 2, NodeID: "b", Status: meta.ReplicaPending, CreatedAt: t0, UpdatedAt: t0, Version: 1},
		{ID: 3, NodeID: "c", Status: meta.ReplicaActive, CreatedAt: t0, UpdatedAt: t0, Version: 1},
	}
	wanted := []meta.Replica{
		{NodeID: "a", Status: meta.ReplicaActive},
		{NodeID: "b", Status: meta.ReplicaActive},
		{NodeID: "d", Status: meta.ReplicaPending},
	}
	changed, added, removed := MergeReplicas(stored, wanted)
	require.Equal(t, []int{1}, changed)
	require.Equal(t, []int{2}, added)
	require.Equal(t, []int64{3}, removed)
	require.Equal(t, stored[0], wanted[0], "an unchanged copy takes the stored row")
	require.Equal(t, int64(2), wanted[1].ID)
	require.Equal(t, t0, wanted[1].CreatedAt)
	require.Equal(t, meta.ReplicaActive, wanted[1].Status, "a changed copy keeps the wanted status")
	require.Zero(t, wanted[2].ID)
}

func TestCanonicalFileID(t *testing.T) {
	cases := map[string]bool{
		"9b2e4a3c-1d5f-4e6a-8b7c-0d1e2f3a4b5c":          true,
		"9B2E4A3C-1D5F-4E6A-8B7C-0D1E2F3A4B5C":          false,
		"9b2e4a3c1d5f4e6a8b7c0d1e2f3a4b5c":              false,
		"{9b2e4a3c-1d5f-4e6a-8b7c-0d1e2f3a4b5c}":        false,
		"urn:uuid:9b2e4a3c-1d5f-4e6a-8b7c-0d1e2f3a4b5c": false,
		"":          false,
		"../etc/pw": false,
	}
	for id, want := range cases {
		require.Equal(t, want, CanonicalFileID(id), id)
	}
}

func TestTime(t *testing.T) {
	in := time.Date(2026, 5, 1, 10, 0, 0, 123456789, time.FixedZone("X", -3600))
	got := Time(in)
	require.Equal(t, time.Date(2026, 5, 1, 11, 0, 0, 123456000, time.UTC), got)
	require.Equal(t, time.UTC, got.Location())
	require.Nil(t, TimePtr(nil))
}
