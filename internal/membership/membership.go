// Package membership owns the coordinator's view of which storage nodes exist
// and which of them take part in placement, and runs the failure detector
// that decides it.
//
// The metadata store is the truth; the ring is derived from it. A node is on
// the ring exactly when its stored status is HEALTHY, so a coordinator that
// restarts (Load) rebuilds the same ring and moves no data, and coordinators
// sharing a database converge on the same ring (Run refreshes it every
// interval).
//
// Lifecycle of a node:
//
//	Register (new) ──▶ UNHEALTHY ──SuccessThreshold good probes──▶ HEALTHY (Joined)
//	HEALTHY ──FailureThreshold failed probes──▶ UNHEALTHY (Failed)
//	UNHEALTHY ──SuccessThreshold good probes──▶ HEALTHY (Recovered)
//	any ──Deregister──▶ DEREGISTERED (Deregistered; terminal, heartbeats ignored)
//	DEREGISTERED ──Rejoin──▶ UNHEALTHY (Rejoined; re-enters like a new node)
//	HEALTHY or UNHEALTHY, another disk identity reported ──▶ same status (DiskReplaced)
//
// Thresholds exist because a change of membership moves data: one missed probe
// is a pause, not a dead machine, and counters reset on the opposite outcome
// so a flapping node never oscillates the ring.
//
// A node reports the identity of its data directory when it registers and
// when it is probed. A node that restarts over a wiped or replaced disk
// faster than the failure threshold never looks failed, so the identity is
// what shows that every copy the metadata places on it is gone: a node id
// with an identity other than the stored one is recorded with the new one
// and a DiskReplaced event. A node with no stored identity (one registered
// before identities) adopts the first one it reports, without an event.
//
// Every change a rebalance must follow (a node admitted to or evicted from
// the ring, deregistered, or found with a new disk) first bumps the durable
// membership epoch in the store, then writes the node, and carries the
// epoch on its event. A coordinator that dies before the rebalance
// completes leaves the store's rebalanced epoch behind, which the next one
// to start notices.
package membership

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// Defaults of Options.
const (
	DefaultFailureThreshold  = 2
	DefaultSuccessThreshold  = 2
	DefaultInterval          = 10 * time.Second
	DefaultProbeTimeout      = 2 * time.Second
	DefaultMaxParallelProbes = 16
)

// Store is the part of the metadata store membership uses (meta.Store
// satisfies it).
type Store interface {
	CreateNode(ctx context.Context, n *meta.Node) error
	GetNode(ctx context.Context, id string) (meta.Node, error)
	ListNodes(ctx context.Context) ([]meta.Node, error)
	UpdateNode(ctx context.Context, n *meta.Node) error
	BumpMembershipEpoch(ctx context.Context) (int64, error)
	MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error)
}

var _ Store = (meta.Store)(nil)

// Prober asks a storage node whether it is ready to serve, and which disk it
// serves. A nil error means healthy; any error (unreachable, not 200,
// timeout) counts as a failed probe. diskID is the identity of the node's
// data directory, empty when the node reports none.
type Prober interface {
	Ready(ctx context.Context, baseURL string) (diskID string, err error)
}

// EventKind names a membership change. The values of the kinds that move data
// match the contract's rebalance triggers, so a consumer can pass
// string(kind) on as the trigger.
type EventKind string

// Event kinds.
const (
	// Joined: a node that had never been on the ring (since it registered or
	// was re-admitted) entered it.
	Joined EventKind = "JOINED"
	// Failed: a HEALTHY node reached the failure threshold and left the ring.
	Failed EventKind = "FAILED"
	// Recovered: a node evicted earlier reached the success threshold and is
	// back on the ring.
	Recovered EventKind = "RECOVERED"
	// Deregistered: an operator took the node off the ring for good.
	Deregistered EventKind = "DEREGISTERED"
	// Rejoined: a deregistered node was re-admitted. It is not on the ring
	// yet; a Joined event follows once it passes SuccessThreshold probes.
	Rejoined EventKind = "REJOINED"
	// DiskReplaced: a node's registration or probe showed a disk identity
	// other than the stored one, so none of the copies placed on it exist
	// any more. Its status and the ring are unchanged: a node that came
	// back faster than the failure detector stays HEALTHY, an evicted one
	// UNHEALTHY.
	DiskReplaced EventKind = "DISK_REPLACED"
	// PlacementChanged: the zone or weight of a node on the ring changed
	// (reported by the node, or set by an operator), so some preference
	// lists gained or lost it.
	PlacementChanged EventKind = "PLACEMENT_CHANGED"
)

// Event reports one membership change after it is stored and the new ring is
// published.
type Event struct {
	Kind EventKind
	// Node is the node as stored by the change.
	Node meta.Node
	// Ring is the snapshot published by the change (for Rejoined, the
	// unchanged current ring).
	Ring *ring.Ring
	At   time.Time
	// Epoch is the membership epoch the change bumped before it was
	// written, which a rebalance that completes its work records; 0 for
	// changes no rebalance follows (Rejoined).
	Epoch int64
}

// Options configure a Registry. Zero values take the documented defaults.
type Options struct {
	// Store holds node rows; required.
	Store Store
	// Prober checks a node's readiness; required.
	Prober Prober
	// VNodes is the number of ring points per node (default ring.DefaultVNodes, 100).
	VNodes int
	// FailureThreshold is the number of consecutive failed probes that evicts
	// a HEALTHY node (default 2).
	FailureThreshold int
	// SuccessThreshold is the number of consecutive good probes that admits
	// an UNHEALTHY node (default 2).
	SuccessThreshold int
	// Interval is the period of Run's sweeps (default 10s).
	Interval time.Duration
	// ProbeTimeout bounds each probe (default the smaller of 2s and
	// Interval, so a hanging node cannot stretch a sweep past its period).
	ProbeTimeout time.Duration
	// MaxParallelProbes bounds the probes in flight during a sweep (default 16).
	MaxParallelProbes int
	// Logger receives membership changes; nil discards.
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests pass a fake.
	Now func() time.Time
	// OnEvent, when set, is called once for every membership change, in the
	// order the changes happened, while the registry still holds its write
	// lock. It must return quickly (hand heavy work such as rebalancing to
	// another goroutine) and must not call Register, Deregister, Rejoin,
	// Sweep or Load. Ring, BaseURL, Node and Nodes are safe.
	OnEvent func(Event)
	// SweepLock, when set, gives out the "detector" lease, which Run holds
	// (or renews) before each timed sweep; the sweep runs only while it
	// does. Coordinators sharing a database pass their Locker here so only
	// one of them probes the nodes and counts failures; the others still
	// refresh their ring from the store. Such a sweep writes no probe
	// outcome once the lease's deadline has passed (a process paused in the
	// middle of it), since another may hold the lease by then. Sweeps asked
	// for through Sweep (the admin endpoint) always run.
	SweepLock lease.Locker
}

// Registry owns storage-node membership and the failure detector. Its methods
// are safe for concurrent use.
type Registry struct {
	store        Store
	prober       Prober
	vnodes       int
	failThresh   int
	okThresh     int
	interval     time.Duration
	probeTimeout time.Duration
	parallel     int
	log          *slog.Logger
	now          func() time.Time
	onEvent      func(Event)
	sweepLock    *lease.Held // nil without Options.SweepLock

	// ring is the published snapshot; readers load it without locking.
	ring ring.Atomic
	// book maps every known node id to its base URL and status. The map is
	// immutable once published; writers replace it.
	book atomic.Pointer[map[string]entry]

	// mu serialises every change of node rows together with the matching ring
	// publication, so that the ring equals the HEALTHY set whenever mu is
	// free. It is never held across a probe.
	mu sync.Mutex
	// ignored records deregistered nodes whose heartbeat has been logged
	// once, so repeated heartbeats stay quiet. Guarded by mu.
	ignored map[string]bool

	// sweepMu keeps sweeps from overlapping, so a node is never probed twice
	// for one round and counted twice.
	sweepMu sync.Mutex

	// kick asks Run to probe a newly registered node at once. Sends never
	// block: when Run is busy or absent, the next sweep covers the node.
	kick chan string
}

// New returns a Registry with an empty ring; call Load before serving.
func New(o Options) (*Registry, error) {
	if o.Store == nil || o.Prober == nil {
		return nil, errs.E(errs.Invalid, "membership: Store and Prober are required")
	}
	if o.VNodes < 0 || o.FailureThreshold < 0 || o.SuccessThreshold < 0 || o.Interval < 0 ||
		o.ProbeTimeout < 0 || o.MaxParallelProbes < 0 {
		return nil, errs.E(errs.Invalid, "membership: options must not be negative")
	}
	r := &Registry{
		store:        o.Store,
		prober:       o.Prober,
		vnodes:       orDefault(o.VNodes, ring.DefaultVNodes),
		failThresh:   orDefault(o.FailureThreshold, DefaultFailureThreshold),
		okThresh:     orDefault(o.SuccessThreshold, DefaultSuccessThreshold),
		interval:     orDefault(o.Interval, DefaultInterval),
		probeTimeout: o.ProbeTimeout,
		parallel:     orDefault(o.MaxParallelProbes, DefaultMaxParallelProbes),
		log:          o.Logger,
		now:          o.Now,
		onEvent:      o.OnEvent,
		ignored:      map[string]bool{},
		kick:         make(chan string, 64),
	}
	if r.probeTimeout == 0 {
		r.probeTimeout = min(DefaultProbeTimeout, r.interval)
	}
	if o.SweepLock != nil {
		// A round and a probe, so that the holder keeps the lease from
		// round to round; a lease that lapses between rounds is harmless,
		// as each round is still swept by one coordinator only.
		r.sweepLock = lease.NewHeld(o.SweepLock, "detector", r.interval+r.probeTimeout)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.ring.Store(ring.New(r.vnodes))
	r.book.Store(&map[string]entry{})
	return r, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Ring returns the current ring snapshot. It never blocks and the snapshot
// never changes; a later membership change publishes a new one.
func (r *Registry) Ring() *ring.Ring { return r.ring.Load() }

// BaseURL returns "http://host:port" of any known node, including unhealthy
// and deregistered ones, which may still serve as copy sources.
func (r *Registry) BaseURL(nodeID string) (string, bool) {
	e, ok := (*r.book.Load())[nodeID]
	return e.url, ok
}

// Node returns one node; an unknown id is NotFound with code NODE_NOT_FOUND.
func (r *Registry) Node(ctx context.Context, id string) (meta.Node, error) {
	n, err := r.store.GetNode(ctx, id)
	if err != nil {
		return meta.Node{}, notFound(id, err)
	}
	return n, nil
}

// Nodes returns every known node ordered by id.
func (r *Registry) Nodes(ctx context.Context) ([]meta.Node, error) {
	return r.store.ListNodes(ctx)
}

// Load reads every node from the store, publishes the ring of the HEALTHY
// ones and refreshes the address book. A coordinator calls it at start, so a
// restart rebuilds the ring it had and moves no data; Run calls it every
// interval so coordinators sharing a database converge. A new snapshot is
// published only when the HEALTHY set changed.
func (r *Registry) Load(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	nodes, err := r.store.ListNodes(ctx)
	if err != nil {
		return err
	}
	book := make(map[string]entry, len(nodes))
	healthy := make(map[string]bool, len(nodes))
	var members []ring.Member
	for _, n := range nodes {
		book[n.ID] = entryOf(n)
		if n.OnRing() {
			healthy[n.ID] = true
			members = append(members, memberOf(n))
		}
	}
	if !maps.Equal(book, *r.book.Load()) {
		r.book.Store(&book)
	}
	cur := r.ring.Load()
	var gone []string
	for _, id := range cur.Nodes() {
		if !healthy[id] {
			gone = append(gone, id)
		}
	}
	next := cur.Without(gone...).WithMembers(members...)
	if next != cur {
		r.ring.Store(next)
		r.log.Info("ring rebuilt from the metadata store",
			"nodes", len(nodes), "on_ring", len(next.Nodes()), "ring", next.Nodes())
	}
	return nil
}

// publish stores the ring that matches n's stored status and records its
// address. Callers hold mu.
func (r *Registry) publish(n meta.Node) *ring.Ring {
	cur := r.ring.Load()
	next := cur.Without(n.ID)
	if n.OnRing() {
		next = cur.WithMembers(memberOf(n))
	}
	if next != cur {
		r.ring.Store(next)
	}
	r.setAddr(n)
	return next
}

// memberOf is the ring member a node on the ring stands for.
func memberOf(n meta.Node) ring.Member {
	return ring.Member{Node: n.ID, Zone: n.PlacementZone(), Weight: n.PlacementWeight()}
}

// entry is what the registry serves about a node without a store round trip.
type entry struct {
	url    string
	status meta.NodeStatus
}

func entryOf(n meta.Node) entry { return entry{url: baseURL(n.Host, n.Port), status: n.Status} }

// Status reports a known node's last recorded status without blocking.
func (r *Registry) Status(nodeID string) (meta.NodeStatus, bool) {
	e, ok := (*r.book.Load())[nodeID]
	return e.status, ok
}

// setAddr records n's base URL and status. Callers hold mu.
func (r *Registry) setAddr(n meta.Node) {
	e := entryOf(n)
	cur := *r.book.Load()
	if old, ok := cur[n.ID]; ok && old == e {
		return
	}
	next := maps.Clone(cur)
	next[n.ID] = e
	r.book.Store(&next)
}

// emit delivers an event. Callers hold mu, which keeps events in order.
func (r *Registry) emit(kind EventKind, n meta.Node, rg *ring.Ring, epoch int64) {
	if r.onEvent != nil {
		r.onEvent(Event{Kind: kind, Node: n, Ring: rg, At: r.now(), Epoch: epoch})
	}
}

// maxAttempts bounds the re-read-and-re-apply loop of one change. A conflict
// means another writer (a second coordinator) changed the row in between;
// that many in a row means something is wrong, not contention.
const maxAttempts = 8

// edit is what a change asks update to do with the node it edited.
type edit int

const (
	keep           edit = iota // nothing to write
	write                      // write the node; no rebalance follows
	writeRebalance             // write a change a rebalance must follow
	writeLostDisk              // writeRebalance for a replaced disk: its copies are gone
)

// update re-reads node id, lets change edit it and writes it back with
// optimistic locking, starting over when the write was stale. When change
// answers keep, update returns the node as read and written false.
//
// Before it writes a writeRebalance change, update bumps the membership
// epoch and returns it. Intent comes before action on purpose: a crash
// between the bump and the write costs at most one needless catch-up
// rebalance, while the other order could lose one. If the bump fails the
// change is not written and its error is returned. An attempt that loses a
// race keeps the epoch it took for the next one, so one change bumps once.
func (r *Registry) update(ctx context.Context, id string, change func(n *meta.Node) (edit, error)) (n meta.Node, written bool, epoch int64, err error) {
	lost := false
	for range maxAttempts {
		n, err = r.store.GetNode(ctx, id)
		if err != nil {
			return meta.Node{}, false, 0, err
		}
		e, cerr := change(&n)
		if cerr != nil || e == keep {
			return n, false, 0, cerr
		}
		if (e == writeRebalance || e == writeLostDisk) && epoch == 0 {
			if epoch, err = r.store.BumpMembershipEpoch(ctx); err != nil {
				return meta.Node{}, false, 0, err
			}
		}
		if e == writeLostDisk && !lost {
			// Before the new identity is written: once it is, nothing would
			// tell this disk apart again, so a crash in between must leave
			// the copies already marked. The files become DEGRADED, which
			// the repair loop retries whatever happens to the rebalance.
			reason := fmt.Sprintf("copy on %s lost: the node came back with another disk", n.ID)
			if _, err = r.store.MarkNodeCopiesLost(ctx, n.ID, reason); err != nil {
				return meta.Node{}, false, 0, err
			}
			lost = true
		}
		err = r.store.UpdateNode(ctx, &n)
		if err == nil {
			return n, true, epoch, nil
		}
		if !errs.Is(err, errs.Conflict) {
			return meta.Node{}, false, 0, err
		}
	}
	return meta.Node{}, false, 0, errs.Wrap(errs.Conflict, err, "node %s kept changing under %d attempts to update it", id, maxAttempts)
}

// diskChange is what a reported disk identity means against the stored one.
type diskChange int

const (
	sameDisk  diskChange = iota // the stored identity, or none reported: nothing to record
	firstDisk                   // the node's first identity: adopted, nothing was lost
	newDisk                     // another identity than the stored one: the disk was replaced
)

func compareDisk(stored, reported string) diskChange {
	switch {
	case reported == "" || reported == stored:
		return sameDisk
	case stored == "":
		return firstDisk
	default:
		return newDisk
	}
}

// diskReplaced publishes a node whose disk was replaced (its status, and so
// the ring, are unchanged) and reports it. Callers hold mu.
func (r *Registry) diskReplaced(n meta.Node, previous string, epoch int64) {
	rg := r.publish(n)
	r.log.Warn(fmt.Sprintf("node %s is back with another disk (identity %s, was %s): the copies placed on it are gone and will be rebuilt", n.ID, n.DiskID, previous),
		"node", n.ID, "disk_id", n.DiskID, "previous_disk_id", previous, "status", n.Status)
	r.emit(DiskReplaced, n, rg, epoch)
}

func notFound(id string, err error) error {
	if errs.Is(err, errs.NotFound) {
		return errs.WithCode(errs.NotFound, errs.CodeNodeNotFound, err, "node %s is not registered", id)
	}
	return err
}

func baseURL(host string, port int) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port))
}

func address(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
