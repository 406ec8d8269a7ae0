package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/antientropy"
)

// AntiEntropy records the anti-entropy sweep's findings and progress; it is
// the sweep's antientropy.Events.
type AntiEntropy struct {
	found, fixed *prometheus.CounterVec
	checked      prometheus.Counter
	passes       prometheus.Counter
	progress     prometheus.Gauge
	lastPass     prometheus.Gauge
}

var _ antientropy.Events = (*AntiEntropy)(nil)

// NewAntiEntropy creates the sweep's metrics on reg, every kind at zero.
func NewAntiEntropy(reg prometheus.Registerer) *AntiEntropy {
	a := &AntiEntropy{
		found: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dfs_anti_entropy_found_total",
			Help: "Copies the anti-entropy sweep found wrong, by kind: misplaced (files whose copies differ from the ring), missing (an ACTIVE copy its node does not hold), corrupt (held with another checksum or a bad sidecar), orphan (held with no copy row, past the grace period)."},
			[]string{"kind"}),
		fixed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dfs_anti_entropy_fixed_total",
			Help: "Copies the anti-entropy sweep put right (through the reconciler, or by removing an orphan), by kind."},
			[]string{"kind"}),
		checked: prometheus.NewCounter(prometheus.CounterOpts{Name: "dfs_anti_entropy_files_checked_total",
			Help: "Files the anti-entropy sweep compared with the ring and the nodes' inventories."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "dfs_anti_entropy_passes_total",
			Help: "Anti-entropy passes that reached the end of the file id space."}),
		progress: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dfs_anti_entropy_pass_progress_ratio",
			Help: "How far the current anti-entropy pass has come through the file id space (0 to 1)."}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dfs_anti_entropy_last_full_pass_timestamp_seconds",
			Help: "Unix time the last full anti-entropy pass ended in this process (0 before the first)."}),
	}
	reg.MustRegister(a.found, a.fixed, a.checked, a.passes, a.progress, a.lastPass)
	for _, k := range antientropy.Kinds {
		a.found.WithLabelValues(string(k))
		a.fixed.WithLabelValues(string(k))
	}
	return a
}

// Found implements antientropy.Events.
func (a *AntiEntropy) Found(kind antientropy.Kind, n int) {
	addCount(a.found.WithLabelValues(string(kind)), int64(n))
}

// Fixed implements antientropy.Events.
func (a *AntiEntropy) Fixed(kind antientropy.Kind, n int) {
	addCount(a.fixed.WithLabelValues(string(kind)), int64(n))
}

// Checked implements antientropy.Events.
func (a *AntiEntropy) Checked(n int) { addCount(a.checked, int64(n)) }

// Progress implements antientropy.Events.
func (a *AntiEntropy) Progress(fraction float64) { a.progress.Set(fraction) }

// PassCompleted implements antientropy.Events.
func (a *AntiEntropy) PassCompleted(at time.Time) {
	a.passes.Inc()
	a.lastPass.Set(float64(at.UnixNano()) / 1e9)
}
