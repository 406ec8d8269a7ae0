package harness

import (
	"math"
	"time"
)

// Histogram records durations in logarithmic buckets, so that its memory is
// fixed however long a run lasts. Each bucket spans 2 % of its lower bound,
// which is the precision of the percentiles it reports; the maximum is exact.
// It is not safe for concurrent use (Recorder guards it).
type Histogram struct {
	counts []uint64
	n      uint64
	max    time.Duration
	sum    time.Duration
}

const (
	histBase   = float64(time.Microsecond) // the first bucket's upper bound
	histGrowth = 1.02
	// histBuckets reach 1µs·1.02^1400 ≈ 10^12 µs, far past any timeout.
	histBuckets = 1400
)

var logGrowth = math.Log(histGrowth)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{counts: make([]uint64, histBuckets)} }

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

func bucketOf(d time.Duration) int {
	if float64(d) <= histBase {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(d)/histBase) / logGrowth))
	return min(i, histBuckets-1)
}

// upper is the upper bound of bucket i.
func upper(i int) time.Duration {
	return time.Duration(histBase * math.Pow(histGrowth, float64(i)))
}

// Merge adds every sample of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest sample.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the average sample, 0 when there is none.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the upper bound of the bucket holding the q-th quantile
// (0 < q ≤ 1), never more than the maximum; 0 when there are no samples.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			if i == histBuckets-1 { // the last bucket has no upper bound
				return h.max
			}
			return min(upper(i), h.max)
		}
	}
	return h.max
}

// Summary is a histogram's figures in milliseconds, for reports.
type Summary struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50Ms"`
	P99   float64 `json:"p99Ms"`
	Max   float64 `json:"maxMs"`
	Mean  float64 `json:"meanMs"`
}

// Summary returns h's count, p50, p99, max and mean.
func (h *Histogram) Summary() Summary {
	return Summary{Count: h.n, P50: ms(h.Quantile(0.50)), P99: ms(h.Quantile(0.99)), Max: ms(h.max), Mean: ms(h.Mean())}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }
