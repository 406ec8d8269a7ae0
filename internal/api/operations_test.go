package api_test

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ops"
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
	require.Contains(t, r.Points, point{"node-1", 6903187661124769136}, "CONTRACT.md's vector: node-1#0")
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
