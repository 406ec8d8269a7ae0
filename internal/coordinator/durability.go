package coordinator

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
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
	log   *slog.Logger
	// bg bounds the counts the health check starts in the background (the
	// coordinator's lifetime); nil is context.Background.
	bg context.Context

	// mu guards the last zone count, which the cluster health reads
	// (lastZones) without counting itself.
	mu         sync.Mutex
	zones      meta.ZoneDurability
	zonesAt    time.Time // zero: no count yet
	refreshing bool
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

// currentZones asks the store what a whole zone's failure would do now,
// over the nodes that are HEALTHY, each in its placement zone, and keeps
// the answer for lastZones.
func (d *durability) currentZones(ctx context.Context) (meta.ZoneDurability, error) {
	ctx, cancel := context.WithTimeout(ctx, durabilityTimeout)
	defer cancel()
	nodes, err := d.store.ListNodes(ctx)
	if err != nil {
		return meta.ZoneDurability{}, err
	}
	return d.zonesOf(ctx, nodes, nil)
}

// zonesOf is currentZones over nodes, a listing the caller has. When no
// healthy node has a zone, each is a zone of its own and the answer is
// Durability's (known, when the caller has it over the same nodes, or
// counted): the zone count reads every healthy copy, the node count only
// the files at risk.
func (d *durability) zonesOf(ctx context.Context, nodes []meta.Node, known *meta.Durability) (meta.ZoneDurability, error) {
	ctx, cancel := context.WithTimeout(ctx, durabilityTimeout)
	defer cancel()
	var err error
	healthy := map[string]string{}
	var ids []string
	zoned := false
	for _, n := range nodes {
		if n.Status == meta.NodeHealthy {
			healthy[n.ID] = n.PlacementZone()
			ids = append(ids, n.ID)
			zoned = zoned || n.PlacementZone() != ""
		}
	}
	var z meta.ZoneDurability
	switch {
	case zoned:
		z, err = d.store.ZoneDurability(ctx, healthy)
	case known != nil:
		z = known.AsZones()
	default:
		var got meta.Durability
		got, err = d.store.Durability(ctx, ids)
		z = got.AsZones()
	}
	if err != nil {
		return meta.ZoneDurability{}, err
	}
	d.mu.Lock()
	d.zones, d.zonesAt = z, time.Now()
	d.mu.Unlock()
	return z, nil
}

// zoneCountFresh is how old a zone count the cluster health still reports
// from; zoneCountRefresh is the age at which it asks for a new one.
const (
	zoneCountFresh   = 2 * time.Minute
	zoneCountRefresh = 30 * time.Second
)

// lastZones returns the last zone count if it is at most zoneCountFresh
// old (ok false otherwise), and starts a count in the background when it
// is older than zoneCountRefresh, so that the health check, asked often,
// never waits for one.
func (d *durability) lastZones() (z meta.ZoneDurability, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	age := time.Since(d.zonesAt)
	if (d.zonesAt.IsZero() || age > zoneCountRefresh) && !d.refreshing {
		d.refreshing = true
		bg := d.bg
		if bg == nil {
			bg = context.Background()
		}
		go func() {
			_, err := d.currentZones(bg)
			if err != nil && bg.Err() == nil && d.log != nil {
				d.log.Warn("zone durability count failed", "err", err)
			}
			d.mu.Lock()
			d.refreshing = false
			d.mu.Unlock()
		}()
	}
	if d.zonesAt.IsZero() || age > zoneCountFresh {
		return meta.ZoneDurability{}, false
	}
	return d.zones, true
}

// ZoneSample is the zone report as the metrics see it: the store's answer
// and the zone failure headroom. It reuses a count at most
// zoneCountRefresh old, as the health check does: on a zoned cluster the
// count reads every healthy copy (PERFORMANCE.md), so scrapes and health
// checks share one count per zoneCountRefresh at most.
func (d *durability) ZoneSample(ctx context.Context) (meta.ZoneDurability, int, error) {
	d.mu.Lock()
	z, at := d.zones, d.zonesAt
	d.mu.Unlock()
	if at.IsZero() || time.Since(at) > zoneCountRefresh {
		var err error
		if z, err = d.currentZones(ctx); err != nil {
			return meta.ZoneDurability{}, 0, err
		}
	}
	return z, z.FailureHeadroom(d.rf), nil
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
	zones, err := d.zonesOf(ctx, nodes, &got)
	if err != nil {
		return api.DurabilityReport{}, err
	}
	rep := api.DurabilityReport{
		FilesByCopies:       map[string]int{},
		Files:               got.Files(),
		BytesAtRisk:         got.BytesAtRisk,
		FailureHeadroom:     got.FailureHeadroom(healthy, d.rf),
		ReplicationFactor:   d.rf,
		HealthyNodes:        healthy,
		Nodes:               make([]api.NodeRisk, 0, len(nodes)),
		ZoneFailureHeadroom: zones.FailureHeadroom(d.rf),
		FilesZoneCollapsed:  zones.Collapsed,
		Zones:               make([]api.ZoneRisk, 0, len(zones.Zones)),
	}
	for _, z := range zones.Zones {
		rep.Zones = append(rep.Zones, api.ZoneRisk{Zone: z.Zone, Nodes: z.Nodes,
			FilesLeftWithOneCopy: z.FilesLeftWithOneCopy, FilesLeftWithNoCopy: z.FilesLeftWithNoCopy})
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
