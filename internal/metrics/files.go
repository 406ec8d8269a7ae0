package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/meta"
)

// CountFunc counts files per status; meta.Store.CountFilesByStatus has this
// shape. It must return once ctx is done: the timeout is what keeps a slow
// store from holding scrapes.
type CountFunc func(ctx context.Context) (map[meta.FileStatus]int, error)

// FilesByStatusOptions configure a FilesByStatus collector. Zero values take
// the documented defaults.
type FilesByStatusOptions struct {
	// Timeout bounds one count, so a slow metadata store cannot hold a
	// scrape past Prometheus's own timeout (default 2s).
	Timeout time.Duration
	// CacheFor is how long a count (or a failure) is reused before the store
	// is asked again, so frequent or concurrent scrapes cost one query
	// (default 5s).
	CacheFor time.Duration
	// Logger reports failed counts; nil discards them.
	Logger *slog.Logger
}

// Defaults of FilesByStatusOptions.
const (
	DefaultCountTimeout  = 2 * time.Second
	DefaultCountCacheFor = 5 * time.Second
)

// fileStatuses are every status a file can have; each is exposed, at zero
// when no file has it.
var fileStatuses = []meta.FileStatus{
	meta.FilePending, meta.FileActive, meta.FileDegraded,
	meta.FileRebalancing, meta.FileFailed, meta.FileDeleted,
}

// FilesByStatus is a prometheus.Collector exposing dfs_files{status}, the
// number of files in each status, counted in the metadata store at scrape
// time. When a count fails the scrape carries no dfs_files samples (a stale
// number would look current) and dfs_files_count_errors_total goes up.
type FilesByStatus struct {
	desc   *prometheus.Desc
	errors prometheus.Counter
	counts *scrapeCache[map[meta.FileStatus]int]
}

var _ prometheus.Collector = (*FilesByStatus)(nil)

// NewFilesByStatus returns a collector over count; register it on the
// coordinator's registry.
func NewFilesByStatus(count CountFunc, o FilesByStatusOptions) *FilesByStatus {
	counts := newScrapeCache(count, scrapeOptions{o.Timeout, o.CacheFor, o.Logger}, DefaultCountTimeout, DefaultCountCacheFor,
		"files by status", prometheus.CounterOpts{
			Name: "dfs_files_count_errors_total",
			Help: "Failed or timed-out counts of files by status; while failing, dfs_files is absent from scrapes.",
		})
	return &FilesByStatus{
		desc: prometheus.NewDesc("dfs_files",
			"Files in the metadata store by status, counted at scrape time (cached briefly).",
			[]string{"status"}, nil),
		errors: counts.errors,
		counts: counts,
	}
}

// Describe implements prometheus.Collector.
func (f *FilesByStatus) Describe(ch chan<- *prometheus.Desc) {
	ch <- f.desc
	f.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (f *FilesByStatus) Collect(ch chan<- prometheus.Metric) {
	counts, err := f.counts.get()
	if err == nil {
		for _, s := range fileStatuses {
			ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
		}
	}
	f.errors.Collect(ch)
}
