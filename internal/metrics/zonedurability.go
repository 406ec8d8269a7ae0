package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/meta"
)

// ZoneDurabilityFunc returns the store's count of what a whole zone's
// failure would do (meta.Store.ZoneDurability over the healthy nodes) and
// the zone failure headroom computed from it. It must return once ctx is
// done.
type ZoneDurabilityFunc func(ctx context.Context) (z meta.ZoneDurability, headroom int, err error)

// ZoneDurabilityOptions configure a ZoneDurability collector. Zero values
// take the defaults of DurabilityOptions.
type ZoneDurabilityOptions struct {
	// Timeout bounds one count (default DefaultDurabilityTimeout).
	Timeout time.Duration
	// CacheFor is how long an answer, or a failure, is reused (default
	// DefaultDurabilityCacheFor).
	CacheFor time.Duration
	// Logger reports failed counts; nil discards them.
	Logger *slog.Logger
}

// ZoneDurability is a prometheus.Collector exposing the zone part of the
// durability report as gauges, counted at scrape time and cached as
// Durability's are. While a count fails the gauges are absent and
// dfs_durability_zone_errors_total goes up.
type ZoneDurability struct {
	headroom, zoneLeft, collapsed *prometheus.Desc
	errors                        prometheus.Counter
	report                        *scrapeCache[zoneSample]
}

// zoneSample is one answer of a ZoneDurabilityFunc.
type zoneSample struct {
	z        meta.ZoneDurability
	headroom int
}

var _ prometheus.Collector = (*ZoneDurability)(nil)

// NewZoneDurability returns a collector over sample.
func NewZoneDurability(sample ZoneDurabilityFunc, o ZoneDurabilityOptions) *ZoneDurability {
	report := newScrapeCache(func(ctx context.Context) (zoneSample, error) {
		z, headroom, err := sample(ctx)
		return zoneSample{z: z, headroom: headroom}, err
	}, scrapeOptions{o.Timeout, o.CacheFor, o.Logger}, DefaultDurabilityTimeout, DefaultDurabilityCacheFor,
		"zone durability", prometheus.CounterOpts{
			Name: "dfs_durability_zone_errors_total",
			Help: "Failed or timed-out zone durability counts; while failing, the zone gauges are absent from scrapes.",
		})
	return &ZoneDurability{
		headroom: prometheus.NewDesc("dfs_durability_zone_failure_headroom",
			"Whole zones that can fail now, whichever they are, without any file losing its last healthy copy.", nil, nil),
		zoneLeft: prometheus.NewDesc("dfs_durability_zone_files_left",
			"Files that would be left with this many healthy copies (1 or 0) if every node of this zone failed now; a node without a zone is its own zone, named by its ID in brackets.",
			[]string{"zone", "copies"}, nil),
		collapsed: prometheus.NewDesc("dfs_files_zone_collapsed",
			"Readable files with two healthy copies in one zone while a zone they are not in has a healthy node.", nil, nil),
		errors: report.errors,
		report: report,
	}
}

// Describe implements prometheus.Collector.
func (c *ZoneDurability) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.headroom
	ch <- c.zoneLeft
	ch <- c.collapsed
	c.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *ZoneDurability) Collect(ch chan<- prometheus.Metric) {
	r, err := c.report.get()
	if err == nil {
		ch <- prometheus.MustNewConstMetric(c.headroom, prometheus.GaugeValue, float64(r.headroom))
		ch <- prometheus.MustNewConstMetric(c.collapsed, prometheus.GaugeValue, float64(r.z.Collapsed))
		for _, z := range r.z.Zones {
			name := zoneLabel(z)
			ch <- prometheus.MustNewConstMetric(c.zoneLeft, prometheus.GaugeValue, float64(z.FilesLeftWithOneCopy), name, "1")
			ch <- prometheus.MustNewConstMetric(c.zoneLeft, prometheus.GaugeValue, float64(z.FilesLeftWithNoCopy), name, "0")
		}
	}
	c.errors.Collect(ch)
}

// zoneLabel names a zone in the gauges: its name, or for the zone of a
// node without one, the node's ID in brackets (no zone name is needed to
// contain brackets, so the two cannot be confused in practice).
func zoneLabel(z meta.ZoneRisk) string {
	if z.Zone == "" && len(z.Nodes) == 1 {
		return "[" + z.Nodes[0] + "]"
	}
	return z.Zone
}
