package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
)

// placementMembers records the placement edits it is given and applies them
// to its node.
type placementMembers struct {
	fakeMembers
	edits *[]membership.PlacementEdit
}

func (f placementMembers) SetPlacement(_ context.Context, id string, e membership.PlacementEdit) (meta.Node, error) {
	*f.edits = append(*f.edits, e)
	n, err := f.Node(context.Background(), id)
	if err != nil {
		return meta.Node{}, err
	}
	n.ZoneOverride, n.WeightOverride = e.Zone, e.Weight
	return n, nil
}

func zonedNodes() []meta.Node {
	at := time.Date(2026, 11, 29, 10, 15, 31, 0, time.UTC)
	return []meta.Node{
		{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeHealthy, RegisteredAt: at, Zone: "z1"},
		{ID: "node-2", Host: "127.0.0.1", Port: 9002, Status: meta.NodeHealthy, RegisteredAt: at, Zone: "z1", Weight: 2},
		{ID: "node-3", Host: "127.0.0.1", Port: 9003, Status: meta.NodeHealthy, RegisteredAt: at, Zone: "z2"},
		{ID: "node-4", Host: "127.0.0.1", Port: 9004, Status: meta.NodeHealthy, RegisteredAt: at},
	}
}

func TestRingInfoShowsZonesWeightsAndPoints(t *testing.T) {
	h := api.New(api.Options{Members: fakeMembers{nodes: zonedNodes()}})
	req := httptest.NewRequest(http.MethodGet, "/api/nodes/ring", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	openapitest.ValidateRecorder(t, req, w)
	var info apiwire.RingInfo
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &info))
	require.Equal(t, 500, info.TotalRingPositions)
	byID := map[string]apiwire.RingShare{}
	var sum float64
	for _, n := range info.Nodes {
		byID[n.NodeID] = n
		sum += n.KeyspaceSharePercent
	}
	require.InDelta(t, 100, sum, 0.05)
	require.Equal(t, apiwire.RingShare{NodeID: "node-2", KeyspaceSharePercent: byID["node-2"].KeyspaceSharePercent, Zone: "z1", Weight: 2, Points: 200}, byID["node-2"])
	require.Equal(t, "", byID["node-4"].Zone)
	require.Equal(t, 100, byID["node-4"].Points)
	require.Len(t, info.Zones, 2, "z1 and z2; node-4 has no zone")
	zones := map[string]apiwire.ZoneShare{}
	for _, z := range info.Zones {
		zones[z.Zone] = z
	}
	require.Equal(t, 2, zones["z1"].Nodes)
	require.InDelta(t, byID["node-1"].KeyspaceSharePercent+byID["node-2"].KeyspaceSharePercent, zones["z1"].KeyspaceSharePercent, 0.02)
	require.GreaterOrEqual(t, info.Zones[0].KeyspaceSharePercent, info.Zones[1].KeyspaceSharePercent, "largest first")

	// A node listing shows the same.
	req = httptest.NewRequest(http.MethodGet, "/api/nodes/node-2", nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	openapitest.ValidateRecorder(t, req, w)
	var n apiwire.Node
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &n))
	require.Equal(t, "z1", n.Zone)
	require.Equal(t, 2.0, n.Weight)
	require.Equal(t, 200, n.Points)
	require.Empty(t, n.Overridden)
}

func TestPlacementEndpoint(t *testing.T) {
	var edits []membership.PlacementEdit
	h := api.New(api.Options{Members: placementMembers{fakeMembers{nodes: zonedNodes()}, &edits}})
	put := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPut, "/api/nodes/node-4/placement", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		openapitest.ValidateRecorder(t, req, w)
		return w
	}
	w := put(`{"zone":"rack-7","weight":2.5}`)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var n apiwire.Node
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &n))
	require.Equal(t, "rack-7", n.Zone)
	require.Equal(t, 2.5, n.Weight)
	require.Equal(t, []string{"zone", "weight"}, n.Overridden)
	require.Len(t, edits, 1)
	require.Equal(t, "rack-7", *edits[0].Zone)

	require.Equal(t, http.StatusOK, put(`{"reset":["zone","weight"]}`).Code)
	require.Equal(t, membership.PlacementEdit{ResetZone: true, ResetWeight: true}, edits[1])

	for _, bad := range []string{`{}`, `{"reset":["rack"]}`, `not json`} {
		w := put(bad)
		require.Equal(t, http.StatusBadRequest, w.Code, "%s: %s", bad, w.Body)
	}
	require.Len(t, edits, 2, "a bad request changes nothing")
}
