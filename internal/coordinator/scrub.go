package coordinator

import (
	"context"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// scrubView gathers the storage nodes' scrubber progress and hands the
// corrupt copies they report to the file service.
type scrubView struct {
	nodes  func(ctx context.Context) ([]meta.Node, error)
	addr   func(id string) (string, bool)
	status func(ctx context.Context, base string) (wire.ScrubStatus, error)
	files  *files.Service
}

var _ api.Scrub = (*scrubView)(nil)

// scrubTimeout bounds how long the report waits for the nodes.
const scrubTimeout = 2 * time.Second

// Scrub asks every node not deregistered for its scrubber's progress, in
// parallel; a node that does not answer in time is shown unreachable.
func (v *scrubView) Scrub(ctx context.Context) (api.ScrubReport, error) {
	nodes, err := v.nodes(ctx)
	if err != nil {
		return api.ScrubReport{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, scrubTimeout)
	defer cancel()
	out := api.ScrubReport{Nodes: make([]api.NodeScrub, 0, len(nodes))}
	for _, n := range nodes { // ListNodes orders by id
		if n.Status != meta.NodeDeregistered {
			out.Nodes = append(out.Nodes, api.NodeScrub{NodeID: n.ID, Status: string(n.Status)})
		}
	}
	var wg sync.WaitGroup
	for i := range out.Nodes {
		wg.Go(func() { v.fill(ctx, &out.Nodes[i]) })
	}
	wg.Wait()
	return out, nil
}

func (v *scrubView) fill(ctx context.Context, n *api.NodeScrub) {
	base, ok := v.addr(n.NodeID)
	if !ok {
		n.Error = "node has no known address"
		return
	}
	st, err := v.status(ctx, base)
	if err != nil {
		n.Error = err.Error()
		return
	}
	n.Reachable, n.ScrubProgress, n.LastPass = true, st.ScrubProgress, st.LastPass
}

// ReportCorrupt is a node's scrubber reporting a corrupt copy.
func (v *scrubView) ReportCorrupt(ctx context.Context, id, node string) (files.CorruptReportResult, error) {
	return v.files.ReportCorrupt(ctx, id, node)
}
