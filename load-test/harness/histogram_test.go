package harness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogramQuantilesWithinTwoPercent(t *testing.T) {
	h := NewHistogram()
	// 1ms … 1000ms, one sample each: the p-th percentile is p*10 ms.
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := time.Duration(q*1000) * time.Millisecond
		got := h.Quantile(q)
		require.GreaterOrEqual(t, got, want, "q=%v", q)
		require.LessOrEqual(t, float64(got), float64(want)*1.02, "q=%v", q)
	}
	require.Equal(t, time.Second, h.Max())
	require.Equal(t, time.Second, h.Quantile(1), "the top quantile is the exact maximum")
	require.EqualValues(t, 1000, h.Count())
	require.Equal(t, 500500*time.Microsecond, h.Mean())
}

func TestHistogramEdges(t *testing.T) {
	h := NewHistogram()
	require.Zero(t, h.Quantile(0.5), "an empty histogram has no percentiles")
	h.Record(0)
	h.Record(time.Hour * 24 * 365 * 100) // past the last bucket
	require.LessOrEqual(t, h.Quantile(0.5), time.Microsecond, "the first bucket reaches 1µs")
	require.Equal(t, time.Hour*24*365*100, h.Quantile(1))

	other := NewHistogram()
	other.Record(5 * time.Millisecond)
	h.Merge(other)
	require.EqualValues(t, 3, h.Count())
}
