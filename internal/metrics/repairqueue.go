package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RepairQueueFunc counts the files waiting for repair by their number of
// ACTIVE copies; meta.Store.RepairQueue has this shape. It must return once
// ctx is done.
type RepairQueueFunc func(ctx context.Context) (map[int]int, error)

// RepairQueueOptions configure a RepairQueue collector. Zero values take the
// documented defaults.
type RepairQueueOptions struct {
	// ReplicationFactor is the top bucket: files with at least this many
	// copies (waiting because they are misplaced) are counted under
	// "<rf>+" (default 3).
	ReplicationFactor int
	// Timeout bounds one count (default DefaultCountTimeout).
	Timeout time.Duration
	// CacheFor is how long a count, or a failure, is reused (default
	// DefaultCountCacheFor).
	CacheFor time.Duration
	// Logger reports failed counts; nil discards them.
	Logger *slog.Logger
}

// RepairQueue is a prometheus.Collector exposing dfs_repair_queue_files
// {copies}: the files waiting for repair (DEGRADED and FAILED), by how many
// ACTIVE copies they have left, which is also the order the repair loop
// takes them in. It is counted at scrape time over an index and cached for
// CacheFor; while a count fails the gauge is absent and
// dfs_repair_queue_errors_total goes up.
type RepairQueue struct {
	rf     int
	files  *prometheus.Desc
	errors prometheus.Counter
	counts *scrapeCache[map[int]int]
}

var _ prometheus.Collector = (*RepairQueue)(nil)

// NewRepairQueue returns a collector over count.
func NewRepairQueue(count RepairQueueFunc, o RepairQueueOptions) *RepairQueue {
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	counts := newScrapeCache(count, scrapeOptions{o.Timeout, o.CacheFor, o.Logger}, DefaultCountTimeout, DefaultCountCacheFor,
		"the repair queue", prometheus.CounterOpts{
			Name: "dfs_repair_queue_errors_total",
			Help: "Failed or timed-out counts of the repair queue; while failing, dfs_repair_queue_files is absent from scrapes.",
		})
	return &RepairQueue{
		rf: o.ReplicationFactor,
		files: prometheus.NewDesc("dfs_repair_queue_files",
			"Files waiting for repair (DEGRADED and FAILED) by ACTIVE copies left; the repair loop takes the fewest first.",
			[]string{"copies"}, nil),
		errors: counts.errors,
		counts: counts,
	}
}

// Describe implements prometheus.Collector.
func (c *RepairQueue) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.files
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *RepairQueue) Collect(ch chan<- prometheus.Metric) {
	if counts, err := c.counts.get(); err == nil {
		collectByCopies(ch, c.files, counts, c.rf)
	}
	c.errors.Collect(ch)
}
