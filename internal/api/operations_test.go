package api_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

func getJSON(t *testing.T, h http.Handler, target string, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	require.Equal(t, http.StatusOK, rec.Code, "body: %s", rec.Body)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), v))
}

// The operations route lists what the tracker holds, and a node being
// drained shows its drain.
func TestOperationsAndARunningDrainAreShown(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tracker := ops.New(ops.Options{})
	drain := tracker.Start(ops.Drain, "DEREGISTERED", "node-2", 5)
	drain.Add(2, 300)
	tracker.Start(ops.Rebalance, "JOINED", "node-1", 1).Finish(true, map[string]bool{"complete": true})
	h := api.New(api.Options{
		Members: fakeMembers{nodes: []meta.Node{
			{ID: "node-1", Status: meta.NodeHealthy, RegisteredAt: at},
			{ID: "node-2", Status: meta.NodeDeregistered, RegisteredAt: at},
		}},
		Operations: tracker,
	})

	var snap ops.Snapshot
	getJSON(t, h, "/api/cluster/operations", &snap)
	require.Len(t, snap.Running, 1)
	require.Equal(t, ops.Drain, snap.Running[0].Kind)
	require.EqualValues(t, 2, snap.Running[0].Done)
	require.Len(t, snap.Recent, 1)
	require.Equal(t, ops.Rebalance, snap.Recent[0].Kind)
	require.Equal(t, ops.Done, snap.Recent[0].State)

	var node struct {
		NodeID string         `json:"nodeId"`
		Drain  *ops.Operation `json:"drain"`
	}
	getJSON(t, h, "/api/nodes/node-2", &node)
	require.NotNil(t, node.Drain, "node-2 is being drained")
	require.EqualValues(t, 5, node.Drain.Total)
	require.EqualValues(t, 300, node.Drain.BytesDone)
	node.Drain = nil
	getJSON(t, h, "/api/nodes/node-1", &node)
	require.Nil(t, node.Drain, "node-1 is not being drained")

	drain.Finish(true, nil)
	getJSON(t, h, "/api/nodes/node-2", &node)
	require.Nil(t, node.Drain, "the drain has ended")

	// Without a tracker the lists are empty, not null.
	rec := httptest.NewRecorder()
	api.New(api.Options{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/cluster/operations", nil))
	require.JSONEq(t, `{"running":[],"recent":[]}`, rec.Body.String())
}

type fakeScrub struct {
	rep api.ScrubReport
	err error
}

func (f fakeScrub) Scrub(context.Context) (api.ScrubReport, error) { return f.rep, f.err }

func (fakeScrub) ReportCorrupt(context.Context, string, string) (files.CorruptReportResult, error) {
	return files.CorruptReportResult{}, nil
}

// Each reachable node's running scrub pass and its last complete one are
// listed among the operations, in order with the tracker's; an unreachable
// node lists none.
func TestScrubPassesAreListedAsOperations(t *testing.T) {
	now := time.Now().UTC()
	t0 := now.Add(-time.Hour)
	periodStart := now.Add(-10 * time.Second)
	lastStart, lastEnd := now.Add(-3*time.Hour), now.Add(-2*time.Hour)
	tracker := ops.New(ops.Options{})
	tracker.Start(ops.Rebalance, "JOINED", "node-1", 1).Finish(true, nil) // finished now: newest
	rep := api.ScrubReport{Nodes: []api.NodeScrub{
		{NodeID: "node-1", Status: "HEALTHY", Reachable: true, ScrubProgress: wire.ScrubProgress{
			PeriodStart: &periodStart, CopiesScrubbed: 25, CopiesTotal: 100, BytesScrubbed: 1000, BytesTotal: 4000,
			CorruptionsFound: 2, Running: true, Behind: true, LastFullPassAt: &lastEnd,
		}, LastPass: &wire.ScrubPass{StartedAt: lastStart, FinishedAt: lastEnd, Copies: 90, Bytes: 3600, CorruptionsFound: 1}},
		{NodeID: "node-2", Status: "HEALTHY", Reachable: true, ScrubProgress: wire.ScrubProgress{
			PeriodStart: &t0, CopiesScrubbed: 7, CopiesTotal: 7, BytesScrubbed: 70, BytesTotal: 70, LastFullPassAt: &now,
		}, LastPass: &wire.ScrubPass{StartedAt: t0, FinishedAt: t0.Add(time.Minute), Copies: 7, Bytes: 70}},
		{NodeID: "node-3", Status: "UNHEALTHY", Error: "connection refused"},
	}}
	h := api.New(api.Options{Operations: tracker, Scrub: fakeScrub{rep: rep}})

	var snap struct {
		Running []ops.Operation `json:"running"`
		Recent  []struct {
			ops.Operation
			Report api.ScrubPassReport `json:"report"`
		} `json:"recent"`
	}
	getJSON(t, h, "/api/cluster/operations", &snap)
	require.Len(t, snap.Running, 1, "node-2's pass is complete, node-3 did not answer")
	run := snap.Running[0]
	require.Equal(t, ops.Scrub, run.Kind)
	require.Equal(t, api.ScrubTrigger, run.Trigger)
	require.Equal(t, "node-1", run.NodeID)
	require.Equal(t, ops.Running, run.State)
	require.EqualValues(t, 25, run.Done)
	require.EqualValues(t, 100, run.Total)
	require.EqualValues(t, 1000, run.BytesDone)
	require.NotNil(t, run.EtaSeconds)
	require.InDelta(t, 30, *run.EtaSeconds, 5, "three quarters left after 10 s")
	require.Nil(t, run.FinishedAt)
	require.JSONEq(t, `{"copiesScrubbed":25,"bytesScrubbed":1000,"corruptionsFound":2,"behind":true}`, mustJSON(t, run.Report))

	require.Len(t, snap.Recent, 3)
	require.Equal(t, ops.Rebalance, snap.Recent[0].Kind, "newest first")
	n2, n1 := snap.Recent[1], snap.Recent[2]
	require.Equal(t, "node-2", n2.NodeID)
	require.Equal(t, "node-1", n1.NodeID)
	require.Equal(t, ops.Scrub, n1.Kind)
	require.Equal(t, ops.Done, n1.State)
	require.EqualValues(t, 90, n1.Done)
	require.EqualValues(t, 90, n1.Total)
	require.EqualValues(t, 3600, n1.BytesDone)
	require.InDelta(t, 1.0, n1.BytesPerSecond, 0.01, "3600 bytes in an hour")
	require.Nil(t, n1.EtaSeconds)
	require.True(t, lastStart.Equal(n1.StartedAt))
	require.True(t, lastEnd.Equal(*n1.FinishedAt))
	require.Equal(t, api.ScrubPassReport{CopiesScrubbed: 90, BytesScrubbed: 3600, CorruptionsFound: 1}, n1.Report)
	require.NotEqual(t, run.ID, n1.ID, "two passes of one node")

	var again ops.Snapshot
	getJSON(t, h, "/api/cluster/operations", &again)
	require.Equal(t, run.ID, again.Running[0].ID, "a pass keeps its id")

	// The metadata store being down is the answer's error.
	h = api.New(api.Options{Operations: tracker, Scrub: fakeScrub{err: errs.E(errs.Unavailable, "metadata store down")}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/cluster/operations", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, rec.Body.String())
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// ?points=true lists every virtual node in ring order, each node's share of
// them being its virtual nodes.
func TestRingPointsAreListedInRingOrder(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := api.New(api.Options{Members: fakeMembers{nodes: []meta.Node{
		{ID: "node-1", Status: meta.NodeHealthy, RegisteredAt: at},
		{ID: "node-2", Status: meta.NodeHealthy, RegisteredAt: at},
	}}})
	type point struct {
		NodeID   string `json:"nodeId"`
		Position int64  `json:"position"`
	}
	var r struct {
		TotalRingPositions int     `json:"totalRingPositions"`
		Points             []point `json:"points"`
	}
	getJSON(t, h, "/api/nodes/ring", &r)
	require.Nil(t, r.Points, "points only when asked for")
	getJSON(t, h, "/api/nodes/ring?points=true", &r)
	require.Len(t, r.Points, r.TotalRingPositions)
	require.True(t, slices.IsSortedFunc(r.Points, func(a, b point) int { return cmp.Compare(a.Position, b.Position) }))
	per := map[string]int{}
	for _, p := range r.Points {
		per[p.NodeID]++
	}
	require.Equal(t, map[string]int{"node-1": 100, "node-2": 100}, per)
	require.Contains(t, r.Points, point{"node-1", 6903187661124769136}, "the placement test vector: node-1#0")
}

// The console is served by the API's own router, behind its middleware (the
// request id shows it ran), so whatever guards the API guards the console.
func TestTheConsoleIsOnTheAPIRouter(t *testing.T) {
	h := api.New(api.Options{})
	for _, tc := range []struct {
		target string
		status int
	}{
		{"/console/", http.StatusOK},
		{"/console/console.js", http.StatusOK},
		{"/console", http.StatusMovedPermanently},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
		require.Equal(t, tc.status, rec.Code, tc.target)
		require.NotEmpty(t, rec.Header().Get("X-Request-Id"), "the router's middleware ran for %s", tc.target)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/console/", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}
