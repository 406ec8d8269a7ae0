package coordinator

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/rebalance"
)

// atRisk builds, on a cluster of three nodes at RF 3 that reconciles one
// file at a time, many files with two copies and, uploaded after them, a
// few with one: node-3 is stopped for the first uploads, node-2 too for the
// last. Both nodes then come back with what they held, so every missing
// copy can be made, and the order they are made in is the order the files
// were taken in.
func atRisk(t *testing.T, kind string) (h *harness, one, two []string) {
	h = newHarness(t, kind, 3, map[string]string{"REBALANCE_PARALLELISM": "1"})
	h.stopNode("node-3")
	for i := range 30 {
		res := h.upload("two", payload(200+i, byte(i)))
		require.Len(t, h.metadata(res.FileID).copies("ACTIVE"), 2)
		two = append(two, res.FileID)
	}
	h.stopNode("node-2")
	for i := range 3 {
		res := h.upload("one", payload(100+i, byte(i)))
		require.Len(t, h.metadata(res.FileID).copies("ACTIVE"), 1)
		one = append(one, res.FileID)
	}
	h.restartNode("node-2")
	h.restartNode("node-3")
	return h, one, two
}

var createdCopy = regexp.MustCompile(`msg="created copy" file=(\S+)`)

// copiesCreated lists, in the order they were made, the file of every copy
// the coordinator created.
func (h *harness) copiesCreated() []string {
	var files []string
	for _, m := range createdCopy.FindAllStringSubmatch(h.logs.String(), -1) {
		files = append(files, m[1])
	}
	return files
}

// requireOneCopyFirst: the first copies made are the two each one-copy file
// lacks, then one for each two-copy file.
func requireOneCopyFirst(t *testing.T, made, one, two []string) {
	t.Helper()
	require.Len(t, made, 2*len(one)+len(two))
	first := made[:2*len(one)]
	for _, id := range one {
		require.Equal(t, 2, strings.Count(strings.Join(first, " "), id), "file %s, with one copy, is repaired first: %v", id, first)
	}
	require.ElementsMatch(t, two, made[2*len(one):])
}

func TestRepairTakesOneCopyFilesFirst(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h, one, two := atRisk(t, kind)
		metrics := string(h.get("/metrics").body)
		for _, line := range []string{
			`dfs_repair_queue_files{copies="0"} 0`,
			`dfs_repair_queue_files{copies="1"} 3`,
			`dfs_repair_queue_files{copies="2"} 30`,
			`dfs_repair_queue_files{copies="3+"} 0`,
		} {
			require.Contains(t, metrics, line+"\n")
		}
		// The two-copy files are older, so oldest-first would take them first.
		require.NoError(t, h.repairPass(context.Background()))
		requireOneCopyFirst(t, h.copiesCreated(), one, two)
		queue, err := h.store().RepairQueue(context.Background())
		require.NoError(t, err)
		require.Empty(t, queue, "every file is whole again")
	})
}

func TestARebalanceTakesOneCopyFilesFirst(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h, one, two := atRisk(t, kind)
		// A recovery visits its files in ID order, unrelated to their risk.
		rep, err := h.app.rebalancer.Run(context.Background(), rebalance.Recovered, "node-2")
		require.NoError(t, err)
		require.True(t, rep.Complete)
		requireOneCopyFirst(t, h.copiesCreated(), one, two)
	})
}
