package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/meta"
)

// NodeHealth is one node's state after a sweep, in the shape the admin
// endpoint answers.
type NodeHealth struct {
	NodeID               string          `json:"nodeId"`
	Host                 string          `json:"host"`
	Port                 int             `json:"port"`
	Status               meta.NodeStatus `json:"status"`
	OnRing               bool            `json:"onRing"`
	ConsecutiveFailures  int             `json:"consecutiveFailures"`
	ConsecutiveSuccesses int             `json:"consecutiveSuccesses"`
	LastCheckAt          *time.Time      `json:"lastCheckAt"`
	LastHealthyAt        *time.Time      `json:"lastHealthyAt"`
	// Error is why this sweep's probe failed; empty when it succeeded or the
	// node was not probed (DEREGISTERED).
	Error string `json:"error,omitempty"`
}

// HealthOf returns n's state with no probe error.
func HealthOf(n meta.Node) NodeHealth {
	return NodeHealth{
		NodeID:               n.ID,
		Host:                 n.Host,
		Port:                 n.Port,
		Status:               n.Status,
		OnRing:               n.OnRing(),
		ConsecutiveFailures:  n.ConsecutiveFailures,
		ConsecutiveSuccesses: n.ConsecutiveSuccesses,
		LastCheckAt:          n.LastCheckAt,
		LastHealthyAt:        n.LastHealthyAt,
	}
}

// probe is one probe's outcome, tied to the address that was probed.
type probe struct {
	node   meta.Node // as listed before probing
	diskID string    // the identity the node reported; empty on failure
	err    error
	at     time.Time
}

// Sweep runs one probe round now: every node that is not DEREGISTERED is
// probed in parallel, each probe bounded by ProbeTimeout, and the outcomes
// update the nodes' counters and, at a threshold, their status and the ring.
// It returns every known node, ordered by id. Sweeps never overlap: a sweep
// asked for while another runs waits for it.
//
// If ctx ends while probes are in flight, their outcomes are discarded rather
// than counted as failures (a coordinator shutting down must not evict
// nodes) and ctx's error is returned.
func (r *Registry) Sweep(ctx context.Context) ([]NodeHealth, error) {
	return r.sweep(ctx, "", nil)
}

// errLeaseLapsed is why a probe outcome was not written: the sweep's lease
// lapsed after the sweep began.
var errLeaseLapsed = errors.New("the detector lease lapsed during the sweep")

// sweep probes every node, or just the node named by only when that is not
// empty. A sweep that runs under a lease passes held, which must report it
// still held before each outcome is written: once it has lapsed, another
// coordinator may hold it and have changed the nodes since these probes.
func (r *Registry) sweep(ctx context.Context, only string, held func() bool) ([]NodeHealth, error) {
	r.sweepMu.Lock()
	defer r.sweepMu.Unlock()
	start := time.Now()

	nodes, err := r.store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	var targets []meta.Node
	for _, n := range nodes {
		if n.Status != meta.NodeDeregistered && (only == "" || n.ID == only) {
			targets = append(targets, n)
		}
	}
	probes := r.probeAll(ctx, targets)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	errByID := make(map[string]error, len(probes))
	var failures []error
	changes := 0
	for _, p := range probes {
		errByID[p.node.ID] = p.err
		changed, err := r.apply(ctx, p, held)
		if errors.Is(err, errLeaseLapsed) {
			r.log.Warn("the detector lease lapsed during the sweep; its remaining probe outcomes are not written",
				"probed", len(probes), "since_start", time.Since(start))
			return nil, nil
		}
		if err != nil {
			failures = append(failures, fmt.Errorf("record the probe of node %s: %w", p.node.ID, err))
		}
		if changed {
			changes++
		}
	}

	nodes, err = r.store.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]NodeHealth, 0, len(nodes))
	failed := 0
	for _, n := range nodes {
		h := HealthOf(n)
		if perr := errByID[n.ID]; perr != nil {
			h.Error = perr.Error()
			failed++
		}
		if only == "" || n.ID == only {
			out = append(out, h)
		}
	}
	r.log.Debug("health sweep done",
		"probed", len(probes), "failed", failed, "changes", changes,
		"on_ring", len(r.Ring().Nodes()), "duration", time.Since(start))
	return out, errors.Join(failures...)
}

// probeAll probes targets in parallel, at most r.parallel at a time.
func (r *Registry) probeAll(ctx context.Context, targets []meta.Node) []probe {
	out := make([]probe, len(targets))
	sem := make(chan struct{}, r.parallel)
	var wg sync.WaitGroup
	for i, n := range targets {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, r.probeTimeout)
			defer cancel()
			disk, err := r.prober.Ready(pctx, baseURL(n.Host, n.Port))
			out[i] = probe{node: n, diskID: disk, err: err, at: r.now()}
		})
	}
	wg.Wait()
	return out
}

// transition is what one probe did to a node's membership.
type transition int

const (
	unchanged transition = iota
	admitted             // UNHEALTHY → HEALTHY
	evicted              // HEALTHY → UNHEALTHY
)

// apply records one probe's outcome and, when a threshold is reached, moves
// the node on or off the ring; a new disk identity is recorded and reported.
// It reports whether the node's membership changed. An error (the store's,
// or the epoch bump's) means the probe was not recorded.
func (r *Registry) apply(ctx context.Context, p probe, held func() bool) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var tr transition
	var firstJoin bool
	var disk diskChange
	var previous string
	n, written, epoch, err := r.update(ctx, p.node.ID, func(n *meta.Node) (edit, error) {
		// Checked here, just before the write, the latest it can be
		// without the store checking a fencing token itself.
		if held != nil && !held() {
			return keep, errLeaseLapsed
		}
		// A node deregistered or moved to another address while the probe
		// ran: the outcome says nothing about it any more.
		if n.Status == meta.NodeDeregistered || n.Host != p.node.Host || n.Port != p.node.Port {
			tr = unchanged
			return keep, nil
		}
		firstJoin = n.LastHealthyAt == nil
		tr = r.record(n, p.err, p.at)
		// The identity the probe saw is news only against the one stored
		// when the probe began: one recorded meanwhile, by a registration,
		// may be newer than the probe's answer. The next probe settles it.
		disk, previous = sameDisk, n.DiskID
		if p.err == nil && n.DiskID == p.node.DiskID {
			disk = compareDisk(n.DiskID, p.diskID)
		}
		if disk != sameDisk {
			n.DiskID = p.diskID
		}
		if disk == newDisk {
			return writeLostDisk, nil
		}
		if tr != unchanged {
			return writeRebalance, nil
		}
		return write, nil
	})
	if err != nil || !written {
		return false, err
	}
	switch disk {
	case firstDisk:
		r.log.Info(fmt.Sprintf("node %s reports disk identity %s", n.ID, n.DiskID), "node", n.ID, "disk_id", n.DiskID)
	case newDisk:
		r.diskReplaced(n, previous, epoch)
	}
	switch tr {
	case admitted:
		rg := r.publish(n)
		if firstJoin {
			r.log.Info(fmt.Sprintf("node %s joined the cluster at %s, ring now has %d node(s)", n.ID, baseURL(n.Host, n.Port), len(rg.Nodes())),
				"node", n.ID)
			r.emit(Joined, n, rg, epoch)
		} else {
			r.log.Info(fmt.Sprintf("node %s recovered after %d consecutive successful probes, back on the ring (%d node(s))", n.ID, n.ConsecutiveSuccesses, len(rg.Nodes())),
				"node", n.ID)
			r.emit(Recovered, n, rg, epoch)
		}
		return true, nil
	case evicted:
		rg := r.publish(n)
		r.log.Error(fmt.Sprintf("node %s failed %d consecutive health checks, evicted from the ring, %d node(s) remain", n.ID, n.ConsecutiveFailures, len(rg.Nodes())),
			"node", n.ID, "error", p.err)
		r.emit(Failed, n, rg, epoch)
		return true, nil
	}
	if p.err != nil {
		// A HEALTHY node's miss is worth a warning; an UNHEALTHY node failing
		// again every interval is not news.
		level := slog.LevelDebug
		if n.Status == meta.NodeHealthy {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, fmt.Sprintf("health probe of node %s failed (%d in a row)", n.ID, n.ConsecutiveFailures),
			"node", n.ID, "status", n.Status, "error", p.err)
	}
	return disk == newDisk, nil
}

// record applies one probe outcome to n's counters and status. LastHealthyAt
// moves only while the node is (or becomes) HEALTHY, so nil means the node
// has never been on the ring since it registered or rejoined: that is what
// tells a join from a recovery.
func (r *Registry) record(n *meta.Node, probeErr error, at time.Time) transition {
	n.LastCheckAt = &at
	if probeErr != nil {
		n.ConsecutiveFailures++
		n.ConsecutiveSuccesses = 0
		if n.Status == meta.NodeHealthy && n.ConsecutiveFailures >= r.failThresh {
			n.Status = meta.NodeUnhealthy
			return evicted
		}
		return unchanged
	}
	n.ConsecutiveSuccesses++
	n.ConsecutiveFailures = 0
	switch {
	case n.Status == meta.NodeHealthy:
		n.LastHealthyAt = &at
	case n.ConsecutiveSuccesses >= r.okThresh:
		n.Status = meta.NodeHealthy
		n.LastHealthyAt = &at
		return admitted
	}
	return unchanged
}

// Run sweeps at once and then every Interval, refreshing the ring from the
// store after each sweep so coordinators sharing a database converge. It also
// probes a newly registered or re-admitted node at once, so joining does not
// wait a whole interval. It returns when ctx ends.
func (r *Registry) Run(ctx context.Context) {
	r.log.Info("failure detector started",
		"interval", r.interval, "probe_timeout", r.probeTimeout,
		"failure_threshold", r.failThresh, "success_threshold", r.okThresh)
	defer r.log.Info("failure detector stopped")
	t := time.NewTicker(r.interval)
	defer t.Stop()
	r.round(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.round(ctx)
		case id := <-r.kick:
			if _, err := r.sweep(ctx, id, nil); err != nil && ctx.Err() == nil {
				r.log.Warn("probe of a newly registered node failed to complete", "node", id, "error", err)
			}
		}
	}
}

// round is one timer tick of Run. The refresh runs even after a failed sweep:
// it is what picks up changes other coordinators made.
func (r *Registry) round(ctx context.Context) {
	var held func() bool
	if r.sweepLock != nil {
		held = r.sweepLock.Valid
	}
	if r.sweepLock == nil || r.sweepLock.Hold(ctx) {
		if _, err := r.sweep(ctx, "", held); err != nil && ctx.Err() == nil {
			r.log.Warn("health sweep failed", "error", err)
		}
	}
	if err := r.Load(ctx); err != nil && ctx.Err() == nil {
		r.log.Warn("refreshing the ring from the metadata store failed", "error", err)
	}
}
