package coordinator

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
)

// A coordinator killed right after it admitted a fourth node, before the
// JOINED rebalance moved anything, leaves exactly this behind: the node
// HEALTHY in the store and the membership epoch one ahead of the rebalanced
// one. Nothing else would ever move the files (no event is left, the repair
// loop looks at ACTIVE files only through the sweep, 10 minutes away). The
// coordinator that starts next sees the epochs differ and catches up.
func TestStartingBehindOnEpochsRunsTheOwedRebalance(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		// The catch-up runs when two repair passes in a row find the gap.
		h := newHarness(t, kind, 3, map[string]string{"REPAIR_INTERVAL": "200ms"})
		var ids []string
		for i := range 24 {
			ids = append(ids, h.upload("f", payload(512, byte(i))).FileID)
		}
		h.settle()
		spare := nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_NODE_ID": "node-4"}})
		h.stop()

		ctx := context.Background()
		st, err := metastore.Open(ctx, h.env["DATABASE_URL"], h.env["DATA_DIRECTORY"], sqlite.DefaultOptions(), nil)
		require.NoError(t, err)
		before, err := st.Epochs(ctx)
		require.NoError(t, err)
		require.Equal(t, before.Membership, before.Rebalanced, "every change so far was rebalanced")
		_, err = st.BumpMembershipEpoch(ctx)
		require.NoError(t, err)
		host, port, _ := net.SplitHostPort(spare.Addr)
		p, _ := strconv.Atoi(port)
		now := time.Now()
		require.NoError(t, st.CreateNode(ctx, &meta.Node{ID: "node-4", Host: host, Port: p, Status: meta.NodeHealthy,
			RegisteredAt: now, LastHealthyAt: &now, DiskID: spare.DiskID}))
		require.NoError(t, st.Close())

		h.startCoordinator()
		rg := ring.New(100, "node-1", "node-2", "node-3", "node-4")
		moved := 0
		for _, id := range ids {
			if contains(rg.Preference(id, 3), "node-4") {
				moved++
			}
		}
		require.Positive(t, moved)
		require.Eventually(t, func() bool {
			for _, id := range ids {
				rec, err := h.store().GetFile(ctx, id)
				if err != nil || !placedOn(rec, rg.Preference(id, 3)) {
					return false
				}
			}
			return true
		}, 30*time.Second, 20*time.Millisecond, "every file reaches its place on the four-node ring")
		require.Eventually(t, func() bool {
			ep, err := h.store().Epochs(ctx)
			return err == nil && ep.Rebalanced == ep.Membership
		}, 10*time.Second, 20*time.Millisecond, "the catch-up records the epoch it completed")
		require.True(t, hasLog(h, "catch-up rebalance completed"))
		for _, id := range ids {
			if contains(rg.Preference(id, 3), "node-4") {
				require.True(t, blobfault.Holds(t, spare.DataDir, id), "node-4 holds %s", id)
			}
		}
	})
}

// placedOn reports whether rec is ACTIVE with exactly one ACTIVE copy on each
// of want, the first its primary.
func placedOn(rec meta.FileRecord, want []string) bool {
	if rec.Status != meta.FileActive || rec.PrimaryNodeID != want[0] || len(rec.Replicas) != len(want) {
		return false
	}
	for _, c := range rec.Replicas {
		if c.Status != meta.ReplicaActive || !contains(want, c.NodeID) {
			return false
		}
	}
	return true
}

// A membership change whose own rebalance completes records its epoch, so
// the repair loop has nothing to catch up on.
func TestACompletedJoinRecordsItsEpoch(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	for i := range 6 {
		h.upload("f", payload(256, byte(i)))
	}
	ctx := context.Background()
	before, err := h.store().Epochs(ctx)
	require.NoError(t, err)
	require.Equal(t, before.Membership, before.Rebalanced)
	h.addNode("node-4")
	h.admit()
	h.settle()
	after, err := h.store().Epochs(ctx)
	require.NoError(t, err)
	require.Equal(t, before.Membership+1, after.Membership, "the join is one membership change")
	require.Equal(t, after.Membership, after.Rebalanced, "its rebalance completed and said so")
	require.False(t, hasLog(h, "catching up"))
}
