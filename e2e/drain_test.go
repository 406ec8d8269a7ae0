package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
)

// planDrain asks for a dry run of node's drain.
func (c *cluster) planDrain(node string) client.DrainPlan {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	p, err := c.api.PlanDrain(ctx, node)
	require.NoError(c.t, err)
	c.t.Logf("drain plan of %s: %+v", node, p)
	return p
}

// drain deregisters node, waiting for the drain, with or without force.
func (c *cluster) drain(node string, force bool) (client.DeregisterResult, error) {
	ctx, cancel := callCtx()
	defer cancel()
	return c.api.DeregisterWith(ctx, node, client.DrainOptions{Wait: true, Force: force})
}

// requireUntouched requires node to be still HEALTHY on the ring, every node
// to hold the blobs it held before, and no deregistration in the
// coordinator's log: a dry run or a refused drain changed nothing.
func (c *cluster) requireUntouched(node string, before placement, nodes ...string) {
	c.t.Helper()
	n := c.nodes()[node]
	require.Equal(c.t, client.NodeHealthy, n.Status, "%+v", n)
	require.True(c.t, n.OnRing, "%+v", n)
	require.Equal(c.t, before, c.heldBlobs(nodes...), "no copy may move")
	require.Empty(c.t, c.logEntries(localcluster.CoordinatorName, "node "+node+" deregistered"))
	require.Empty(c.t, c.logEntries(localcluster.CoordinatorName, "drain started"))
}

// placedOn reports whether the upload put a copy on node.
func (f stored) placedOn(node string) bool {
	return f.res.PrimaryNode == node || slices.Contains(f.res.Replicas, node)
}

// requireDrainRefused requires err to be the refusal of an unsafe drain naming
// every reason of the plan.
func requireDrainRefused(t *testing.T, err error, p client.DrainPlan) {
	t.Helper()
	requireAPIError(t, err, 409, "UNSAFE_DRAIN")
	for _, r := range p.Reasons {
		require.Contains(t, apiError(err).Message, r)
	}
}

// Two nodes at RF 3: draining one would leave a single copy of every file.
// The dry run says so and changes nothing, the drain is refused, and forced
// it goes ahead.
func TestDrainLeavingFewerNodesThanRFIsRefusedUnlessForced(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 2})
	files := c.uploadRandom(6, 4<<10)
	all := c.lc.Nodes()
	before := c.heldBlobs(all...)
	require.Len(t, before["node-2"], len(files), "two nodes at RF 3 each hold every file")

	p := c.planDrain("node-2")
	require.False(t, p.Safe)
	require.Equal(t, []string{"only 1 node(s) would remain on the ring, fewer than the replication factor 3"}, p.Reasons)
	require.Equal(t, len(files), p.FilesOnNode)
	require.EqualValues(t, len(files)*4<<10, p.BytesOnNode)
	require.Zero(t, p.Files, "node-1 already holds every file: nothing to copy")
	require.Empty(t, p.Targets)
	require.Empty(t, p.SoleCopies, "node-1 holds a healthy copy of each")
	c.requireUntouched("node-2", before, all...)

	_, err := c.drain("node-2", false)
	requireDrainRefused(t, err, p)
	c.requireUntouched("node-2", before, all...)

	res, err := c.drain("node-2", true)
	require.NoError(t, err)
	require.True(t, res.Drain.Complete, "%+v", res.Drain)
	require.Equal(t, client.NodeDeregistered, res.Node.Status)
	require.Empty(t, c.blobs("node-2"), "a complete drain removes the node's copies")
	forced := c.logEntries(localcluster.CoordinatorName, "unsafe drain forced")
	require.Len(t, forced, 1)
	require.Equal(t, "node-2", forced[0].str("node"))
	for _, f := range files {
		require.Equal(t, "node-1", c.mustRead(f).ServedBy)
	}
}

// A remaining node that is nearly full cannot take the copies a drain would
// send it.
func TestDrainOntoANearlyFullNodeIsRefused(t *testing.T) {
	t.Parallel()
	const size = 16 << 10
	const small = "small-1"
	c := startCluster(t, options{nodes: 3})
	c.startExtraNode(small, "STORAGE_CAPACITY_BYTES=4MiB")
	c.waitOnRing(small)
	// Until a file has no copy on the small node: draining any other node
	// then sends it one.
	var files []stored
	for i := 0; !slices.ContainsFunc(files, func(f stored) bool { return !f.placedOn(small) }); i++ {
		require.Less(t, i, 100, "no file was placed without the small node")
		files = append(files, c.mustUpload(fmt.Sprintf("file-%02d.bin", i), randomBytes(size)))
	}
	c.waitStatus(client.FileActive, ids(files)...)
	// Other data fills it up to half a file's room.
	c.putBlob(small, "filler-0001", randomBytes(int(c.stats(small).FreeBytes)-size/2))
	all := append(c.lc.Nodes(), small)
	before := c.heldBlobs(all...)
	free := c.stats(small).FreeBytes
	require.Less(t, free, int64(size), "the small node is nearly full")

	p := c.planDrain("node-1")
	require.False(t, p.Safe)
	require.Len(t, p.Reasons, 1, "%q", p.Reasons)
	i := slices.IndexFunc(p.Targets, func(t client.DrainTarget) bool { return t.NodeID == small })
	require.GreaterOrEqual(t, i, 0, "the small node would receive copies: %+v", p.Targets)
	target := p.Targets[i]
	require.Equal(t, fmt.Sprintf("node %s would receive %d bytes (%d files) but reports only %d bytes free",
		small, target.Bytes, target.Files, free), p.Reasons[0])
	require.Equal(t, free, *target.FreeBytes)
	require.Equal(t, 3, p.RemainingNodes)
	require.Empty(t, p.SoleCopies)
	c.requireUntouched("node-1", before, all...)

	_, err := c.drain("node-1", false)
	requireDrainRefused(t, err, p)
	c.requireUntouched("node-1", before, all...)
}

// A file whose other holders are down has its only healthy copy on the
// node; with them down no node can take it, and the drain is refused.
func TestDrainOfASoleCopyIsRefused(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	files := c.uploadRandom(3, 4<<10)
	for _, n := range []string{"node-2", "node-3"} {
		require.NoError(t, c.lc.KillNode(n))
		c.waitEvicted(n)
	}
	before := c.heldBlobs("node-1")

	p := c.planDrain("node-1")
	require.False(t, p.Safe)
	want := ids(files)
	slices.Sort(want)
	require.Equal(t, want, p.SoleCopies)
	require.Equal(t, []string{
		"only 0 node(s) would remain on the ring, fewer than the replication factor 3",
		fmt.Sprintf("3 file(s) have their only healthy copy on node node-1 and no remaining node can take them: %s",
			strings.Join(want, ", ")),
	}, p.Reasons)
	c.requireUntouched("node-1", before, "node-1")

	_, err := c.drain("node-1", false)
	requireDrainRefused(t, err, p)
	c.requireUntouched("node-1", before, "node-1")
	for _, f := range files {
		require.Equal(t, "node-1", c.mustRead(f).ServedBy, "the sole copy still serves")
	}
}

// A drain that is safe goes ahead as it always did, and its dry run names
// the nodes that gain copies.
func TestSafeDrainIsPlannedThenDone(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 4})
	files := c.uploadRandom(8, 4<<10)
	c.waitStatus(client.FileActive, ids(files)...)
	all := c.lc.Nodes()
	before := c.heldBlobs(all...)

	p := c.planDrain("node-4")
	require.True(t, p.Safe, "%q", p.Reasons)
	require.Len(t, before["node-4"], p.FilesOnNode)
	require.Equal(t, p.FilesOnNode, p.Files, "each file on node-4 gains one copy")
	received := 0
	for _, tg := range p.Targets {
		require.NotEqual(t, "node-4", tg.NodeID)
		require.NotNil(t, tg.FreeBytes)
		received += tg.Files
	}
	require.Equal(t, p.Files, received)
	c.requireUntouched("node-4", before, all...)

	res, err := c.drain("node-4", false)
	require.NoError(t, err)
	require.True(t, res.Drain.Complete, "%+v", res.Drain)
	require.Empty(t, c.blobs("node-4"))
	after := c.heldBlobs("node-1", "node-2", "node-3")
	for _, tg := range p.Targets {
		gained := 0
		for _, id := range after[tg.NodeID] {
			if !slices.Contains(before[tg.NodeID], id) {
				gained++
			}
		}
		require.Equal(t, tg.Files, gained, "%s gained what the plan said", tg.NodeID)
	}
	require.Empty(t, c.logEntries(localcluster.CoordinatorName, "unsafe drain forced"))
}
