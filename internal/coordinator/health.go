package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// health computes the coordinator's readiness and the cluster's health.
type health struct {
	store     meta.Store
	storeKind string
	ring      func() *ring.Ring
	rf        int
	redisPing func(ctx context.Context) error // nil when Redis is not configured
	// zones returns the last count of what a zone's failure would do, ok
	// false when there is none recent enough; nil reports no zone reason.
	zones func() (z meta.ZoneDurability, ok bool)
}

var _ api.Health = (*health)(nil)

// Ready is the process and the metadata store; Redis never decides it.
func (h *health) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return h.store.Ping(ctx)
}

// Cluster is UP when the metadata store is up and every ring node is healthy
// with at least RF of them; DEGRADED when a node is down, fewer than RF nodes
// are on the ring, a configured Redis is unreachable or the last zone count
// (at most zoneCountFresh old) found files whose copies share a zone when
// they need not; DOWN when no node is on the ring or the metadata store is
// down.
func (h *health) Cluster(ctx context.Context) api.HealthReport {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rep := api.HealthReport{Status: api.HealthUp, ReplicationFactor: h.rf,
		MetadataStore: api.ComponentState{Status: "UP", Kind: h.storeKind},
		Redis:         api.ComponentState{Status: "DISABLED"}}
	degrade := func(why string) {
		if rep.Status == api.HealthUp {
			rep.Status = api.HealthDegraded
		}
		rep.Reasons = append(rep.Reasons, why)
	}
	down := func(why string) {
		rep.Status = api.HealthDown
		rep.Reasons = append(rep.Reasons, why)
	}
	if h.redisPing != nil {
		if err := h.redisPing(ctx); err != nil {
			rep.Redis = api.ComponentState{Status: "DOWN", Error: err.Error()}
			degrade("redis is unreachable")
		} else {
			rep.Redis = api.ComponentState{Status: "UP"}
		}
	}
	nodes, err := h.store.ListNodes(ctx)
	if err != nil {
		rep.MetadataStore = api.ComponentState{Status: "DOWN", Kind: h.storeKind, Error: err.Error()}
		down("metadata store is unavailable")
		return rep
	}
	rg := h.ring()
	for _, n := range nodes {
		rep.Nodes.Total++
		switch n.Status {
		case meta.NodeHealthy:
			rep.Nodes.Healthy++
		case meta.NodeUnhealthy:
			rep.Nodes.Unhealthy++
		case meta.NodeDeregistered:
			rep.Nodes.Deregistered++
		}
		if rg.Has(n.ID) {
			rep.Nodes.OnRing++
		}
	}
	switch {
	case rep.Nodes.OnRing == 0:
		down("no storage node is on the ring")
	case rep.Nodes.OnRing < h.rf:
		degrade(fmt.Sprintf("%d node(s) on the ring, fewer than the replication factor %d", rep.Nodes.OnRing, h.rf))
	}
	if rep.Nodes.Unhealthy > 0 {
		degrade(fmt.Sprintf("%d node(s) unhealthy", rep.Nodes.Unhealthy))
	}
	if h.zones != nil {
		if z, ok := h.zones(); ok && z.Collapsed > 0 {
			degrade(fmt.Sprintf("%d file(s) keep two copies in one zone while another zone has a healthy node", z.Collapsed))
		}
	}
	return rep
}
