//go:build unix

package coordinator

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

// TestRedisClusterAddrsPutTheCacheOnACluster is REDIS_CLUSTER_ADDRS's
// effect: the coordinator caches file records on the cluster, and its health
// says DEGRADED while one master is dead and UP once it is back.
func TestRedisClusterAddrsPutTheCacheOnACluster(t *testing.T) {
	rc := redistest.StartCluster(t, 3)
	// The in-memory cache would answer before Redis: off, so Redis is what is tested.
	h := newHarness(t, "sqlite", 3, map[string]string{
		"REDIS_CLUSTER_ADDRS": strings.Join(rc.Addrs(), ","), "CACHE_METADATA_TTL": "1m", "LOCAL_CACHE_ENTRIES": "0",
	})
	res := h.upload("f", payload(1000, 1))
	for range 3 {
		require.Equal(t, http.StatusOK, h.get("/api/files/"+res.FileID+"/metadata").StatusCode)
	}
	require.Contains(t, string(h.get("/metrics").body), "dfs_cache_hits_total 2", "the second and third reads came from the cluster")

	type health struct {
		Status string
		Redis  struct{ Status string } `json:"redis"`
	}
	var hr health
	h.get("/api/health").json(t, &hr)
	require.Equal(t, "UP", hr.Redis.Status)

	rc.Nodes[1].Kill()
	h.get("/api/health").json(t, &hr)
	require.Equal(t, "DEGRADED", hr.Status, "one dead master degrades the cluster's health")
	require.Equal(t, "DOWN", hr.Redis.Status)
	require.Equal(t, http.StatusOK, h.get("/api/files/"+res.FileID+"/metadata").StatusCode, "reads go on")

	rc.Restart(1)
	require.Eventually(t, func() bool {
		var again health
		h.get("/api/health").json(t, &again)
		return again.Redis.Status == "UP"
	}, 10*time.Second, 50*time.Millisecond)
}
