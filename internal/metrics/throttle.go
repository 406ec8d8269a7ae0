package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CopyThrottle records how REBALANCE_BANDWIDTH paces the coordinator's own
// copies (rebalance, drain and repair); its Paced method is the hook of
// reconcile.NewThrottle.
type CopyThrottle struct {
	bytes prometheus.Counter
	wait  prometheus.Counter
}

// NewCopyThrottle creates the pacing metrics on reg, at zero.
func NewCopyThrottle(reg prometheus.Registerer) *CopyThrottle {
	c := &CopyThrottle{
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "dfs_rebalance_throttled_bytes_total",
			Help: "Bytes of rebalance, drain and repair copies paced by REBALANCE_BANDWIDTH (client uploads and downloads never are)."}),
		wait: prometheus.NewCounter(prometheus.CounterOpts{Name: "dfs_rebalance_throttle_wait_seconds_total",
			Help: "Time rebalance, drain and repair copies waited for REBALANCE_BANDWIDTH, summed over concurrent copies."}),
	}
	reg.MustRegister(c.bytes, c.wait)
	return c
}

// Paced records one paced chunk of a copy and how long it waited.
func (c *CopyThrottle) Paced(bytes int, wait time.Duration) {
	c.bytes.Add(float64(bytes))
	c.wait.Add(wait.Seconds())
}
