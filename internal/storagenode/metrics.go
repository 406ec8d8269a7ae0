package storagenode

import (
	"context"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/errs"
)

// Outcomes of blob operations, the only values of the outcome labels.
const (
	outcomeCreated       = "created"
	outcomeExists        = "exists"
	outcomeOK            = "ok"
	outcomePartial       = "partial"
	outcomeIntact        = "intact"
	outcomeCorrupt       = "corrupt"
	outcomeMismatch      = "checksum_mismatch"
	outcomeConflict      = "conflict"
	outcomeNoSpace       = "no_space"
	outcomeNotFound      = "not_found"
	outcomeInvalid       = "invalid"
	outcomeUnsatisfiable = "unsatisfiable"
	outcomeAborted       = "aborted"
	outcomeError         = "error"
)

// metrics are the node's Prometheus series. Stored totals are computed at
// scrape time from the store's running counts, so they are never stale.
type metrics struct {
	writes        *prometheus.CounterVec
	reads         *prometheus.CounterVec
	deletes       *prometheus.CounterVec
	rehashes      *prometheus.CounterVec
	received      prometheus.Counter
	sent          prometheus.Counter
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	registrations *prometheus.CounterVec
	batchItems    prometheus.Histogram
	blockFailures prometheus.Counter
}

// syncReporter is a store that makes writes durable with shared syncs and
// counts them (blob.Disk).
type syncReporter interface {
	SyncMode() blob.SyncMode
	SyncStats() blob.SyncStats
}

// groupCommitReporter is a store that appends records in groups, one sync
// per group (blob.Volumes).
type groupCommitReporter interface {
	GroupCommits() blob.SyncStats
}

// compactReporter is a store that compacts its volumes (blob.Volumes).
type compactReporter interface {
	CompactStats() blob.CompactStats
	GarbageBytes() int64
}

func newMetrics(reg prometheus.Registerer, nodeID string, store blob.UsageReporter) (*metrics, error) {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dfs_node_blob_writes_total", Help: "Blob writes (PUT) by outcome.",
		}, []string{"outcome"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dfs_node_blob_reads_total", Help: "Blob reads (GET) by outcome.",
		}, []string{"outcome"}),
		deletes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dfs_node_blob_deletes_total", Help: "Blob deletes by outcome.",
		}, []string{"outcome"}),
		rehashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dfs_node_blob_rehashes_total", Help: "On-demand checksum verifications by outcome.",
		}, []string{"outcome"}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dfs_node_blob_received_bytes_total", Help: "Bytes of blobs stored by writes.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dfs_node_blob_sent_bytes_total", Help: "Bytes of blobs sent by reads.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dfs_node_http_requests_total", Help: "HTTP requests by route pattern, method and status.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dfs_node_http_request_duration_seconds", Help: "HTTP request duration by route pattern and method, body transfer included.",
			// Blob transfers run from milliseconds to minutes.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"route", "method"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dfs_node_registrations_total", Help: "Registration attempts with the coordinator by outcome.",
		}, []string{"outcome"}),
		blockFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dfs_node_blob_read_damage_total",
			Help: "Reads that found a blob damaged (a block not matching its CRC-32C, or a small blob its SHA-256); the blob is refused until written again.",
		}),
		batchItems: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dfs_node_blob_batch_items",
			Help:    "Blobs per batched write request (POST /internal/blob-batch); each is also counted in dfs_node_blob_writes_total.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}),
	}
	usage := func(pick func(blob.Usage) int64) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			u, _ := store.Usage(ctx) // counts are valid even when the device cannot be read
			return float64(pick(u))
		}
	}
	syncMode, syncStats := "none", func() blob.SyncStats { return blob.SyncStats{} }
	if sr, ok := store.(syncReporter); ok {
		syncMode, syncStats = string(sr.SyncMode()), sr.SyncStats
	}
	groups := func() blob.SyncStats { return blob.SyncStats{} }
	if gr, ok := store.(groupCommitReporter); ok {
		groups = gr.GroupCommits
	}
	compacts, garbage := func() blob.CompactStats { return blob.CompactStats{} }, func() int64 { return 0 }
	if cr, ok := store.(compactReporter); ok {
		compacts, garbage = cr.CompactStats, cr.GarbageBytes
	}
	collectors := []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_compactions_total", Help: "Volumes compacted (rewritten with their live records only).",
		}, func() float64 { return float64(compacts().Volumes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_compaction_failures_total", Help: "Compactions that failed; the old volume stayed.",
		}, func() float64 { return float64(compacts().Failed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_compaction_read_bytes_total", Help: "Bytes of volumes walked by compactions.",
		}, func() float64 { return float64(compacts().Read) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_compaction_reclaimed_bytes_total", Help: "Bytes of disk compactions gave back.",
		}, func() float64 { return float64(compacts().Reclaimed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_compaction_seconds_total", Help: "Time spent compacting volumes.",
		}, func() float64 { return compacts().Time.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dfs_node_volume_garbage_bytes", Help: "Bytes of volumes held by removed or superseded blobs: what compaction could reclaim.",
		}, func() float64 { return float64(garbage()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_group_commits_total",
			Help: "Group commits of the volumes layout: one write and one fdatasync each, shared by every record waiting for the appender.",
		}, func() float64 { return float64(groups().Syncs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_group_records_total",
			Help: "Records (blob writes and tombstones) committed by group commits; divided by dfs_node_volume_group_commits_total, the mean group size.",
		}, func() float64 { return float64(groups().Waits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_volume_group_commit_seconds_total",
			Help: "Time spent writing and syncing group commits.",
		}, func() float64 { return groups().Time.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_sync_batches_total",
			Help: "Whole-file-system syncs run in batch sync mode, each shared by every write or delete waiting for one when it started.",
		}, func() float64 { return float64(syncStats().Syncs) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_sync_batch_waits_total",
			Help: "Waits ended by batch-mode syncs (two per write, one per delete); divided by dfs_node_sync_batches_total, the mean batch size.",
		}, func() float64 { return float64(syncStats().Waits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "dfs_node_sync_batch_seconds_total",
			Help: "Time spent in batch-mode syncs.",
		}, func() float64 { return syncStats().Time.Seconds() }),
		m.writes, m.reads, m.deletes, m.rehashes, m.received, m.sent, m.requests, m.duration, m.registrations, m.batchItems, m.blockFailures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dfs_node_blobs", Help: "Blobs stored."},
			usage(func(u blob.Usage) int64 { return u.Blobs })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dfs_node_stored_bytes", Help: "Bytes of blobs stored."},
			usage(func(u blob.Usage) int64 { return u.BytesUsed })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dfs_node_free_bytes", Help: "Bytes the node can still store: free disk space, bounded by the capacity limit."},
			usage(func(u blob.Usage) int64 { return u.FreeBytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dfs_node_disk_total_bytes", Help: "Size of the file system holding the data directory."},
			usage(func(u blob.Usage) int64 { return u.TotalBytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "dfs_node_capacity_bytes", Help: "Configured limit on stored bytes (0 = unlimited)."},
			usage(func(u blob.Usage) int64 { return u.CapacityBytes })),
		// The coordinator's series of the same name and labels, so that
		// one query shows which build every process of a rolling upgrade
		// runs.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "dfs_build_info", Help: "Always 1; labels name the build (as --version does) and the Go release it was built with.",
			ConstLabels: prometheus.Labels{"version": buildinfo.Version(), "goversion": runtime.Version()},
		}, func() float64 { return 1 }),
		prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dfs_node_info", Help: "Always 1; labels identify the node and how it makes writes durable.",
			ConstLabels: prometheus.Labels{"node_id": nodeID, "sync_mode": syncMode},
		}),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "register metrics")
		}
	}
	collectors[len(collectors)-1].(prometheus.Gauge).Set(1)
	// Every outcome series exists from the start, so rates and alerts do not
	// depend on the first occurrence.
	for vec, outcomes := range map[*prometheus.CounterVec][]string{
		m.writes:        {outcomeCreated, outcomeExists, outcomeMismatch, outcomeConflict, outcomeNoSpace, outcomeInvalid, outcomeError},
		m.reads:         {outcomeOK, outcomePartial, outcomeNotFound, outcomeUnsatisfiable, outcomeInvalid, outcomeAborted, outcomeError},
		m.deletes:       {outcomeOK, outcomeInvalid, outcomeError},
		m.rehashes:      {outcomeIntact, outcomeCorrupt, outcomeNotFound, outcomeInvalid, outcomeError},
		m.registrations: {outcomeOK, outcomeError},
	} {
		for _, o := range outcomes {
			vec.WithLabelValues(o)
		}
	}
	return m, nil
}

// outcomeOf names the outcome of a failed blob operation.
func outcomeOf(err error) string {
	switch errs.KindOf(err) {
	case errs.NotFound:
		return outcomeNotFound
	case errs.Invalid:
		return outcomeInvalid
	case errs.Corrupt:
		return outcomeMismatch
	case errs.Conflict:
		return outcomeConflict
	case errs.NoSpace:
		return outcomeNoSpace
	case errs.Unsatisfiable:
		return outcomeUnsatisfiable
	}
	return outcomeError
}
