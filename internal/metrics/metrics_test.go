package metrics_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/antientropy"
	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/metrics"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

func newCoordinator(t *testing.T, o metrics.Options) (*metrics.Coordinator, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	return metrics.NewCoordinator(reg, o), reg
}

// family returns the gathered family called name, failing when it is absent.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	require.Failf(t, "metric family missing", "%s", name)
	return nil
}

// sample returns the series of family name whose labels are exactly labels.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	for _, m := range family(t, reg, name).GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) == len(labels) {
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if match {
				return m
			}
		}
	}
	require.Failf(t, "series missing", "%s%v", name, labels)
	return nil
}

func TestBuildInfoNamesTheVersionAndGoRelease(t *testing.T) {
	_, reg := newCoordinator(t, metrics.Options{})
	m := sample(t, reg, "dfs_build_info", map[string]string{"version": buildinfo.Version(), "goversion": runtime.Version()})
	require.Equal(t, 1.0, m.GetGauge().GetValue())
}

func TestObserveHTTPLabels(t *testing.T) {
	cases := []struct {
		name                  string
		route, method         string
		status                int
		wantRoute, wantMethod string
		wantStatus            string
	}{
		{"a route pattern", "/api/files/{fileId}", http.MethodGet, 206, "/api/files/{fileId}", "GET", "206"},
		{"an aborted response", "/api/files/{fileId}", http.MethodGet, 499, "/api/files/{fileId}", "GET", "499"},
		{"no route", "", http.MethodPost, 404, "unmatched", "POST", "404"},
		{"a made-up method", "unmatched", "BREW", 405, "unmatched", "OTHER", "405"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, reg := newCoordinator(t, metrics.Options{})
			c.ObserveHTTP(tc.route, tc.method, tc.status, 0.3)
			c.ObserveHTTP(tc.route, tc.method, tc.status, 7)

			require.Equal(t, 1, testutil.CollectAndCount(reg, "dfs_http_requests_total"))
			m := sample(t, reg, "dfs_http_requests_total",
				map[string]string{"route": tc.wantRoute, "method": tc.wantMethod, "status": tc.wantStatus})
			require.Equal(t, 2.0, m.GetCounter().GetValue())

			h := sample(t, reg, "dfs_http_request_duration_seconds",
				map[string]string{"route": tc.wantRoute, "method": tc.wantMethod}).GetHistogram()
			require.Equal(t, uint64(2), h.GetSampleCount())
			require.InDelta(t, 7.3, h.GetSampleSum(), 1e-9)
		})
	}
}

// The API reports chi's route patterns through httpx.AccessLog; the labels
// must be the patterns, never the raw paths, so ids do not become series.
func TestObserveHTTPThroughAccessLog(t *testing.T) {
	c, reg := newCoordinator(t, metrics.Options{})
	r := chi.NewRouter()
	r.NotFound(httpx.NotFoundHandler)
	r.Use(httpx.AccessLog(slog.New(slog.DiscardHandler), c.ObserveHTTP))
	r.Get("/api/files/{fileId}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

	for _, path := range []string{"/api/files/a", "/api/files/b", "/no/such/path"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}

	require.Equal(t, 2, testutil.CollectAndCount(reg, "dfs_http_requests_total"))
	require.Equal(t, 2.0, sample(t, reg, "dfs_http_requests_total",
		map[string]string{"route": "/api/files/{fileId}", "method": "GET", "status": "418"}).GetCounter().GetValue())
	require.Equal(t, 1.0, sample(t, reg, "dfs_http_requests_total",
		map[string]string{"route": "unmatched", "method": "GET", "status": "404"}).GetCounter().GetValue())
}

func TestFileEvents(t *testing.T) {
	c, reg := newCoordinator(t, metrics.Options{})
	c.Uploaded(meta.FileActive, 100)
	c.Uploaded(meta.FileActive, 20)
	c.Uploaded(meta.FileDegraded, 3)
	c.Downloaded("node-1", 0, 1000)
	c.Downloaded("node-2", 2, 500)
	c.Downloaded("node-2", -1, -5) // nonsense counts are ignored, never a panic
	c.Downloaded("", 0, 1)         // answered from the content cache
	c.ContentCache(true)
	c.ContentCache(false)
	c.ContentCache(false)
	c.ChecksumMismatch("node-3")
	c.ChecksumMismatch("node-3")

	uploads := `
# HELP dfs_uploads_total Completed uploads by the file's resulting status.
# TYPE dfs_uploads_total counter
dfs_uploads_total{status="ACTIVE"} 2
dfs_uploads_total{status="DEGRADED"} 1
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(uploads), "dfs_uploads_total"))
	downloads := `
# HELP dfs_downloads_total Downloads by the storage node that served them; (content-cache) for those answered from the content cache.
# TYPE dfs_downloads_total counter
dfs_downloads_total{node="(content-cache)"} 1
dfs_downloads_total{node="node-1"} 1
dfs_downloads_total{node="node-2"} 2
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(downloads), "dfs_downloads_total"))

	for name, want := range map[string]float64{
		"dfs_upload_bytes_total":         123,
		"dfs_download_bytes_total":       1501,
		"dfs_download_failovers_total":   2,
		"dfs_content_cache_hits_total":   1,
		"dfs_content_cache_misses_total": 2,
	} {
		require.Equal(t, want, sample(t, reg, name, nil).GetCounter().GetValue(), name)
	}
	require.Equal(t, 2.0, sample(t, reg, "dfs_checksum_mismatches_total",
		map[string]string{"node": "node-3"}).GetCounter().GetValue())
	// Without a cache the usage gauges read zero.
	require.Zero(t, sample(t, reg, "dfs_content_cache_entries", nil).GetGauge().GetValue())
}

func TestContentCacheUsage(t *testing.T) {
	_, reg := newCoordinator(t, metrics.Options{ContentCache: func() (int, int64) { return 3, 4096 }})
	require.Equal(t, 3.0, sample(t, reg, "dfs_content_cache_entries", nil).GetGauge().GetValue())
	require.Equal(t, 4096.0, sample(t, reg, "dfs_content_cache_bytes", nil).GetGauge().GetValue())
}

func TestDeletesAndVerifies(t *testing.T) {
	cases := []struct {
		name   string
		act    func(*metrics.Coordinator)
		metric string
		labels map[string]string
	}{
		{"every copy gone", func(c *metrics.Coordinator) { c.Deleted(true) }, "dfs_deletes_total", map[string]string{"outcome": "complete"}},
		{"a holder down", func(c *metrics.Coordinator) { c.Deleted(false) }, "dfs_deletes_total", map[string]string{"outcome": "pending"}},
		{"all copies intact", func(c *metrics.Coordinator) { c.Verified(0) }, "dfs_verifies_total", map[string]string{"result": "ok"}},
		{"one corrupt copy", func(c *metrics.Coordinator) { c.Verified(1) }, "dfs_verifies_total", map[string]string{"result": "corrupt"}},
		{"two corrupt copies", func(c *metrics.Coordinator) { c.Verified(2) }, "dfs_verifies_total", map[string]string{"result": "corrupt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, reg := newCoordinator(t, metrics.Options{})
			tc.act(c)
			// Both outcomes exist from the start; exactly the expected one moved.
			require.Equal(t, 2, testutil.CollectAndCount(reg, tc.metric))
			total := 0.0
			for _, m := range family(t, reg, tc.metric).GetMetric() {
				total += m.GetCounter().GetValue()
			}
			require.Equal(t, 1.0, total)
			require.Equal(t, 1.0, sample(t, reg, tc.metric, tc.labels).GetCounter().GetValue())
		})
	}
}

func TestMembershipEvents(t *testing.T) {
	counters := map[membership.EventKind]string{
		membership.Joined:       "dfs_node_joins_total",
		membership.Failed:       "dfs_node_failures_total",
		membership.Recovered:    "dfs_node_recoveries_total",
		membership.Deregistered: "dfs_node_deregistrations_total",
		membership.Rejoined:     "dfs_node_rejoins_total",
		membership.DiskReplaced: "dfs_node_disk_replacements_total",
	}
	for kind := range counters {
		t.Run(string(kind), func(t *testing.T) {
			c, reg := newCoordinator(t, metrics.Options{})
			c.MembershipEvent(membership.Event{Kind: kind, Node: meta.Node{ID: "node-1"}, Ring: ring.New(10, "node-1", "node-2")})
			for other, n := range counters {
				want := 0.0
				if other == kind {
					want = 1
				}
				require.Equal(t, want, sample(t, reg, n, nil).GetCounter().GetValue(), n)
			}
		})
	}
}

func TestRingNodesFollowsEventsWithoutRingFunc(t *testing.T) {
	c, reg := newCoordinator(t, metrics.Options{})
	require.Equal(t, 0.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
	c.MembershipEvent(membership.Event{Kind: membership.Joined, Ring: ring.New(10, "a", "b", "c")})
	require.Equal(t, 3.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
	c.MembershipEvent(membership.Event{Kind: membership.Failed, Ring: ring.New(10, "a", "c")})
	require.Equal(t, 2.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
	// An event without a ring leaves the last known one in place.
	c.MembershipEvent(membership.Event{Kind: membership.Rejoined})
	require.Equal(t, 2.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
}

func TestRingNodesReadsTheLiveRing(t *testing.T) {
	current := ring.New(10, "a", "b", "c", "d")
	c, reg := newCoordinator(t, metrics.Options{Ring: func() *ring.Ring { return current }})
	require.Equal(t, 4.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
	// The live ring wins over what an event carried.
	c.MembershipEvent(membership.Event{Kind: membership.Failed, Ring: ring.New(10, "a")})
	require.Equal(t, 4.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
	current = ring.New(10, "a", "b")
	require.Equal(t, 2.0, sample(t, reg, "dfs_ring_nodes", nil).GetGauge().GetValue())
}

func TestRebalanceDone(t *testing.T) {
	c, reg := newCoordinator(t, metrics.Options{})
	c.RebalanceDone(rebalance.Report{Trigger: rebalance.Joined, CopiesCreated: 7, CopiesRemoved: 5, Failures: 1, DurationMs: 1500})
	c.RebalanceDone(rebalance.Report{Trigger: rebalance.Joined, CopiesCreated: 3, FilesSkipped: 4, DurationMs: 20})
	c.RebalanceDone(rebalance.Report{Trigger: rebalance.Repair, CopiesCreated: 2})
	c.RebalanceDone(rebalance.Report{Trigger: "SOMETHING", CopiesRemoved: -4, DurationMs: -1})

	runs := `
# HELP dfs_rebalance_runs_total Rebalance runs by trigger; repair-loop passes have trigger REPAIR.
# TYPE dfs_rebalance_runs_total counter
dfs_rebalance_runs_total{trigger="DEREGISTERED"} 0
dfs_rebalance_runs_total{trigger="FAILED"} 0
dfs_rebalance_runs_total{trigger="JOINED"} 2
dfs_rebalance_runs_total{trigger="MANUAL"} 0
dfs_rebalance_runs_total{trigger="OTHER"} 1
dfs_rebalance_runs_total{trigger="RECOVERED"} 0
dfs_rebalance_runs_total{trigger="REPAIR"} 1
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(runs), "dfs_rebalance_runs_total"))
	joined := map[string]string{"trigger": "JOINED"}
	require.Equal(t, 10.0, sample(t, reg, "dfs_rebalance_copies_created_total", joined).GetCounter().GetValue())
	require.Equal(t, 5.0, sample(t, reg, "dfs_rebalance_copies_removed_total", joined).GetCounter().GetValue())
	require.Equal(t, 1.0, sample(t, reg, "dfs_rebalance_failures_total", joined).GetCounter().GetValue())
	require.Equal(t, 4.0, sample(t, reg, "dfs_rebalance_files_skipped_total", joined).GetCounter().GetValue())
	require.Equal(t, 2.0, sample(t, reg, "dfs_rebalance_copies_created_total",
		map[string]string{"trigger": "REPAIR"}).GetCounter().GetValue())
	require.Equal(t, 0.0, sample(t, reg, "dfs_rebalance_copies_removed_total",
		map[string]string{"trigger": "OTHER"}).GetCounter().GetValue())

	h := sample(t, reg, "dfs_rebalance_duration_seconds", joined).GetHistogram()
	require.Equal(t, uint64(2), h.GetSampleCount())
	require.InDelta(t, 1.52, h.GetSampleSum(), 1e-9)
	require.Equal(t, 0.0, sample(t, reg, "dfs_rebalance_duration_seconds",
		map[string]string{"trigger": "OTHER"}).GetHistogram().GetSampleSum())
}

func TestAntiEntropy(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := metrics.NewAntiEntropy(reg)
	for _, k := range antientropy.Kinds {
		require.Zero(t, sample(t, reg, "dfs_anti_entropy_found_total", map[string]string{"kind": string(k)}).GetCounter().GetValue(),
			"%s starts at zero", k)
	}
	a.Found(antientropy.Missing, 3)
	a.Found(antientropy.Missing, 0)
	a.Fixed(antientropy.Missing, 2)
	a.Found(antientropy.Orphan, 1)
	a.Checked(500)
	a.Checked(20)
	a.Progress(0.25)
	missing := map[string]string{"kind": "missing"}
	require.Equal(t, 3.0, sample(t, reg, "dfs_anti_entropy_found_total", missing).GetCounter().GetValue())
	require.Equal(t, 2.0, sample(t, reg, "dfs_anti_entropy_fixed_total", missing).GetCounter().GetValue())
	require.Equal(t, 1.0, sample(t, reg, "dfs_anti_entropy_found_total", map[string]string{"kind": "orphan"}).GetCounter().GetValue())
	require.Equal(t, 520.0, sample(t, reg, "dfs_anti_entropy_files_checked_total", nil).GetCounter().GetValue())
	require.Equal(t, 0.25, sample(t, reg, "dfs_anti_entropy_pass_progress_ratio", nil).GetGauge().GetValue())
	require.Zero(t, sample(t, reg, "dfs_anti_entropy_last_full_pass_timestamp_seconds", nil).GetGauge().GetValue())
	a.PassCompleted(time.Unix(1_800_000_000, 0))
	require.Equal(t, 1.0, sample(t, reg, "dfs_anti_entropy_passes_total", nil).GetCounter().GetValue())
	require.Equal(t, 1.8e9, sample(t, reg, "dfs_anti_entropy_last_full_pass_timestamp_seconds", nil).GetGauge().GetValue())
}

func TestCacheAndRedis(t *testing.T) {
	c, reg := newCoordinator(t, metrics.Options{})
	c.CacheHit()
	c.CacheHit()
	c.CacheMiss()
	c.RedisError("cache_get")
	c.RedisError("cache_get")
	c.RedisError("file:0b6d…") // not an operation name: must not become a series
	require.Equal(t, 2.0, sample(t, reg, "dfs_cache_hits_total", nil).GetCounter().GetValue())
	require.Equal(t, 1.0, sample(t, reg, "dfs_cache_misses_total", nil).GetCounter().GetValue())
	require.Equal(t, 2.0, sample(t, reg, "dfs_redis_errors_total", map[string]string{"op": "cache_get"}).GetCounter().GetValue())
	require.Equal(t, 1.0, sample(t, reg, "dfs_redis_errors_total", map[string]string{"op": "other"}).GetCounter().GetValue())
	require.Equal(t, 0.0, sample(t, reg, "dfs_redis_errors_total", map[string]string{"op": "lock_acquire"}).GetCounter().GetValue())
	require.Equal(t, len(metrics.DefaultRedisOps)+1, testutil.CollectAndCount(reg, "dfs_redis_errors_total"))
}

func TestRedisOpsAreConfigurable(t *testing.T) {
	c, reg := newCoordinator(t, metrics.Options{RedisOps: []string{"mget", "eval"}})
	c.RedisError("eval")
	c.RedisError("cache_get")
	errs := `
# HELP dfs_redis_errors_total Failed Redis calls by operation; each degrades to a cache miss or a process-local lock.
# TYPE dfs_redis_errors_total counter
dfs_redis_errors_total{op="eval"} 1
dfs_redis_errors_total{op="mget"} 0
dfs_redis_errors_total{op="other"} 1
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(errs), "dfs_redis_errors_total"))
}

// Series whose label values are known in advance exist before anything
// happens, so a rate over them is 0 rather than missing.
func TestKnownSeriesStartAtZero(t *testing.T) {
	_, reg := newCoordinator(t, metrics.Options{})
	for name, want := range map[string]int{
		"dfs_uploads_total":                  2, // ACTIVE, DEGRADED
		"dfs_upload_spool_total":             2, // memory, disk
		"dfs_deletes_total":                  2,
		"dfs_verifies_total":                 2,
		"dfs_rebalance_runs_total":           6,
		"dfs_rebalance_copies_created_total": 6,
		"dfs_rebalance_copies_removed_total": 6,
		"dfs_rebalance_failures_total":       6,
		"dfs_rebalance_duration_seconds":     6,
		"dfs_redis_errors_total":             len(metrics.DefaultRedisOps),
		"dfs_node_failures_total":            1,
		"dfs_ring_nodes":                     1,
		"dfs_http_requests_total":            0,
	} {
		require.Equal(t, want, testutil.CollectAndCount(reg, name), name)
	}
}

func TestNewCoordinatorRefusesASecondSetOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.NewCoordinator(reg, metrics.Options{})
	require.Panics(t, func() { metrics.NewCoordinator(reg, metrics.Options{}) })
}
