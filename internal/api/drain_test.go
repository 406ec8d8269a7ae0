package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
	"github.com/dfs-project/dfs/internal/rebalance"
)

// drainMembers records deregistrations.
type drainMembers struct {
	fakeMembers
	deregistered []string
}

func (f *drainMembers) Deregister(_ context.Context, id string) (meta.Node, error) {
	f.deregistered = append(f.deregistered, id)
	n, err := f.Node(context.Background(), id)
	n.Status = meta.NodeDeregistered
	return n, err
}

// drainRebalancer answers a fixed plan and records what it was asked.
type drainRebalancer struct {
	fakeRebalancer
	plan    rebalance.DrainPlan
	planned []string
}

func (f *drainRebalancer) PlanDrain(_ context.Context, node string) (rebalance.DrainPlan, error) {
	f.planned = append(f.planned, node)
	p := f.plan
	p.Node = node
	return p, nil
}

func (f *drainRebalancer) DrainProgress(_ context.Context, node string) (rebalance.DrainReport, error) {
	return rebalance.DrainReport{Node: node, FilesRemaining: 1}, nil
}

func unsafePlan() rebalance.DrainPlan {
	return rebalance.DrainPlan{Reasons: []string{"only 1 node(s) would remain on the ring, fewer than the replication factor 3",
		"node node-3 would receive 10 bytes (1 files) but reports only 4 bytes free"},
		Targets: []rebalance.DrainTarget{}, SoleCopies: []string{}, RemainingNodes: 1, ReplicationFactor: 3}
}

func safePlan() rebalance.DrainPlan {
	free := int64(1 << 30)
	return rebalance.DrainPlan{Safe: true, Reasons: []string{}, Files: 1, Bytes: 10, FilesOnNode: 1, BytesOnNode: 10,
		Targets: []rebalance.DrainTarget{{NodeID: "node-3", Files: 1, Bytes: 10, FreeBytes: &free}}, SoleCopies: []string{},
		RemainingNodes: 3, ReplicationFactor: 3}
}

func TestDrainIsRefusedUnlessSafeOrForced(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 15, 31, 0, time.UTC)
	nodes := []meta.Node{
		{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeHealthy, RegisteredAt: at},
		{ID: "node-2", Host: "127.0.0.1", Port: 9002, Status: meta.NodeDeregistered, RegisteredAt: at},
	}
	tests := []struct {
		name, target string
		plan         rebalance.DrainPlan
		status       int
		code         string
		planned      []string
		deregistered []string
	}{
		{"dry run of a safe drain", "/api/nodes/node-1?dryRun=true", safePlan(), 200, "", []string{"node-1"}, nil},
		{"dry run of an unsafe drain", "/api/nodes/node-1?dryRun=true", unsafePlan(), 200, "", []string{"node-1"}, nil},
		{"dry run wins over force", "/api/nodes/node-1?dryRun=true&force=true", unsafePlan(), 200, "", []string{"node-1"}, nil},
		{"safe drain", "/api/nodes/node-1", safePlan(), 202, "", []string{"node-1"}, []string{"node-1"}},
		{"unsafe drain refused", "/api/nodes/node-1", unsafePlan(), 409, "UNSAFE_DRAIN", []string{"node-1"}, nil},
		{"unsafe drain refused even to wait", "/api/nodes/node-1?wait=true", unsafePlan(), 409, "UNSAFE_DRAIN", []string{"node-1"}, nil},
		{"unsafe drain forced", "/api/nodes/node-1?force=true", unsafePlan(), 202, "", []string{"node-1"}, []string{"node-1"}},
		{"a drain under way is not judged again", "/api/nodes/node-2", unsafePlan(), 202, "", nil, []string{"node-2"}},
		{"dry run of an unknown node", "/api/nodes/node-9?dryRun=true", safePlan(), 404, "NODE_NOT_FOUND", nil, nil},
		{"bad dryRun", "/api/nodes/node-1?dryRun=yes", safePlan(), 400, "INVALID_REQUEST", nil, nil},
		{"bad force", "/api/nodes/node-1?force=1", unsafePlan(), 400, "INVALID_REQUEST", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &drainMembers{fakeMembers: fakeMembers{nodes: nodes}}
			rb := &drainRebalancer{plan: tc.plan}
			h := api.New(api.Options{Members: m, Rebalancer: rb})
			req := httptest.NewRequest(http.MethodDelete, tc.target, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, tc.status, w.Code, "body: %s", w.Body)
			openapitest.ValidateRecorder(t, req, w)
			require.Equal(t, tc.planned, rb.planned)
			require.Equal(t, tc.deregistered, m.deregistered, "who was deregistered")
			if tc.code != "" {
				var e struct{ Error, Message string }
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &e))
				require.Equal(t, tc.code, e.Error)
				if tc.code == "UNSAFE_DRAIN" {
					for _, r := range tc.plan.Reasons {
						require.Contains(t, e.Message, r)
					}
				}
			}
			if tc.status == 200 {
				var p rebalance.DrainPlan
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
				require.Equal(t, tc.plan.Safe, p.Safe)
				require.Equal(t, tc.plan.Reasons, p.Reasons)
			}
		})
	}
}
