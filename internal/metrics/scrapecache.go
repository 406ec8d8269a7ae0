package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeCache is how a collector counts in the metadata store at scrape
// time without a count per scrape: the answer is kept for cacheFor, the lock
// is held across a count so that concurrent scrapes share one, and each
// count is bounded by timeout. A failed count is cached too (for the same
// time), counted in errors and logged; the collector then leaves its gauges
// out, since a stale number would look current.
type scrapeCache[T any] struct {
	sample   func(context.Context) (T, error)
	timeout  time.Duration
	cacheFor time.Duration
	errors   prometheus.Counter
	log      *slog.Logger
	what     string           // what is counted, for the log line
	now      func() time.Time // replaced by tests

	mu      sync.Mutex
	at      time.Time // when the cached answer was taken; zero before the first
	last    T
	lastErr error
}

// scrapeOptions are what every scrape-time collector's options hold; zero
// values take the collector's defaults.
type scrapeOptions struct {
	timeout, cacheFor time.Duration
	log               *slog.Logger
}

// newScrapeCache returns the cache of a collector that counts what with
// sample, its failures counted by a new counter made from errs; timeout and
// cacheFor default to defTimeout and defCacheFor, the logger to none.
func newScrapeCache[T any](sample func(context.Context) (T, error), o scrapeOptions, defTimeout, defCacheFor time.Duration,
	what string, errs prometheus.CounterOpts) *scrapeCache[T] {
	if o.timeout <= 0 {
		o.timeout = defTimeout
	}
	if o.cacheFor <= 0 {
		o.cacheFor = defCacheFor
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	return &scrapeCache[T]{
		sample: sample, timeout: o.timeout, cacheFor: o.cacheFor,
		errors: prometheus.NewCounter(errs), log: o.log, what: what, now: time.Now,
	}
}

// get returns the cached answer while it is fresh, and counts anew otherwise.
func (c *scrapeCache[T]) get() (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.at.IsZero() && now.Sub(c.at) < c.cacheFor {
		return c.last, c.lastErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	c.last, c.lastErr = c.sample(ctx)
	c.at = now
	if c.lastErr != nil {
		c.errors.Inc()
		c.log.Warn("counting "+c.what+" for metrics failed", "err", c.lastErr)
	}
	return c.last, c.lastErr
}
