package rebalance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// DrainPlan is what draining a node would do, worked out from the metadata
// and the ring without the node, and whether doing it is safe; DrainTarget
// is one node's share of it. Both are the API's answer as it is sent.
type (
	DrainPlan   = apiwire.DrainPlan
	DrainTarget = apiwire.DrainTarget
)

// soleCopiesShown bounds the file ids a plan and its refusal name.
const soleCopiesShown = 10

// Refusal is the error a drain that is not safe is refused with, or nil
// for a safe plan. Its code is UNSAFE_DRAIN and its message carries every
// reason.
func Refusal(p DrainPlan) error {
	if len(p.Reasons) == 0 {
		return nil
	}
	return errs.WithCode(errs.Conflict, errs.CodeUnsafeDrain, nil,
		"draining node %s is not safe: %s; force=true drains it anyway", p.Node, strings.Join(p.Reasons, "; "))
}

// DrainInput is what a drain plan is computed from.
type DrainInput struct {
	Node string
	// Ring is the current ring; the plan takes Node off it.
	Ring              *ring.Ring
	ReplicationFactor int
	// Files are the records of every file with a copy row on Node.
	Files []meta.FileRecord
	// Healthy reports whether a node's ACTIVE copies can be read: it is
	// HEALTHY (or, for Node itself, about to be drained while reachable).
	Healthy func(nodeID string) bool
	// Free is the free space each node reported; a node missing from it
	// did not answer.
	Free map[string]int64
}

// PlanDrain works out a drain plan. It is pure: the same input gives the
// same plan.
//
// A drain is unsafe when fewer than ReplicationFactor nodes would remain,
// when the ring has more than one zone and every node left would be in one
// (all copies of every file in one failure domain), when a node would receive more bytes than it reports free (or did not say
// how much it has), or when a file's only healthy copy is on the node and
// none of the nodes that would receive it has room for it. Files with a sole
// copy claim room first, so a drain that can save them all says so even
// when other copies would not fit.
func PlanDrain(in DrainInput) DrainPlan {
	after := in.Ring.Without(in.Node)
	p := DrainPlan{Node: in.Node, Reasons: []string{}, Targets: []DrainTarget{}, SoleCopies: []string{},
		RemainingNodes: len(after.Nodes()), ReplicationFactor: in.ReplicationFactor}
	if p.RemainingNodes < in.ReplicationFactor {
		p.Reasons = append(p.Reasons, fmt.Sprintf("only %d node(s) would remain on the ring, fewer than the replication factor %d",
			p.RemainingNodes, in.ReplicationFactor))
	}
	// One zoneless node left is one domain too, but fewer nodes than the
	// replication factor already says what is wrong with that.
	if zones, left := in.Ring.ZoneCount(), after.Zones(); zones > 1 && after.ZoneCount() == 1 && left[0] != "" && in.ReplicationFactor > 1 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("every node left would be in zone %q: all copies of every file would share one zone, where the ring has %d zones now",
			left[0], zones))
	}

	type file struct {
		rec  meta.FileRecord
		sole bool
	}
	var work []file
	for _, rec := range in.Files {
		switch rec.Status {
		case meta.FilePending:
			p.PendingUploads++
			continue
		case meta.FileDeleted:
			continue
		}
		p.FilesOnNode++
		p.BytesOnNode += rec.SizeBytes
		work = append(work, file{rec, soleHealthyCopy(rec, in.Node, in.Healthy)})
	}
	slices.SortStableFunc(work, func(a, b file) int {
		if a.sole != b.sole {
			if a.sole {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.rec.ID, b.rec.ID)
	})

	targets := map[string]*DrainTarget{}
	atRisk := 0
	for _, f := range work {
		var to []string
		for _, n := range after.Preference(f.rec.ID, in.ReplicationFactor) {
			if c, ok := f.rec.Replica(n); !ok || c.Status != meta.ReplicaActive {
				to = append(to, n)
			}
		}
		if f.sole && !slices.ContainsFunc(to, func(n string) bool { return hasRoom(in.Free, targets[n], n, f.rec.SizeBytes) }) {
			atRisk++
			if len(p.SoleCopies) < soleCopiesShown {
				p.SoleCopies = append(p.SoleCopies, f.rec.ID)
			}
		}
		if len(to) == 0 {
			continue
		}
		p.Files++
		for _, n := range to {
			t := targets[n]
			if t == nil {
				t = &DrainTarget{NodeID: n}
				if free, ok := in.Free[n]; ok {
					t.FreeBytes = &free
				}
				targets[n] = t
			}
			t.Files++
			t.Bytes += f.rec.SizeBytes
			p.Bytes += f.rec.SizeBytes
		}
	}
	for _, t := range targets {
		p.Targets = append(p.Targets, *t)
	}
	slices.SortFunc(p.Targets, func(a, b DrainTarget) int { return cmp.Compare(a.NodeID, b.NodeID) })
	for _, t := range p.Targets {
		switch {
		case t.FreeBytes == nil:
			p.Reasons = append(p.Reasons, fmt.Sprintf("node %s would receive %d bytes (%d files) but did not report its free space",
				t.NodeID, t.Bytes, t.Files))
		case t.Bytes > *t.FreeBytes:
			p.Reasons = append(p.Reasons, fmt.Sprintf("node %s would receive %d bytes (%d files) but reports only %d bytes free",
				t.NodeID, t.Bytes, t.Files, *t.FreeBytes))
		}
	}
	if atRisk > 0 {
		p.Reasons = append(p.Reasons, fmt.Sprintf("%d file(s) have their only healthy copy on node %s and no remaining node can take them: %s",
			atRisk, in.Node, strings.Join(p.SoleCopies, ", ")))
	}
	p.Safe = len(p.Reasons) == 0
	return p
}

// soleHealthyCopy reports whether node holds rec's only healthy copy.
func soleHealthyCopy(rec meta.FileRecord, node string, healthy func(string) bool) bool {
	if c, ok := rec.Replica(node); !ok || c.Status != meta.ReplicaActive || !healthy(node) {
		return false
	}
	for _, c := range rec.Replicas {
		if c.NodeID != node && c.Status == meta.ReplicaActive && healthy(c.NodeID) {
			return false
		}
	}
	return true
}

// hasRoom reports whether node, which has already been given t, has room
// for size more bytes by the free space it reported.
func hasRoom(free map[string]int64, t *DrainTarget, node string, size int64) bool {
	f, ok := free[node]
	if !ok {
		return false
	}
	if t != nil {
		f -= t.Bytes
	}
	return f >= size
}

// freeSpaceTimeout bounds how long a plan waits for the nodes' free space.
const freeSpaceTimeout = 2 * time.Second

// PlanDrain works out what draining node would do now (see PlanDrain the
// function), from the metadata of every file with a copy on it, the current
// ring and the free space the remaining nodes report.
func (b *Rebalancer) PlanDrain(ctx context.Context, node string) (DrainPlan, error) {
	ids, err := b.o.Store.FileIDsOnNode(ctx, node)
	if err != nil {
		return DrainPlan{}, err
	}
	recs := make([]meta.FileRecord, 0, len(ids))
	for _, id := range ids {
		rec, err := b.o.Store.GetFile(ctx, id)
		switch {
		case errs.Is(err, errs.NotFound):
		case err != nil:
			return DrainPlan{}, err
		default:
			recs = append(recs, rec)
		}
	}
	rg := b.o.Ring()
	healthy := func(id string) bool {
		if b.o.NodeStatus == nil {
			return rg.Has(id)
		}
		st, ok := b.o.NodeStatus(id)
		return ok && (st == meta.NodeHealthy || (id == node && st != meta.NodeUnhealthy))
	}
	return PlanDrain(DrainInput{Node: node, Ring: rg, ReplicationFactor: b.o.ReplicationFactor, Files: recs,
		Healthy: healthy, Free: b.freeSpace(ctx, rg.Without(node).Nodes())}), nil
}

// freeSpace asks every node in parallel for its free space; a node that
// does not answer in time is left out.
func (b *Rebalancer) freeSpace(ctx context.Context, nodes []string) map[string]int64 {
	out := map[string]int64{}
	if b.o.FreeSpace == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, freeSpaceTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			free, err := b.o.FreeSpace(ctx, n)
			if err != nil {
				b.log.Warn("drain plan: a node did not report its free space", "node", n, "err", err)
				return
			}
			mu.Lock()
			out[n] = free
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
