package metrics

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/meta"
)

// DurabilityFunc returns the store's durability answer (meta.Store.Durability
// over the healthy nodes) and the failure headroom computed from it. It must
// return once ctx is done.
type DurabilityFunc func(ctx context.Context) (d meta.Durability, headroom int, err error)

// DurabilityOptions configure a Durability collector. Zero values take the
// documented defaults.
type DurabilityOptions struct {
	// ReplicationFactor is the top bucket of dfs_durability_files: files
	// with at least this many healthy copies are counted under "<rf>+"
	// (default 3).
	ReplicationFactor int
	// Timeout bounds one count (default 5s: with many files at risk the
	// count takes longer than one by status).
	Timeout time.Duration
	// CacheFor is how long an answer, or a failure, is reused (default 15s).
	CacheFor time.Duration
	// Logger reports failed counts; nil discards them.
	Logger *slog.Logger
}

// Defaults of DurabilityOptions.
const (
	DefaultDurabilityTimeout  = 5 * time.Second
	DefaultDurabilityCacheFor = 15 * time.Second
)

// Durability is a prometheus.Collector exposing the durability report
// (GET /api/cluster/durability) as gauges, computed at scrape time and
// cached for CacheFor so that frequent or concurrent scrapes cost one
// count. While a count fails the gauges are absent (a stale number would
// look current) and dfs_durability_errors_total goes up.
type Durability struct {
	rf                                int
	files, atRisk, headroom, nodeLeft *prometheus.Desc
	errors                            prometheus.Counter
	report                            *scrapeCache[durabilitySample]
}

// durabilitySample is one answer of a DurabilityFunc.
type durabilitySample struct {
	d        meta.Durability
	headroom int
}

var _ prometheus.Collector = (*Durability)(nil)

// NewDurability returns a collector over sample.
func NewDurability(sample DurabilityFunc, o DurabilityOptions) *Durability {
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	report := newScrapeCache(func(ctx context.Context) (durabilitySample, error) {
		d, headroom, err := sample(ctx)
		return durabilitySample{d: d, headroom: headroom}, err
	}, scrapeOptions{o.Timeout, o.CacheFor, o.Logger}, DefaultDurabilityTimeout, DefaultDurabilityCacheFor,
		"durability", prometheus.CounterOpts{
			Name: "dfs_durability_errors_total",
			Help: "Failed or timed-out durability counts; while failing, the dfs_durability gauges are absent from scrapes.",
		})
	return &Durability{
		rf: o.ReplicationFactor,
		files: prometheus.NewDesc("dfs_durability_files",
			"Readable files by healthy copies (ACTIVE copies on HEALTHY nodes); the top bucket is the replication factor and more.",
			[]string{"copies"}, nil),
		atRisk: prometheus.NewDesc("dfs_durability_bytes_at_risk",
			"Bytes of readable files with fewer healthy copies than their replication factor.", nil, nil),
		headroom: prometheus.NewDesc("dfs_durability_failure_headroom",
			"Arbitrary node failures survivable now without any file losing its last healthy copy.", nil, nil),
		nodeLeft: prometheus.NewDesc("dfs_durability_node_files_left",
			"Files that would be left with this many healthy copies (1 or 0) if this node failed now.",
			[]string{"node", "copies"}, nil),
		errors: report.errors,
		report: report,
	}
}

// Describe implements prometheus.Collector.
func (c *Durability) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.files
	ch <- c.atRisk
	ch <- c.headroom
	ch <- c.nodeLeft
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Durability) Collect(ch chan<- prometheus.Metric) {
	r, err := c.report.get()
	if err == nil {
		d, headroom := r.d, r.headroom
		collectByCopies(ch, c.files, d.FilesByCopies, c.rf)
		ch <- prometheus.MustNewConstMetric(c.atRisk, prometheus.GaugeValue, float64(d.BytesAtRisk))
		ch <- prometheus.MustNewConstMetric(c.headroom, prometheus.GaugeValue, float64(headroom))
		for _, n := range d.Nodes {
			ch <- prometheus.MustNewConstMetric(c.nodeLeft, prometheus.GaugeValue, float64(n.FilesLeftWithOneCopy), n.NodeID, "1")
			ch <- prometheus.MustNewConstMetric(c.nodeLeft, prometheus.GaugeValue, float64(n.FilesLeftWithNoCopy), n.NodeID, "0")
		}
	}
	c.errors.Collect(ch)
}

// collectByCopies sends desc, labelled by copies, for every count of copies
// below top, at zero when no file has it, and for top and more under
// "<top>+"; byCopies maps a number of copies to the files that have it.
func collectByCopies(ch chan<- prometheus.Metric, desc *prometheus.Desc, byCopies map[int]int, top int) {
	buckets := make([]int, top+1)
	for copies, files := range byCopies {
		buckets[min(copies, top)] += files
	}
	for copies, files := range buckets {
		label := strconv.Itoa(copies)
		if copies == top {
			label += "+"
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(files), label)
	}
}
