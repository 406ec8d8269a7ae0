//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

// With Redis gone (or just back after a restart) a single coordinator must
// still delete and rebalance at once: the seed promises process-local
// locks, not skipped work.
func TestRedisKilledDeletesAndRebalancingGoOn(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"REDIS_URL=" + rd.URL()}})
	files := c.uploadRandom(6, 16<<10)
	rd.Kill()

	t.Run("delete with every holder up is complete", func(t *testing.T) {
		c := c.with(t)
		ctx, cancel := callCtx()
		defer cancel()
		del, err := c.api.Delete(ctx, files[0].res.FileID)
		require.NoError(t, err)
		require.True(t, del.Complete, "%+v", del)
	})
	t.Run("manual rebalance runs", func(t *testing.T) {
		c := c.with(t)
		req, err := http.NewRequest(http.MethodPost, c.lc.CoordinatorURL()+"/api/admin/rebalance", nil)
		require.NoError(t, err)
		resp, err := c.http.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var rep map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rep))
		require.NotEqual(t, true, rep["skipped"], "%d %v", resp.StatusCode, rep)
	})
	t.Run("a joining node gets its share", func(t *testing.T) {
		c := c.with(t)
		spare, err := c.lc.AddNode(t.Context())
		require.NoError(t, err)
		c.waitOnRing(spare)
		eventually(t, settleTimeout, spare+" takes its share", func() (bool, string) {
			n := len(c.blobs(spare))
			return n > 0, fmt.Sprintf("%d blobs", n)
		})
		require.NoError(t, c.lc.KillNode("node-1"))
		c.waitEvicted("node-1")
		c.waitStatus(client.FileActive, ids(files[1:])...)
	})
}
