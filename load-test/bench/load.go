package main

import (
	"context"
	"sync"
	"time"

	"github.com/dfs-project/dfs/load-test/harness"
)

// loopResult is what a closed-loop measurement saw inside its window.
type loopResult struct {
	ops      int
	failures int
	window   time.Duration
	hist     *harness.Histogram
	firstErr error
}

func (r loopResult) rate() float64 { return float64(r.ops) / r.window.Seconds() }

// closedLoop runs op from n workers, each starting its next call as soon as
// the last returns, for warm + window. Only calls that end inside the window
// count: the warm-up fills connection pools and caches, and a call cut by
// the window's end is neither counted nor timed.
func closedLoop(ctx context.Context, n int, warm, window time.Duration, op func(ctx context.Context, worker, i int) error) loopResult {
	start := time.Now()
	from, to := start.Add(warm), start.Add(warm+window)
	return runWorkers(ctx, n, window, op, func(w int) func() (int, bool) {
		i := 0
		return func() (int, bool) {
			if ctx.Err() != nil || !time.Now().Before(to) {
				return 0, false
			}
			i++
			return i - 1, true
		}
	}, func(_, e time.Time) bool { return !e.Before(from) && !e.After(to) })
}

// runWorkers runs n workers, each calling op for every start its own
// next gives until next says there are no more, and adds up the calls that
// counted says fall inside the measured window (s and e are a call's start
// and end); a counted call that succeeded is timed.
func runWorkers(ctx context.Context, n int, window time.Duration, op func(ctx context.Context, worker, i int) error,
	next func(worker int) func() (int, bool), counted func(s, e time.Time) bool) loopResult {
	res := loopResult{window: window, hist: harness.NewHistogram()}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			h := harness.NewHistogram()
			ops, fails := 0, 0
			var firstErr error
			more := next(w)
			for i, ok := more(); ok; i, ok = more() {
				s := time.Now()
				err := op(ctx, w, i)
				e := time.Now()
				if !counted(s, e) {
					continue
				}
				if err != nil {
					fails++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				ops++
				h.Record(e.Sub(s))
			}
			mu.Lock()
			defer mu.Unlock()
			res.ops += ops
			res.failures += fails
			res.hist.Merge(h)
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
		})
	}
	wg.Wait()
	return res
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
