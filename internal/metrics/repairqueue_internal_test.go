package metrics

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestRepairQueueGaugeCountsOncePerPeriodAndHidesFailures(t *testing.T) {
	var calls atomic.Int32
	queue, fail := map[int]int{1: 4, 2: 40, 3: 1}, error(nil)
	c := NewRepairQueue(func(context.Context) (map[int]int, error) {
		calls.Add(1)
		return queue, fail
	}, RepairQueueOptions{ReplicationFactor: 3, CacheFor: 10 * time.Second})
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.counts.now = clock.now
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))

	want := `
# HELP dfs_repair_queue_files Files waiting for repair (DEGRADED and FAILED) by ACTIVE copies left; the repair loop takes the fewest first.
# TYPE dfs_repair_queue_files gauge
dfs_repair_queue_files{copies="0"} 0
dfs_repair_queue_files{copies="1"} 4
dfs_repair_queue_files{copies="2"} 40
dfs_repair_queue_files{copies="3+"} 1
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(want), "dfs_repair_queue_files"))
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(want), "dfs_repair_queue_files"))
	require.Equal(t, int32(1), calls.Load(), "a fresh count is reused")

	fail = errors.New("metadata store down")
	clock.advance(11 * time.Second)
	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_repair_queue_files"), "a failed count shows no stale number")
	require.Equal(t, 1.0, testutil.ToFloat64(c.errors))
	require.Equal(t, int32(2), calls.Load())
}
