//go:build linux

package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
)

// A file that an upload placed around a full node has its three copies; a
// later reconcile must neither call it DEGRADED nor keep trying the full
// node, and a file that lost a copy to a full node is completed on the next
// node of its preference list.
func TestFullNodeFilesStayActiveThroughRebalance(t *testing.T) {
	t.Parallel()
	const size = 40 << 10
	c := startCluster(t, options{nodes: 3})
	const full = "full-1"
	c.startExtraNode(full, fmt.Sprintf("STORAGE_CAPACITY_BYTES=%d", size/2))
	c.waitOnRing(full)

	files := c.uploadRandom(8, size)
	for _, f := range files {
		require.Equal(t, client.FileActive, f.res.Status, "%s", f.res.Reason)
	}
	ctx, cancel := callCtx()
	defer cancel()
	rep, err := c.api.Rebalance(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Failures, "the rebalance keeps trying the full node: %+v", rep)
	for _, f := range files {
		md := c.metadata(f.res.FileID)
		require.Equal(t, client.FileActive, md.Status, "file %s with copies %v: %s", f.res.FileID, activeCopies(md), md.Reason)
		require.Len(t, activeCopies(md), 3)
	}
	n := c.nodes()[full]
	require.Equal(t, client.NodeHealthy, n.Status)
}
