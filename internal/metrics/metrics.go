// Package metrics holds the coordinator's Prometheus series. Packages that do
// the work report outcomes through small hooks (files.Events, the API's
// Observe function, membership events, rebalance reports, the Redis client's
// callbacks) and never import Prometheus themselves; this package turns those
// outcomes into counters, gauges and histograms on a registry the caller owns,
// so tests and embedded coordinators never share global state.
//
// Every label has a bounded set of values: routes are chi patterns (or
// "unmatched"), methods are the standard HTTP methods (or "OTHER"), statuses
// are the numeric codes the server writes, triggers, file statuses and delete
// outcomes are fixed enums, Redis operations come from a fixed list (or
// "other"), and node ids are bounded by the size of the cluster.
package metrics

import (
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

// DefaultRedisOps are the Redis operations counted under their own name when
// Options.RedisOps is empty: the names internal/redisx passes to its OnError
// hook.
var DefaultRedisOps = []string{
	"ping", "cache_get", "cache_fill", "cache_invalidate",
	"lock_acquire", "lock_renew", "lock_release", "node_publish", "node_read", "subscribe",
}

// Options configure a Coordinator. The zero value works.
type Options struct {
	// Ring returns the current ring; dfs_ring_nodes reads it at scrape time,
	// so the gauge is right from the start, also after a restart rebuilt the
	// ring without any membership event. Nil means the gauge follows the
	// rings carried by membership events (0 until the first one).
	Ring func() *ring.Ring
	// RedisOps is the fixed set of operation names the op label of
	// dfs_redis_errors_total may take; any other name is counted as "other".
	// Empty means DefaultRedisOps.
	RedisOps []string
	// ContentCache reports the content cache's entries and bytes at scrape
	// time; nil means the gauges read 0 (no cache).
	ContentCache func() (entries int, bytes int64)
}

// Coordinator records the coordinator's metrics. Its methods are safe for
// concurrent use and never block on I/O.
type Coordinator struct {
	ring      func() *ring.Ring
	lastRing  atomic.Pointer[ring.Ring]
	redisOps  []string
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec

	uploads         *prometheus.CounterVec
	uploadBytes     prometheus.Counter
	uploadSpool     *prometheus.CounterVec
	downloads       *prometheus.CounterVec
	failovers       prometheus.Counter
	resumes         *prometheus.CounterVec
	downloadBytes   prometheus.Counter
	deletes         *prometheus.CounterVec
	verifies        *prometheus.CounterVec
	mismatches      *prometheus.CounterVec
	nodeJoins       prometheus.Counter
	nodeFailures    prometheus.Counter
	nodeRecoveries  prometheus.Counter
	nodeDeregisters prometheus.Counter
	nodeRejoins     prometheus.Counter
	diskReplaced    prometheus.Counter

	rebalanceRuns     *prometheus.CounterVec
	rebalanceCreated  *prometheus.CounterVec
	rebalanceRemoved  *prometheus.CounterVec
	rebalanceFailures *prometheus.CounterVec
	rebalanceSkipped  *prometheus.CounterVec
	rebalanceDuration *prometheus.HistogramVec

	cacheHits   prometheus.Counter
	cacheMisses prometheus.Counter
	redisErrors *prometheus.CounterVec

	localHits, localMisses prometheus.Counter

	contentHits, contentMisses prometheus.Counter
	contentUsage               func() (int, int64)
}

var _ files.Events = (*Coordinator)(nil)

// Label values known in advance; their series are created at zero so that
// rates and alerts work before the first occurrence.
var (
	uploadStatuses = []meta.FileStatus{meta.FileActive, meta.FileDegraded}
	triggers       = []rebalance.Trigger{
		rebalance.Joined, rebalance.Failed, rebalance.Recovered,
		rebalance.Deregistered, rebalance.Manual, rebalance.Repair,
	}
	methods = []string{
		http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace,
	}
)

// Delete outcomes: every copy gone (204), or a holder was down and the
// delete finishes later (202).
const (
	deleteComplete = "complete"
	deletePending  = "pending"
)

// Verify results: every reachable copy intact, or at least one corrupt.
const (
	verifyOK      = "ok"
	verifyCorrupt = "corrupt"
)

// Placeholders that keep labels bounded and never empty.
const (
	otherMethod  = "OTHER"
	otherOp      = "other"
	otherTrigger = "OTHER"
	unknownNode  = "unknown"
	// contentCacheLabel is the node label of downloads answered from the
	// content cache; a node id must start with a letter or digit, so no node
	// can have it.
	contentCacheLabel = "(content-cache)"
	unmatchedRoute    = "unmatched"
)

// httpBuckets run from a health probe to a large upload or download, which
// may stream for minutes.
var httpBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// rebalanceBuckets run from an empty repair pass to a full-cluster move.
var rebalanceBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600}

// buildInfo is the dfs_build_info gauge: always 1, with the build as labels,
// so that a dashboard can tell which coordinators run which version (the
// one --version and /health/live name) during a rolling upgrade.
func buildInfo() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dfs_build_info", Help: "Always 1; labels name the build (as --version does) and the Go release it was built with.",
		ConstLabels: prometheus.Labels{"version": buildinfo.Version(), "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}

// NewCoordinator creates the coordinator's metrics and registers them on reg.
// It panics if reg already holds a metric of the same name, which is a
// wiring mistake (the same as promauto.With(reg) would).
func NewCoordinator(reg prometheus.Registerer, o Options) *Coordinator {
	ops := o.RedisOps
	if len(ops) == 0 {
		ops = DefaultRedisOps
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	c := &Coordinator{
		ring:     o.Ring,
		redisOps: slices.Clone(ops),
		requests: counterVec("dfs_http_requests_total",
			"HTTP requests by chi route pattern (\"unmatched\" when no route matched), method and status code.",
			"route", "method", "status"),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dfs_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern and method, body transfer included.",
			Buckets: httpBuckets,
		}, []string{"route", "method"}),

		uploads:     counterVec("dfs_uploads_total", "Completed uploads by the file's resulting status.", "status"),
		uploadBytes: counter("dfs_upload_bytes_total", "Bytes of files uploaded (counted once per file, not per copy)."),
		uploadSpool: counterVec("dfs_upload_spool_total",
			"Upload bodies by where the coordinator held them while writing copies: memory (small bodies, within SPOOL_MEMORY_LIMIT) or disk.", "where"),
		downloads:     counterVec("dfs_downloads_total", "Downloads by the storage node that served them; (content-cache) for those answered from the content cache.", "node"),
		failovers:     counter("dfs_download_failovers_total", "Times a download moved on to the next holder because one failed."),
		downloadBytes: counter("dfs_download_bytes_total", "Bytes of files sent to clients by downloads."),
		resumes: counterVec("dfs_download_resumes_total",
			"Times a download's copy stopped short and the read went on from the next holder at the same offset, by the node that stopped.", "node"),
		deletes: counterVec("dfs_deletes_total",
			"File deletes by outcome: complete (every copy gone) or pending (a holder was down; finished later).", "outcome"),
		verifies: counterVec("dfs_verifies_total",
			"On-demand verifications by result: ok, or corrupt when at least one copy failed its checksum.", "result"),
		mismatches: counterVec("dfs_checksum_mismatches_total",
			"Copies found corrupt (checksum mismatch) by the node that held them.", "node"),
		nodeJoins:       counter("dfs_node_joins_total", "Storage nodes placed on the ring for the first time (or again after a rejoin)."),
		nodeFailures:    counter("dfs_node_failures_total", "Storage nodes taken off the ring after failed health checks."),
		nodeRecoveries:  counter("dfs_node_recoveries_total", "Failed storage nodes put back on the ring after passing health checks."),
		nodeDeregisters: counter("dfs_node_deregistrations_total", "Storage nodes deregistered by an operator."),
		nodeRejoins:     counter("dfs_node_rejoins_total", "Deregistered storage nodes re-admitted by an operator."),
		diskReplaced:    counter("dfs_node_disk_replacements_total", "Storage nodes found serving another disk than before (wiped or replaced data directory); their copies are rebuilt."),

		rebalanceRuns: counterVec("dfs_rebalance_runs_total",
			"Rebalance runs by trigger; repair-loop passes have trigger REPAIR.", "trigger"),
		rebalanceCreated: counterVec("dfs_rebalance_copies_created_total",
			"File copies created by rebalance runs, by trigger.", "trigger"),
		rebalanceRemoved: counterVec("dfs_rebalance_copies_removed_total",
			"File copies removed by rebalance runs, by trigger.", "trigger"),
		rebalanceFailures: counterVec("dfs_rebalance_failures_total",
			"Files a rebalance run could not bring in line, by trigger.", "trigger"),
		rebalanceSkipped: counterVec("dfs_rebalance_files_skipped_total",
			"Files a rebalance run did not reconcile (lease held or unavailable, reconcile error, run cut short), by trigger; such a run is not complete and is retried.", "trigger"),
		rebalanceDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dfs_rebalance_duration_seconds",
			Help:    "Duration of rebalance runs by trigger.",
			Buckets: rebalanceBuckets,
		}, []string{"trigger"}),

		cacheHits:   counter("dfs_cache_hits_total", "Metadata cache lookups answered by Redis."),
		cacheMisses: counter("dfs_cache_misses_total", "Metadata cache lookups that fell through to the metadata store."),
		redisErrors: counterVec("dfs_redis_errors_total",
			"Failed Redis calls by operation; each degrades to a cache miss or a process-local lock.", "op"),
		localHits: counter("dfs_local_cache_hits_total",
			"File metadata lookups answered by the coordinator's own memory (embedded store only, LOCAL_CACHE_ENTRIES)."),
		localMisses: counter("dfs_local_cache_misses_total",
			"File metadata lookups the coordinator's own memory could not answer."),
		contentHits: counter("dfs_content_cache_hits_total",
			"Downloads answered from the coordinator's content cache without a storage node (CONTENT_CACHE_SIZE)."),
		contentMisses: counter("dfs_content_cache_misses_total",
			"Downloads of files small enough for the content cache that it did not hold."),
		contentUsage: o.ContentCache,
	}
	if c.contentUsage == nil {
		c.contentUsage = func() (int, int64) { return 0, 0 }
	}
	reg.MustRegister(
		c.requests, c.durations,
		c.uploads, c.uploadBytes, c.uploadSpool, c.downloads, c.failovers, c.downloadBytes,
		c.deletes, c.verifies, c.mismatches, c.resumes,
		c.nodeJoins, c.nodeFailures, c.nodeRecoveries, c.nodeDeregisters, c.nodeRejoins, c.diskReplaced,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dfs_ring_nodes", Help: "Storage nodes on the hash ring.",
		}, c.ringNodes),
		buildInfo(),
		c.rebalanceRuns, c.rebalanceCreated, c.rebalanceRemoved, c.rebalanceFailures, c.rebalanceSkipped, c.rebalanceDuration,
		c.cacheHits, c.cacheMisses, c.redisErrors, c.localHits, c.localMisses,
		c.contentHits, c.contentMisses,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dfs_content_cache_entries", Help: "Files held by the content cache.",
		}, func() float64 { n, _ := c.contentUsage(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dfs_content_cache_bytes", Help: "Bytes the content cache holds, with a fixed overhead per file.",
		}, func() float64 { _, b := c.contentUsage(); return float64(b) }),
	)
	for _, s := range uploadStatuses {
		c.uploads.WithLabelValues(string(s))
	}
	for _, w := range []string{spoolMemory, spoolDisk} {
		c.uploadSpool.WithLabelValues(w)
	}
	for _, o := range []string{deleteComplete, deletePending} {
		c.deletes.WithLabelValues(o)
	}
	for _, r := range []string{verifyOK, verifyCorrupt} {
		c.verifies.WithLabelValues(r)
	}
	for _, t := range triggers {
		for _, v := range []*prometheus.CounterVec{c.rebalanceRuns, c.rebalanceCreated, c.rebalanceRemoved, c.rebalanceFailures, c.rebalanceSkipped} {
			v.WithLabelValues(string(t))
		}
		c.rebalanceDuration.WithLabelValues(string(t))
	}
	for _, op := range c.redisOps {
		c.redisErrors.WithLabelValues(op)
	}
	return c
}

// ringNodes is dfs_ring_nodes at scrape time.
func (c *Coordinator) ringNodes() float64 {
	r := c.lastRing.Load()
	if c.ring != nil {
		r = c.ring()
	}
	if r == nil {
		return 0
	}
	return float64(len(r.Nodes()))
}

// ObserveHTTP records one HTTP request; it has the shape of api.Options.Observe.
func (c *Coordinator) ObserveHTTP(route, method string, status int, seconds float64) {
	if route == "" {
		route = unmatchedRoute
	}
	if !slices.Contains(methods, method) {
		method = otherMethod
	}
	c.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	c.durations.WithLabelValues(route, method).Observe(seconds)
}

// Label values of dfs_upload_spool_total.
const (
	spoolMemory = "memory"
	spoolDisk   = "disk"
)

// Spooled records where an upload's body was held.
func (c *Coordinator) Spooled(inMemory bool) {
	if inMemory {
		c.uploadSpool.WithLabelValues(spoolMemory).Inc()
		return
	}
	c.uploadSpool.WithLabelValues(spoolDisk).Inc()
}

// Uploaded records a completed upload of a file of the given size.
func (c *Coordinator) Uploaded(status meta.FileStatus, bytes int64) {
	c.uploads.WithLabelValues(string(status)).Inc()
	addCount(c.uploadBytes, bytes)
}

// Downloaded records a download served by node servedBy after failovers
// holders failed before it; an empty servedBy is a download answered from
// the content cache.
func (c *Coordinator) Downloaded(servedBy string, failovers int, bytes int64) {
	label := contentCacheLabel
	if servedBy != "" {
		label = servedBy
	}
	c.downloads.WithLabelValues(label).Inc()
	addCount(c.failovers, int64(failovers))
	addCount(c.downloadBytes, bytes)
}

// ReadResumed records a download whose copy on nodeID stopped short, the
// read going on from the next holder.
func (c *Coordinator) ReadResumed(nodeID string) {
	c.resumes.WithLabelValues(nodeLabel(nodeID)).Inc()
}

// ChecksumMismatch records a corrupt copy found on nodeID.
func (c *Coordinator) ChecksumMismatch(nodeID string) {
	c.mismatches.WithLabelValues(nodeLabel(nodeID)).Inc()
}

// Deleted records a file delete: complete when every copy is gone (204),
// not complete when a holder was down and the delete finishes later (202).
func (c *Coordinator) Deleted(complete bool) {
	outcome := deletePending
	if complete {
		outcome = deleteComplete
	}
	c.deletes.WithLabelValues(outcome).Inc()
}

// Verified records an on-demand verification that found corruptCopies
// corrupt copies. The copies themselves are counted by ChecksumMismatch.
func (c *Coordinator) Verified(corruptCopies int) {
	result := verifyOK
	if corruptCopies > 0 {
		result = verifyCorrupt
	}
	c.verifies.WithLabelValues(result).Inc()
}

// MembershipEvent records a membership change; it suits
// membership.Options.OnEvent and must not block, so it only counts.
func (c *Coordinator) MembershipEvent(e membership.Event) {
	if e.Ring != nil {
		c.lastRing.Store(e.Ring)
	}
	switch e.Kind {
	case membership.Joined:
		c.nodeJoins.Inc()
	case membership.Failed:
		c.nodeFailures.Inc()
	case membership.Recovered:
		c.nodeRecoveries.Inc()
	case membership.Deregistered:
		c.nodeDeregisters.Inc()
	case membership.Rejoined:
		c.nodeRejoins.Inc()
	case membership.DiskReplaced:
		c.diskReplaced.Inc()
	}
}

// RebalanceDone records one finished rebalance run under its report's
// trigger; a repair pass is a run with trigger REPAIR.
func (c *Coordinator) RebalanceDone(r rebalance.Report) {
	t := string(r.Trigger)
	if !slices.Contains(triggers, r.Trigger) {
		t = otherTrigger
	}
	c.rebalanceRuns.WithLabelValues(t).Inc()
	addCount(c.rebalanceCreated.WithLabelValues(t), int64(r.CopiesCreated))
	addCount(c.rebalanceRemoved.WithLabelValues(t), int64(r.CopiesRemoved))
	addCount(c.rebalanceFailures.WithLabelValues(t), int64(r.Failures))
	addCount(c.rebalanceSkipped.WithLabelValues(t), int64(r.FilesSkipped))
	c.rebalanceDuration.WithLabelValues(t).Observe(float64(max(r.DurationMs, 0)) / 1000)
}

// CacheHit records a metadata lookup answered by the cache.
func (c *Coordinator) CacheHit() { c.cacheHits.Inc() }

// CacheMiss records a metadata lookup the cache could not answer.
func (c *Coordinator) CacheMiss() { c.cacheMisses.Inc() }

// ContentCache records whether a download the content cache could hold was
// answered from it.
func (c *Coordinator) ContentCache(hit bool) {
	if hit {
		c.contentHits.Inc()
		return
	}
	c.contentMisses.Inc()
}

// LocalCacheHit records a lookup answered from the coordinator's memory.
func (c *Coordinator) LocalCacheHit() { c.localHits.Inc() }

// LocalCacheMiss records a lookup that memory could not answer.
func (c *Coordinator) LocalCacheMiss() { c.localMisses.Inc() }

// RedisError records a failed Redis call of operation op.
func (c *Coordinator) RedisError(op string) {
	if !slices.Contains(c.redisOps, op) {
		op = otherOp
	}
	c.redisErrors.WithLabelValues(op).Inc()
}

// addCount adds n to a counter, ignoring negative values, on which a
// Prometheus counter panics; a caller's arithmetic slip must not take the
// coordinator down.
func addCount(c prometheus.Counter, n int64) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// nodeLabel keeps an unknown node visible: an empty label value would be the
// same series as no label at all.
func nodeLabel(id string) string {
	if id == "" {
		return unknownNode
	}
	return id
}
