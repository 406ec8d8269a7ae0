package api

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

// NodeStorage is what a node reports it stores.
type NodeStorage struct {
	BlobCount, BytesUsed, FreeBytes int64
}

// statsTimeout bounds how long a node listing waits for the nodes' figures.
const statsTimeout = time.Second

// withStorage fills in each node's storage figures, asking every node in
// parallel; a node that does not answer in time is shown without them.
func (s *server) withStorage(ctx context.Context, out []apiwire.Node) {
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
func (s *server) withDrains(out []apiwire.Node) {
	if s.Operations == nil {
		return
	}
	for i := range out {
		if op, ok := s.Operations.RunningOn(ops.Drain, out[i].NodeID); ok {
			out[i].Drain = &op
		}
	}
}

// ringView is a ring snapshot with its shares worked out once, for answers
// that show many nodes.
type ringView struct {
	rg     *ring.Ring
	shares map[string]float64
}

func viewOf(rg *ring.Ring) ringView { return ringView{rg, rg.Shares()} }

func toNodeJSON(n meta.Node, v ringView) apiwire.Node {
	out := apiwire.Node{
		NodeID: n.ID, Host: n.Host, Port: n.Port, Status: apiwire.NodeStatus(n.Status), OnRing: n.OnRing(),
		KeyspaceSharePercent: round2(v.shares[n.ID]), RegisteredAt: n.RegisteredAt,
		LastCheckAt: n.LastCheckAt, LastHealthyAt: n.LastHealthyAt,
		ConsecutiveFailures: n.ConsecutiveFailures, ConsecutiveSuccesses: n.ConsecutiveSuccesses,
		DiskID: n.DiskID,
		Zone:   n.PlacementZone(), Weight: n.PlacementWeight(), Points: v.rg.PointsOf(n.ID),
		ReportedZone: n.Zone, ReportedWeight: cmp.Or(n.Weight, 1),
	}
	if n.ZoneOverride != nil {
		out.Overridden = append(out.Overridden, "zone")
	}
	if n.WeightOverride != nil {
		out.Overridden = append(out.Overridden, "weight")
	}
	return out
}

// setPlacement applies an operator's zone and weight for a node.
func (s *server) setPlacement(w http.ResponseWriter, r *http.Request) {
	var req apiwire.PlacementRequest
	if err := decodeJSON(r, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	e := membership.PlacementEdit{Zone: req.Zone, Weight: req.Weight}
	for _, f := range req.Reset {
		switch f {
		case "zone":
			e.ResetZone = true
		case "weight":
			e.ResetWeight = true
		default:
			httpx.WriteError(w, r, errs.E(errs.Invalid, "reset names %q: want zone or weight", f))
			return
		}
	}
	if e == (membership.PlacementEdit{}) {
		httpx.WriteError(w, r, errs.E(errs.Invalid, "give a zone, a weight or reset"))
		return
	}
	n, err := s.Members.SetPlacement(r.Context(), chi.URLParam(r, "nodeId"), e)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toNodeJSON(n, viewOf(s.Members.Ring())))
}

func round2(v float64) float64 {
	return float64(int64(v*100+0.5)) / 100
}

func (s *server) register(w http.ResponseWriter, r *http.Request) {
	var req apiwire.RegisterRequest
	if err := decodeJSON(r, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	n, err := s.Members.Register(r.Context(), membership.Announcement{NodeID: req.NodeID, Host: req.Host, Port: req.Port, DiskID: req.DiskID,
		Zone: req.Zone, Weight: req.Weight})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toNodeJSON(n, viewOf(s.Members.Ring())))
}

func (s *server) listNodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.Members.Nodes(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	v := viewOf(s.Members.Ring())
	out := make([]apiwire.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, toNodeJSON(n, v))
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
	out := []apiwire.Node{toNodeJSON(n, viewOf(s.Members.Ring()))}
	s.withStorage(r.Context(), out)
	s.withDrains(out)
	httpx.WriteJSON(w, http.StatusOK, out[0])
}

func ringInfo(rg *ring.Ring) apiwire.RingInfo {
	out := apiwire.RingInfo{PhysicalNodes: len(rg.Nodes()), VirtualNodesPerNode: rg.VNodes(), TotalRingPositions: rg.Len(), Nodes: []apiwire.RingShare{}}
	zones := map[string]*apiwire.ZoneShare{}
	for id, share := range rg.Shares() {
		m, _ := rg.Member(id)
		out.Nodes = append(out.Nodes, apiwire.RingShare{NodeID: id, KeyspaceSharePercent: round2(share), Zone: m.Zone, Weight: m.Weight, Points: rg.PointsOf(id)})
		if m.Zone == "" {
			continue
		}
		z := zones[m.Zone]
		if z == nil {
			z = &apiwire.ZoneShare{Zone: m.Zone}
			zones[m.Zone] = z
		}
		z.KeyspaceSharePercent += share
		z.Nodes++
	}
	slices.SortFunc(out.Nodes, func(a, b apiwire.RingShare) int {
		return cmp.Or(cmp.Compare(b.KeyspaceSharePercent, a.KeyspaceSharePercent), cmp.Compare(a.NodeID, b.NodeID))
	})
	for _, z := range zones {
		z.KeyspaceSharePercent = round2(z.KeyspaceSharePercent)
		out.Zones = append(out.Zones, *z)
	}
	slices.SortFunc(out.Zones, func(a, b apiwire.ZoneShare) int {
		return cmp.Or(cmp.Compare(b.KeyspaceSharePercent, a.KeyspaceSharePercent), cmp.Compare(a.Zone, b.Zone))
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
		out.Points = make([]apiwire.RingPoint, 0, rg.Len())
		for _, p := range rg.Points() {
			out.Points = append(out.Points, apiwire.RingPoint{NodeID: p.Node, Position: p.Pos})
		}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
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
		if refusal := rebalance.Refusal(plan); refusal != nil {
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
	httpx.WriteJSON(w, status, apiwire.DeregisterResult{Node: toNodeJSON(n, viewOf(s.Members.Ring())), Drain: rep})
}

func (s *server) rejoin(w http.ResponseWriter, r *http.Request) {
	n, err := s.Members.Rejoin(r.Context(), chi.URLParam(r, "nodeId"))
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toNodeJSON(n, viewOf(s.Members.Ring())))
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
