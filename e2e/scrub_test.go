//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/scrub"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// scrubStatus is a node's scrubber progress from its internal API.
func (c *cluster) scrubStatus(node string) wire.ScrubStatus {
	c.t.Helper()
	resp, body := c.internal(http.MethodGet, node, wire.PathScrub)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, "%s", body)
	var s wire.ScrubStatus
	require.NoError(c.t, json.Unmarshal(body, &s))
	return s
}

// scrubState is the part of a node's scrub state file a test reads.
type scrubState struct {
	PeriodStart    time.Time `json:"periodStart"`
	Cursor         string    `json:"cursor"`
	CopiesScrubbed int64     `json:"copiesScrubbed"`
}

func readScrubState(t *testing.T, dataDir string) scrubState {
	t.Helper()
	var st scrubState
	b, err := os.ReadFile(filepath.Join(dataDir, scrub.StateFile))
	if os.IsNotExist(err) {
		return st
	}
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &st))
	return st
}

// TestScrubberFindsABadCopyAndResumesAfterAKill: with SCRUB_PERIOD=20s
// each node's pass over 30 blobs is spread over 18 s. On one node a flipped
// byte in a copy nobody reads is found by the scrubber, reported, and the
// coordinator quarantines and rebuilds the copy; another node, killed with
// -9 in the middle of its pass, resumes it from its saved cursor in the same
// period and hashes only what it had not.
func TestScrubberFindsABadCopyAndResumesAfterAKill(t *testing.T) {
	t.Parallel()
	const period = 20 * time.Second
	c := startCluster(t, options{nodes: 3, nodeEnv: []string{"SCRUB_PERIOD=20s"}})
	const n = 30
	files := c.uploadRandom(n, 64<<10)
	uploaded := time.Now()
	nodes := c.lc.Nodes()
	resumer, bad, other := nodes[0], nodes[1], nodes[2]
	victim := files[0]
	blobfault.FlipByte(t, c.lc.DataDir(bad), victim.res.FileID)

	// The first pass, over an empty store, ended at start; the pass of the
	// next period covers every file.
	var st scrubState
	eventually(t, settleTimeout+period, "a saved position in a pass over every file", func() (bool, string) {
		st = readScrubState(t, c.lc.DataDir(resumer))
		return st.PeriodStart.After(uploaded) && st.CopiesScrubbed >= 3, fmt.Sprintf("%+v", st)
	})
	require.NoError(t, c.lc.KillNode(resumer))
	st = readScrubState(t, c.lc.DataDir(resumer)) // final: the process is gone
	require.Less(t, st.CopiesScrubbed, int64(n), "the pass was over before the kill")
	require.NotEmpty(t, st.Cursor)
	ctx, cancel := callCtx()
	require.NoError(t, c.lc.StartNode(ctx, resumer))
	cancel()

	eventually(t, settleTimeout+period, "the resumed pass to finish", func() (bool, string) {
		s := c.scrubStatus(resumer)
		switch {
		case s.PeriodStart == nil:
			return false, "not started yet"
		case s.PeriodStart.Equal(st.PeriodStart) && s.Running:
			require.GreaterOrEqual(t, s.CopiesScrubbed, st.CopiesScrubbed, "the count went back")
			return false, fmt.Sprintf("%+v", s)
		case s.PeriodStart.Equal(st.PeriodStart):
			require.Equal(t, int64(n), s.CopiesScrubbed)
			require.Equal(t, n-st.CopiesScrubbed, s.HashedCopies, "the restarted node hashed more than what was left of the pass")
		default:
			// The next period began already; its own blobs are its count.
			require.True(t, s.PeriodStart.After(st.PeriodStart), "%+v", s)
			require.Equal(t, n-st.CopiesScrubbed+s.CopiesScrubbed, s.HashedCopies,
				"the restarted node hashed more than what was left of the pass and the next one's share")
		}
		require.NotNil(t, s.LastFullPassAt)
		return true, ""
	})

	eventually(t, settleTimeout+period, "the corrupt copy found by the scrubber and rebuilt", func() (bool, string) {
		return c.rebuilt(bad, victim)
	})
	var reported []logEntry
	for _, e := range c.logEntries("coordinator", "corrupt copy reported by a node's scrubber") {
		if e.str("file") == victim.res.FileID {
			reported = append(reported, e)
		}
	}
	require.NotEmpty(t, reported, "the coordinator was not told")
	require.Equal(t, bad, reported[0].str("node"))
	require.Equal(t, "CORRUPT", reported[0].str("result"), "the coordinator's own check")
	require.Equal(t, true, reported[0]["quarantined"])

	ctx, cancel = callCtx()
	defer cancel()
	rep, err := c.api.Scrub(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Nodes, 3)
	byNode := map[string]client.NodeScrub{}
	for _, ns := range rep.Nodes {
		require.True(t, ns.Reachable, "%+v", ns)
		require.Equal(t, period.Seconds(), ns.PeriodSeconds)
		require.Equal(t, int64(scrub.DefaultBandwidth), ns.BandwidthBytesPerSecond)
		require.Equal(t, int64(n), ns.CopiesTotal)
		require.NotNil(t, ns.PeriodStart)
		byNode[ns.NodeID] = ns
	}
	require.GreaterOrEqual(t, byNode[bad].CorruptionsFoundTotal, int64(1))
	require.Zero(t, byNode[bad].UnreportedCorruptions)
	require.Zero(t, byNode[other].CorruptionsFoundTotal)
	require.NotNil(t, byNode[resumer].LastFullPassAt)

	// Every byte a node hashed went through its token bucket.
	s := c.scrubStatus(other)
	require.Positive(t, s.HashedBytes)
	require.GreaterOrEqual(t, s.ThrottledBytes, s.HashedBytes)
	resp, body := c.internal(http.MethodGet, bad, wire.PathMetrics)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.Contains(string(body), "\ndfs_node_scrub_corruptions_found_total 1\n"), "metrics:\n%s", body)
}
