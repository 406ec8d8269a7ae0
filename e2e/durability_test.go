//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
)

func (c *cluster) durability() client.DurabilityReport {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	d, err := c.api.Durability(ctx)
	require.NoError(c.t, err)
	return d
}

// dfsStatus runs the real dfs binary's `status -json` against the cluster and
// returns its exit status and report.
func (c *cluster) dfsStatus() (int, client.DurabilityReport) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(filepath.Join(binDir, "dfs"), "status", "-json", "-url", c.lc.CoordinatorURL())
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		require.True(c.t, errors.As(err, &exit), "run dfs status: %v (%s)", err, errOut.String())
		code = exit.ExitCode()
	}
	var rep client.DurabilityReport
	require.NoError(c.t, json.Unmarshal(out.Bytes(), &rep), "dfs status printed %q (%s)", out.String(), errOut.String())
	return code, rep
}

// risks is the per-node part of a report as node → [status, one, none].
func risks(d client.DurabilityReport) map[string][3]any {
	out := map[string][3]any{}
	for _, n := range d.Nodes {
		out[n.NodeID] = [3]any{client.NodeStatus(n.Status), n.FilesLeftWithOneCopy, n.FilesLeftWithNoCopy}
	}
	return out
}

// TestDurabilityAfterANodeIsKilled: three nodes with every file on all of
// them survive two failures; kill -9 one, and once the failure detector has
// evicted it every file is down to two healthy copies, the headroom to one,
// and each survivor holds the next-to-last copy of every file. `dfs status`
// says the same and exits 1 while files are below the replication factor.
func TestDurabilityAfterANodeIsKilled(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{})
	files := c.uploadRandom(8, 8<<10)
	var size int64
	for _, f := range files {
		size += f.res.SizeBytes
	}
	nodes := c.lc.Nodes()

	d := c.durability()
	require.Equal(t, map[string]int{"0": 0, "1": 0, "2": 0, "3": len(files)}, d.FilesByCopies)
	require.Zero(t, d.BytesAtRisk)
	require.Equal(t, 2, d.FailureHeadroom)
	require.Equal(t, 3, d.HealthyNodes)
	for _, n := range nodes {
		require.Equal(t, [3]any{client.NodeHealthy, 0, 0}, risks(d)[n], n)
	}
	code, rep := c.dfsStatus()
	require.Equal(t, 0, code, "dfs status exits 0 with every file fully replicated")
	require.Equal(t, d, rep)

	victim := nodes[1]
	require.NoError(t, c.lc.KillNode(victim))
	c.waitEvicted(victim)
	want := map[string][3]any{}
	for _, n := range nodes {
		want[n] = [3]any{client.NodeHealthy, len(files), 0}
	}
	want[victim] = [3]any{client.NodeUnhealthy, 0, 0}
	eventually(t, settleTimeout, "the report to count the eviction", func() (bool, string) {
		d = c.durability()
		return d.FilesByCopies["2"] == len(files), fmt.Sprintf("%+v", d)
	})
	require.Equal(t, map[string]int{"0": 0, "1": 0, "2": len(files), "3": 0}, d.FilesByCopies)
	require.Equal(t, size, d.BytesAtRisk)
	require.Equal(t, 1, d.FailureHeadroom)
	require.Equal(t, 2, d.HealthyNodes)
	require.Equal(t, want, risks(d))

	code, rep = c.dfsStatus()
	require.Equal(t, 1, code, "dfs status exits 1 while files are below the replication factor")
	require.Equal(t, 1, rep.FailureHeadroom)
	require.Equal(t, len(files), rep.FilesByCopies["2"])
	require.True(t, slices.ContainsFunc(rep.Nodes, func(n client.NodeRisk) bool {
		return n.NodeID == victim && n.Status == string(client.NodeUnhealthy)
	}))
}
