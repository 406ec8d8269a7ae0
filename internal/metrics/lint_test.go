package metrics_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/metrics"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// scrape serves h's /metrics in the text format, as Prometheus and promtool
// read it, and returns the exposition.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String()
}

// requireLintClean runs the checks of `promtool check metrics` over an
// exposition and names every problem.
func requireLintClean(t *testing.T, exposition string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(exposition)).Lint()
	require.NoError(t, err)
	var report []string
	for _, p := range problems {
		report = append(report, fmt.Sprintf("%s: %s", p.Metric, p.Text))
	}
	require.Empty(t, report)
}

// requireFamilies checks that every named family is in the exposition, so a
// clean lint is not clean by leaving metrics out.
func requireFamilies(t *testing.T, exposition string, names ...string) {
	t.Helper()
	var have []string
	for line := range strings.Lines(exposition) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			have = append(have, f[2])
		}
	}
	require.Subset(t, have, names)
}

// The coordinator's exposition after every metric has moved, served the way
// cmd/coordinator serves it (Go and process collectors, promhttp with the
// registry's own handler metrics).
func TestCoordinatorExpositionPassesPromlint(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c := metrics.NewCoordinator(reg, metrics.Options{Ring: func() *ring.Ring { return ring.New(100, "node-1", "node-2", "node-3") }})
	reg.MustRegister(metrics.NewFilesByStatus(func(context.Context) (map[meta.FileStatus]int, error) {
		return map[meta.FileStatus]int{meta.FileActive: 5, meta.FileDegraded: 1}, nil
	}, metrics.FilesByStatusOptions{}))
	reg.MustRegister(metrics.NewDurability(func(context.Context) (meta.Durability, int, error) {
		return meta.Durability{FilesByCopies: map[int]int{3: 5, 2: 1}, BytesAtRisk: 10,
			Nodes: []meta.NodeDurability{{NodeID: "node-1", FilesLeftWithOneCopy: 1}}}, 1, nil
	}, metrics.DurabilityOptions{}))
	reg.MustRegister(metrics.NewZoneDurability(func(context.Context) (meta.ZoneDurability, int, error) {
		return meta.ZoneDurability{Files: 6, MinZones: 2, Collapsed: 1, Zones: []meta.ZoneRisk{
			{Zone: "a", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: 1}, {Nodes: []string{"node-3"}}}}, 1, nil
	}, metrics.ZoneDurabilityOptions{}))
	reg.MustRegister(metrics.NewRepairQueue(func(context.Context) (map[int]int, error) {
		return map[int]int{1: 2, 2: 9}, nil
	}, metrics.RepairQueueOptions{}))
	metrics.NewCopyThrottle(reg).Paced(256<<10, 250*time.Millisecond)

	c.ObserveHTTP("/api/files/{fileId}", http.MethodGet, http.StatusOK, 0.02)
	c.ObserveHTTP("unmatched", http.MethodGet, http.StatusNotFound, 0.001)
	c.Uploaded(meta.FileActive, 1024)
	c.Spooled(true)
	c.Downloaded("node-2", 1, 1024)
	c.ChecksumMismatch("node-1")
	c.Deleted(true)
	c.Deleted(false)
	c.Verified(1)
	for _, k := range []membership.EventKind{membership.Joined, membership.Failed, membership.Recovered, membership.Deregistered, membership.Rejoined, membership.DiskReplaced} {
		c.MembershipEvent(membership.Event{Kind: k, Node: meta.Node{ID: "node-4"}})
	}
	c.RebalanceDone(rebalance.Report{Trigger: rebalance.Joined, CopiesCreated: 3, CopiesRemoved: 3, Failures: 1, DurationMs: 250})
	c.RebalanceDone(rebalance.Report{Trigger: rebalance.Repair, CopiesCreated: 1, DurationMs: 10})
	c.ReadResumed("node-2")
	c.CacheHit()
	c.CacheMiss()
	c.LocalCacheHit()
	c.LocalCacheMiss()
	c.RedisError("cache_get")

	out := scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	requireFamilies(t, out,
		"dfs_http_requests_total", "dfs_http_request_duration_seconds",
		"dfs_uploads_total", "dfs_upload_bytes_total", "dfs_upload_spool_total",
		"dfs_downloads_total", "dfs_download_failovers_total", "dfs_download_bytes_total",
		"dfs_deletes_total", "dfs_verifies_total", "dfs_checksum_mismatches_total", "dfs_download_resumes_total",
		"dfs_node_joins_total", "dfs_node_failures_total", "dfs_node_recoveries_total",
		"dfs_node_deregistrations_total", "dfs_node_rejoins_total", "dfs_node_disk_replacements_total", "dfs_ring_nodes",
		"dfs_files", "dfs_files_count_errors_total",
		"dfs_durability_files", "dfs_durability_bytes_at_risk", "dfs_durability_failure_headroom",
		"dfs_durability_node_files_left", "dfs_durability_errors_total",
		"dfs_repair_queue_files", "dfs_repair_queue_errors_total",
		"dfs_rebalance_throttled_bytes_total", "dfs_rebalance_throttle_wait_seconds_total",
		"dfs_rebalance_runs_total", "dfs_rebalance_copies_created_total", "dfs_rebalance_copies_removed_total",
		"dfs_rebalance_failures_total", "dfs_rebalance_duration_seconds",
		"dfs_cache_hits_total", "dfs_cache_misses_total", "dfs_redis_errors_total",
		"dfs_local_cache_hits_total", "dfs_local_cache_misses_total", "dfs_build_info",
		"go_goroutines", "process_cpu_seconds_total")
	requireLintClean(t, out)
}

// The storage node's exposition after a write, a read, a delete and a miss,
// through its real handler, served by the node itself.
func TestStorageNodeExpositionPassesPromlint(t *testing.T) {
	cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{
		"STORAGE_NODE_ID":        "node-lint",
		"STORAGE_DATA_DIRECTORY": t.TempDir(),
	}))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	node, err := storagenode.New(cfg, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, node.Close()) })
	h := node.Handler()

	do := func(method, path string, body []byte, header map[string]string) int {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req := httptest.NewRequest(method, path, r)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	data := []byte("bytes the node keeps")
	sum := sha256.Sum256(data)
	id := "0b6d5c1e-8f0a-4a8e-9c52-3d1f0f6e2a11"
	require.Equal(t, http.StatusCreated, do(http.MethodPut, wire.BlobPath(id), data,
		map[string]string{wire.HeaderChecksum: hex.EncodeToString(sum[:])}))
	require.Equal(t, http.StatusOK, do(http.MethodGet, wire.BlobPath(id), nil, nil))
	require.Equal(t, http.StatusOK, do(http.MethodGet, wire.ChecksumPath(id), nil, nil))
	require.Equal(t, http.StatusNoContent, do(http.MethodDelete, wire.BlobPath(id), nil, nil))
	require.Equal(t, http.StatusNotFound, do(http.MethodGet, wire.BlobPath(id), nil, nil))
	require.Equal(t, http.StatusNotFound, do(http.MethodGet, "/no/such/path", nil, nil))

	out := scrape(t, h)
	requireFamilies(t, out,
		"dfs_node_blob_writes_total", "dfs_node_blob_reads_total", "dfs_node_blob_deletes_total",
		"dfs_node_blob_received_bytes_total", "dfs_node_blob_sent_bytes_total",
		"dfs_node_http_requests_total", "dfs_node_http_request_duration_seconds",
		"dfs_node_blobs", "dfs_node_stored_bytes", "dfs_node_free_bytes",
		"dfs_node_sync_batches_total", "dfs_node_sync_batch_waits_total", "dfs_node_sync_batch_seconds_total",
		"dfs_node_blob_batch_items", "dfs_build_info", "go_goroutines", "process_cpu_seconds_total")
	requireLintClean(t, out)
}
