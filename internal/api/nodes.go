package api

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

// nodeJSON is a storage node as the API shows it.
type nodeJSON struct {
	NodeID               string          `json:"nodeId"`
	Host                 string          `json:"host"`
	Port                 int             `json:"port"`
	Status               meta.NodeStatus `json:"status"`
	OnRing               bool            `json:"onRing"`
	KeyspaceSharePercent float64         `json:"keyspaceSharePercent"`
	RegisteredAt         time.Time       `json:"registeredAt"`
	LastCheckAt          *time.Time      `json:"lastCheckAt"`
	LastHealthyAt        *time.Time      `json:"lastHealthyAt"`
	ConsecutiveFailures  int             `json:"consecutiveFailures"`
	ConsecutiveSuccesses int             `json:"consecutiveSuccesses"`
	BlobCount            *int64          `json:"blobCount,omitempty"`
	BytesUsed            *int64          `json:"bytesUsed,omitempty"`
	FreeBytes            *int64          `json:"freeBytes,omitempty"`
	DiskID               string          `json:"diskId,omitempty"`
	// Drain is the node's drain while this coordinator runs it.
	Drain *ops.Operation `json:"drain,omitempty"`
}

// NodeStorage is what a node reports it stores.
type NodeStorage struct {
	BlobCount, BytesUsed, FreeBytes int64
}

// statsTimeout bounds how long a node listing waits for the nodes' figures.
const statsTimeout = time.Second

// withStorage fills in each node's storage figures, asking every node in
// parallel; a node that does not answer in time is shown without them.
func (s *server) withStorage(ctx context.Context, out []nodeJSON) {
	if s.NodeStats == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			st, err := s.NodeStats(ctx, out[i].NodeID)
			if err != nil {
				return
			}
			out[i].BlobCount, out[i].BytesUsed, out[i].FreeBytes = &st.BlobCount, &st.BytesUsed, &st.FreeBytes
		})
	}
	wg.Wait()
}

// withDrains adds the drains running now to the nodes that have one.
func (s *server) withDrains(out []nodeJSON) {
	if s.Operations == nil {
		return
	}
	for i := range out {
		if op, ok := s.Operations.RunningOn(ops.Drain, out[i].NodeID); ok {
			out[i].Drain = &op
		}
	}
}

func toNodeJSON(n meta.Node, shares map[string]float64) nodeJSON {
	return nodeJSON{
		NodeID: n.ID, Host: n.Host, Port: n.Port, Status: n.Status, OnRing: n.OnRing(),
		KeyspaceSharePercent: round2(shares[n.ID]), RegisteredAt: n.RegisteredAt,
		LastCheckAt: n.LastCheckAt, LastHealthyAt: n.LastHealthyAt,
		ConsecutiveFailures: n.ConsecutiveFailures, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
		DiskID: n.DiskID,
	}
}

func round2(v float64) float64 {
	return float64(int64(v*100+0.5)) / 100
}

type registerRequest struct {
	NodeID string `json:"nodeId"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	DiskID string `json:"diskId"`
}

func (s *server) register(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if err := decodeJSON(r, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	n, err := s.Members.Register(r.Context(), membership.Announcement{NodeID: req.NodeID, Host: req.Host, Port: req.Port, DiskID: req.DiskID})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toNodeJSON(n, s.Members.Ring().Shares()))
}

func (s *server) listNodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.Members.Nodes(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	shares := s.Members.Ring().Shares()
	out := make([]nodeJSON, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, toNodeJSON(n, shares))
	}
	s.withStorage(r.Context(), out)
	s.withDrains(out)
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *server) getNode(w http.ResponseWriter, r *http.Request) {
	n, err := s.Members.Node(r.Context(), chi.URLParam(r, "nodeId"))
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := []nodeJSON{toNodeJSON(n, s.Members.Ring().Shares())}
	s.withStorage(r.Context(), out)
	s.withDrains(out)
	httpx.WriteJSON(w, http.StatusOK, out[0])
}

type ringJSON struct {
	PhysicalNodes       int             `json:"physicalNodes"`
	VirtualNodesPerNode int             `json:"virtualNodesPerNode"`
	TotalRingPositions  int             `json:"totalRingPositions"`
	Nodes               []ringShareJSON `json:"nodes"`
	// Points, asked for with ?points=true, are the ring's virtual nodes in
	// ring order; each owns the arc from the point before it (exclusive) to
	// its own position (inclusive), the first one the arc wrapping past 0.
	Points []ringPointJSON `json:"points,omitempty"`
}

type ringPointJSON struct {
	NodeID   string `json:"nodeId"`
	Position int64  `json:"position"`
}

type ringShareJSON struct {
	NodeID               string  `json:"nodeId"`
	KeyspaceSharePercent float64 `json:"keyspaceSharePercent"`
}

func ringInfo(rg *ring.Ring) ringJSON {
	out := ringJSON{PhysicalNodes: len(rg.Nodes()), VirtualNodesPerNode: rg.VNodes(), TotalRingPositions: rg.Len(), Nodes: []ringShareJSON{}}
	for id, share := range rg.Shares() {
		out.Nodes = append(out.Nodes, ringShareJSON{NodeID: id, KeyspaceSharePercent: round2(share)})
	}
	slices.SortFunc(out.Nodes, func(a, b ringShareJSON) int {
		return cmp.Or(cmp.Compare(b.KeyspaceSharePercent, a.KeyspaceSharePercent), cmp.Compare(a.NodeID, b.NodeID))
	})
	return out
}

func (s *server) ringInfo(w http.ResponseWriter, r *http.Request) {
	points, err := boolParam(r, "points")
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	rg := s.Members.Ring()
	out := ringInfo(rg)
	if points {
		out.Points = make([]ringPointJSON, 0, rg.Len())
		for _, p := range rg.Points() {
			out.Points = append(out.Points, ringPointJSON{NodeID: p.Node, Position: p.Pos})
		}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

type deregisterJSON struct {
	Node  nodeJSON              `json:"node"`
	Drain rebalance.DrainReport `json:"drain"`
}

// boolParam reads an optional true/false query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	switch r.URL.Query().Get(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, errs.E(errs.Invalid, "%s must be true or false", name)
}

func (s *server) deregister(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "nodeId")
	var wait, dryRun, force bool
	var err error
	for _, p := range []struct {
		name string
		v    *bool
	}{{"wait", &wait}, {"dryRun", &dryRun}, {"force", &force}} {
		if *p.v, err = boolParam(r, p.name); err != nil {
			httpx.WriteError(w, r, err)
			return
		}
	}
	n, err := s.Members.Node(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	// A drain already under way is not judged again: the node left the
	// ring when it began.
	if dryRun || n.Status != meta.NodeDeregistered {
		plan, err := s.Rebalancer.PlanDrain(r.Context(), id)
		if err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		if dryRun {
			httpx.WriteJSON(w, http.StatusOK, plan)
			return
		}
		if refusal := plan.Refusal(); refusal != nil {
			if !force {
				httpx.WriteError(w, r, refusal)
				return
			}
			s.Logger.Warn("unsafe drain forced", "node", id, "reasons", plan.Reasons)
		}
	}
	n, err = s.Members.Deregister(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var rep rebalance.DrainReport
	status := http.StatusAccepted
	if wait {
		rep, err = s.Rebalancer.Drain(r.Context(), id)
		if err == nil && rep.Complete {
			status = http.StatusOK
		}
	} else {
		rep, err = s.Rebalancer.DrainProgress(r.Context(), id)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, status, deregisterJSON{Node: toNodeJSON(n, s.Members.Ring().Shares()), Drain: rep})
}

func (s *server) rejoin(w http.ResponseWriter, r *http.Request) {
	n, err := s.Members.Rejoin(r.Context(), chi.URLParam(r, "nodeId"))
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toNodeJSON(n, s.Members.Ring().Shares()))
}

func (s *server) clusterHealth(w http.ResponseWriter, r *http.Request) {
	rep := s.Health.Cluster(r.Context())
	status := http.StatusOK
	if rep.Status == HealthDown {
		status = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, status, rep)
}

func (s *server) rebalance(w http.ResponseWriter, r *http.Request) {
	// A manual rebalance belongs to the cluster, not to the client's connection.
	rep, err := s.Rebalancer.Run(context.WithoutCancel(r.Context()), rebalance.Manual, "")
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
}

func (s *server) healthCheck(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.Members.Sweep(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"checkedAt": time.Now().UTC(), "nodes": nodes})
}
