package coordinator

import (
	"context"
	"strconv"
	"time"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/meta"
)

// durability reports how safe the files are now, from the metadata store:
// the nodes' statuses there say which copies are healthy, so every
// coordinator sharing the store gives the same answer.
type durability struct {
	store meta.Store
	rf    int
}

var _ api.Durability = (*durability)(nil)

// durabilityTimeout bounds one report, as the health report is bounded.
const durabilityTimeout = 5 * time.Second

// current asks the store about the nodes that are HEALTHY now and returns
// its answer with every known node and the number of healthy ones.
func (d *durability) current(ctx context.Context) (meta.Durability, []meta.Node, int, error) {
	ctx, cancel := context.WithTimeout(ctx, durabilityTimeout)
	defer cancel()
	nodes, err := d.store.ListNodes(ctx)
	if err != nil {
		return meta.Durability{}, nil, 0, err
	}
	var healthy []string
	for _, n := range nodes {
		if n.Status == meta.NodeHealthy {
			healthy = append(healthy, n.ID)
		}
	}
	got, err := d.store.Durability(ctx, healthy)
	return got, nodes, len(healthy), err
}

// Sample is the report as the metrics see it: the store's answer and the
// failure headroom.
func (d *durability) Sample(ctx context.Context) (meta.Durability, int, error) {
	got, _, healthy, err := d.current(ctx)
	if err != nil {
		return meta.Durability{}, 0, err
	}
	return got, got.FailureHeadroom(healthy, d.rf), nil
}

// Durability answers GET /api/cluster/durability.
func (d *durability) Durability(ctx context.Context) (api.DurabilityReport, error) {
	got, nodes, healthy, err := d.current(ctx)
	if err != nil {
		return api.DurabilityReport{}, err
	}
	rep := api.DurabilityReport{
		FilesByCopies:     map[string]int{},
		Files:             got.Files(),
		BytesAtRisk:       got.BytesAtRisk,
		FailureHeadroom:   got.FailureHeadroom(healthy, d.rf),
		ReplicationFactor: d.rf,
		HealthyNodes:      healthy,
		Nodes:             make([]api.NodeRisk, 0, len(nodes)),
	}
	for c := 0; c <= d.rf; c++ {
		rep.FilesByCopies[strconv.Itoa(c)] = 0
	}
	for c, n := range got.FilesByCopies {
		rep.FilesByCopies[strconv.Itoa(c)] = n
	}
	risk := make(map[string]meta.NodeDurability, len(got.Nodes))
	for _, n := range got.Nodes {
		risk[n.NodeID] = n
	}
	for _, n := range nodes { // ListNodes orders by ID
		r := risk[n.ID]
		rep.Nodes = append(rep.Nodes, api.NodeRisk{NodeID: n.ID, Status: string(n.Status),
			FilesLeftWithOneCopy: r.FilesLeftWithOneCopy, FilesLeftWithNoCopy: r.FilesLeftWithNoCopy})
	}
	return rep, nil
}
