package coordinator

import (
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
)

func TestConfigRebalanceBandwidth(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(nil))
	require.NoError(t, err)
	require.Zero(t, c.RebalanceBandwidth, "unlimited by default")
	for v, want := range map[string]int64{"0": 0, "10MiB": 10 << 20, "65536": 64 << 10, "1KB": 1 << 10} {
		c, err := LoadConfig(envconf.FromMap(map[string]string{"REBALANCE_BANDWIDTH": v}))
		require.NoError(t, err, v)
		require.Equal(t, want, c.RebalanceBandwidth, v)
	}
	for _, v := range []string{"-5", "fast", "1.5MB", "9999999999GiB"} {
		_, err := LoadConfig(envconf.FromMap(map[string]string{"REBALANCE_BANDWIDTH": v}))
		require.Error(t, err, v)
		require.Contains(t, err.Error(), "REBALANCE_BANDWIDTH", v)
	}
}

// REBALANCE_BANDWIDTH paces the coordinator's own copies and nothing else:
// a client's upload (three copies written) and download take none of its
// tokens, a rebalance's copy takes one per byte and waits for those beyond
// the burst.
func TestRebalanceBandwidthPacesCopiesNotClients(t *testing.T) {
	const bandwidth, size = 64 << 10, 100 << 10
	h := newHarness(t, "sqlite", 3, map[string]string{"REBALANCE_BANDWIDTH": "64KiB"})
	data := payload(size, 7)
	res := h.upload("f", data)
	got := h.get("/api/files/" + res.FileID)
	require.Equal(t, http.StatusOK, got.StatusCode)
	require.Equal(t, data, got.body)
	require.Equal(t, "0", h.metric("dfs_rebalance_throttled_bytes_total"), "client transfers are never paced")
	require.Equal(t, "0", h.metric("dfs_rebalance_throttle_wait_seconds_total"))

	require.NoError(t, os.Remove(h.blobPath("node-1", res.FileID)))
	rep := h.rebalance()
	require.Equal(t, 1, rep.CopiesCreated)
	require.True(t, h.holds("node-1", res.FileID))
	require.Equal(t, strconv.Itoa(size), h.metric("dfs_rebalance_throttled_bytes_total"), "the copy took a token per byte")
	wait, err := strconv.ParseFloat(h.metric("dfs_rebalance_throttle_wait_seconds_total"), 64)
	require.NoError(t, err)
	// The bucket starts full (one chunk); the rest of the copy waited for its
	// tokens, by the limiter's own account: at most the time the bytes
	// beyond the burst take at the rate, less only what the copy spent
	// working between its waits.
	owed := float64(size-bandwidth) / bandwidth
	require.LessOrEqual(t, wait, owed+0.001)
	require.Greater(t, wait, owed/2)
}
