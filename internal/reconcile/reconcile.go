// Package reconcile holds the one routine that decides where a file's copies
// belong and makes it so. Every trigger — a node joining, failing,
// recovering or being deregistered, the admin endpoint, the repair loop, a
// delete and a verify — calls Reconcile, so no two paths can disagree about
// placement and shuffle data forever.
//
// Reconcile works from observed state only: the current ring and what the
// nodes answer to HEAD, never a plan computed earlier. It creates missing
// copies before it deletes surplus ones, so the last good copy is never at
// risk, and running it twice does nothing the second time.
package reconcile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Nodes is what reconciliation needs from storage nodes.
type Nodes interface {
	Head(ctx context.Context, base, id string) (wire.BlobInfo, error)
	Get(ctx context.Context, base, id string, rng *byterange.Range) (*nodeclient.Object, error)
	Put(ctx context.Context, base, id, checksum string, size int64, body io.Reader) (wire.BlobInfo, bool, error)
	Delete(ctx context.Context, base, id string) error
	Rehash(ctx context.Context, base, id string) (wire.ChecksumReport, error)
}

// Cluster is reconciliation's view of membership.
type Cluster interface {
	Ring() *ring.Ring
	BaseURL(nodeID string) (string, bool)
	// Status reports a known node's status.
	Status(nodeID string) (meta.NodeStatus, bool)
}

// Options configures a Reconciler.
type Options struct {
	Store             meta.Store
	Nodes             Nodes
	Cluster           Cluster
	ReplicationFactor int
	Logger            *slog.Logger
	// Lock, when set, serialises reconciliations of one file across
	// coordinators: a file another coordinator is reconciling is skipped.
	Lock lease.Locker
	// LockTTL is the per-file lease's lifetime (renewed while the work runs).
	LockTTL time.Duration
	// Throttle, when set, paces the bytes of every copy this reconciler
	// makes (REBALANCE_BANDWIDTH); nil is unlimited.
	Throttle *Throttle
}

// Reconciler makes a file's copies match the ring.
type Reconciler struct {
	store   meta.Store
	nodes   Nodes
	cluster Cluster
	rf      int
	log     *slog.Logger
	lock    lease.Locker
	lockTTL time.Duration
	pace    *Throttle

	fullMu sync.Mutex
	full   map[string]time.Time // nodes that answered a write with "no space", and when
}

// fullBackoff is how long a node that refused a copy for want of space is
// passed over before it is asked again.
const fullBackoff = time.Minute

func (r *Reconciler) markFull(n string) {
	r.fullMu.Lock()
	defer r.fullMu.Unlock()
	if r.full == nil {
		r.full = map[string]time.Time{}
	}
	r.full[n] = time.Now()
}

func (r *Reconciler) recentlyFull(n string) bool {
	r.fullMu.Lock()
	defer r.fullMu.Unlock()
	at, ok := r.full[n]
	return ok && time.Since(at) < fullBackoff
}

// New returns a Reconciler.
func New(o Options) *Reconciler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	if o.LockTTL <= 0 {
		o.LockTTL = time.Minute
	}
	return &Reconciler{store: o.Store, nodes: o.Nodes, cluster: o.Cluster, rf: o.ReplicationFactor, log: o.Logger,
		lock: o.Lock, lockTTL: o.LockTTL, pace: o.Throttle}
}

// Outcome is what one reconciliation of one file did.
type Outcome struct {
	FileID          string
	Status          meta.FileStatus // the status it left (empty when the row is gone)
	Changed         bool            // metadata or copies changed
	CopiesCreated   int
	BytesCopied     int64 // the bytes of the copies created
	CopiesRemoved   int
	PrimaryPromoted bool
	Failures        int  // copy creations or removals that failed
	Unrecoverable   bool // no reachable copy to read or copy from
	Removed         bool // the file's row is gone (a delete completed, or it never existed)
	Skipped         bool // an upload in flight or another coordinator owns the file
	// Busy is set with Skipped when the file was not looked at because its
	// lease could not be had: another coordinator holds it, or leases are
	// unavailable for a moment. The work is still to be done.
	Busy             bool
	RemainingHolders []string
	// Chunk says the blob is a chunk of a larger file (rebalance reports
	// count them); the reconciler treats it as any blob.
	Chunk bool
}

// maxAttempts bounds the re-read-and-re-apply loop when another writer
// changes the file between our read and our write.
const maxAttempts = 5

// Reconcile brings file id's copies in line with the ring. A file another
// coordinator is reconciling right now is skipped (Outcome.Skipped).
func (r *Reconciler) Reconcile(ctx context.Context, id string) (Outcome, error) {
	return r.ReconcileWith(ctx, id)
}

// ReconcileWith is Reconcile that also asks the extra nodes what they hold
// under the file's id, though neither the ring nor the file's copy rows name
// them: the anti-entropy sweep passes the nodes whose inventory lists a blob
// the metadata does not. A copy found there is adopted while the file needs
// it and removed as surplus once the desired copies are complete; for a
// deleted file it is removed.
func (r *Reconciler) ReconcileWith(ctx context.Context, id string, extra ...string) (Outcome, error) {
	if r.lock != nil {
		work, release, ok := lease.Hold(ctx, r.lock, "file:"+id, r.lockTTL, r.log)
		if !ok {
			return Outcome{FileID: id, Skipped: true, Busy: true}, nil
		}
		defer release()
		ctx = work
	}
	return r.reconcileNow(ctx, id, extra)
}

// ReconcileNow reconciles without taking the file's lease. It serves a
// user's request (a delete, a verify), which must not be turned away while
// leases are unavailable, for instance just after Redis failed: every
// metadata write is optimistic and every copy idempotent, so overlapping a
// leased run costs at most some duplicated work.
func (r *Reconciler) ReconcileNow(ctx context.Context, id string) (Outcome, error) {
	return r.reconcileNow(ctx, id, nil)
}

func (r *Reconciler) reconcileNow(ctx context.Context, id string, extra []string) (Outcome, error) {
	var lastErr error
	for range maxAttempts {
		out, err := r.once(ctx, id, extra)
		if !errs.Is(err, errs.Conflict) {
			return out, err
		}
		lastErr = err
	}
	return Outcome{FileID: id}, errs.Wrap(errs.Conflict, lastErr, "reconcile %s: the file kept changing under us", id)
}

// state is what a node told us about one file.
type state int

const (
	offline  state = iota // not asked: the node is off the ring and not draining, or has no address
	absent                // the node answered and holds no copy
	present               // the node holds an intact-looking copy with the right checksum
	mismatch              // the node holds bytes under this id with another checksum or size
	unreachable
)

var stateNames = [...]string{"offline", "absent", "present", "mismatch", "unreachable"}

func (s state) String() string { return stateNames[s] }

// once is one attempt at reconciling the file: load it, ask the nodes what
// they hold, create the missing copies, remove the surplus ones, and record
// the copies and the status that result. A Conflict error means the record
// changed under it and the attempt is to be made again.
func (r *Reconciler) once(ctx context.Context, id string, extra []string) (Outcome, error) {
	rec, err := r.store.GetFile(ctx, id)
	if errs.Is(err, errs.NotFound) {
		return Outcome{FileID: id, Removed: true}, nil
	}
	if err != nil {
		return Outcome{FileID: id}, err
	}
	out, err := r.apply(ctx, rec, extra)
	out.Chunk = rec.IsChunk()
	return out, err
}

// apply is once's work on the record it read.
func (r *Reconciler) apply(ctx context.Context, rec meta.FileRecord, extra []string) (Outcome, error) {
	id := rec.ID
	switch {
	case rec.Status == meta.FileDeleted:
		return r.finishDelete(ctx, rec, extra)
	case rec.Status == meta.FilePending, rec.Manifest():
		// A manifest has no blob to place: its chunks are blobs of their
		// own, each reconciled by its id. Only its delete is finished here.
		return Outcome{FileID: id, Status: rec.Status, Skipped: true}, nil
	}

	p := r.plan(ctx, rec, extra)
	if err := p.create(ctx); err != nil {
		return p.out, err
	}
	next := p.placeCopies(ctx)
	p.promote(&next)
	return p.commit(ctx, next)
}

// pass is the working state of one attempt (see once): the file as it was
// read, where its copies belong and what each node asked holds.
type pass struct {
	r   *Reconciler
	id  string
	rec meta.FileRecord // as read; markMoving updates it
	rg  *ring.Ring
	// desired are the nodes the copies belong on, in preference order; a
	// full node gives its place to a stand-in.
	desired []string
	nodes   []string // every node asked: desired, the copy rows' and the extra ones
	obs     map[string]state
	pref    []string // the whole preference list, where stand-ins come from
	spare   int      // the next node of pref that may stand in for a full one
	created []string // nodes given a copy by this pass
	out     Outcome
}

// plan works out where the copies belong and asks every node concerned
// what it holds.
func (r *Reconciler) plan(ctx context.Context, rec meta.FileRecord, extra []string) *pass {
	id := rec.ID
	rg := r.cluster.Ring()
	desired := rg.Preference(id, r.rf)
	nodes := slices.Clone(desired)
	for _, c := range rec.Replicas {
		if !slices.Contains(nodes, c.NodeID) {
			nodes = append(nodes, c.NodeID)
		}
	}
	for _, n := range extra {
		if !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	obs := r.observe(ctx, rec, nodes)
	return &pass{
		r: r, id: id, rec: rec, rg: rg, desired: desired, nodes: nodes, obs: obs,
		pref: rg.Preference(id, len(rg.Nodes())), spare: len(desired), out: Outcome{FileID: id},
	}
}

// standIn gives desired[i]'s place to the next node of the preference
// list, observing it if it was not yet; false when no node is left.
func (p *pass) standIn(ctx context.Context, i int) bool {
	for p.spare < len(p.pref) && slices.Contains(p.desired, p.pref[p.spare]) {
		p.spare++
	}
	if p.spare == len(p.pref) {
		return false
	}
	stand := p.pref[p.spare]
	p.spare++
	p.r.log.Debug("node is full; the next node of the preference list takes its copy", "file", p.id, "full", p.desired[i], "node", stand)
	p.desired[i] = stand
	if !slices.Contains(p.nodes, stand) {
		p.nodes = append(p.nodes, stand)
		p.obs[stand] = p.r.observeOne(ctx, p.rec.File, stand)
	}
	return true
}

// create is the CREATE step: every desired node without a good copy gets
// one, copied from a node that has it. Destinations are recorded as PENDING
// first, so a crash mid-copy leaves a trace the next run resolves. A node
// that is full gives its place to the next node of the preference list, as
// an upload does: a full disk is not a dead node.
func (p *pass) create(ctx context.Context) error {
	r, id, obs := p.r, p.id, p.obs
	// Nodes found full a moment ago are not asked again until fullBackoff
	// has passed: their stand-ins count in their place.
	for i := range p.desired {
		if needsCopy(obs[p.desired[i]]) && r.recentlyFull(p.desired[i]) {
			p.standIn(ctx, i)
		}
	}
	var missing []string
	for _, n := range p.desired {
		if needsCopy(obs[n]) {
			missing = append(missing, n)
		}
	}
	sources := r.sources(obs, p.desired, p.nodes)
	if len(missing) == 0 || len(sources) == 0 {
		return nil
	}
	if err := r.markMoving(ctx, &p.rec, missing); err != nil {
		return err
	}
	for i := 0; i < len(p.desired); i++ {
		n := p.desired[i]
		if !needsCopy(obs[n]) {
			continue
		}
		if _, planned := p.rec.Replica(n); !planned {
			if err := r.markMoving(ctx, &p.rec, []string{n}); err != nil {
				return err
			}
		}
		err := r.copyTo(ctx, p.rec.File, n, sources, obs)
		switch {
		case err == nil:
			obs[n] = present
			p.created = append(p.created, n)
			p.out.CopiesCreated++
			p.out.BytesCopied += p.rec.SizeBytes
			r.log.Info("created copy", "file", id, "node", n)
		case errs.Is(err, errs.NoSpace):
			r.markFull(n)
			if p.standIn(ctx, i) {
				i-- // now try the stand-in
				continue
			}
			p.out.Failures++
			r.log.Warn("node is full and no other node can take its copy", "file", id, "node", n)
		default:
			p.out.Failures++
			r.log.Warn("could not create copy", "file", id, "node", n, "err", err)
		}
	}
	return nil
}

// placeCopies is the DELETE step, and the copy rows that follow from it:
// surplus copies go only once every desired copy is confirmed. It returns
// the record to write, with its copies rebuilt from what the nodes hold.
func (p *pass) placeCopies(ctx context.Context) meta.FileRecord {
	r, id, rec, obs := p.r, p.id, p.rec, p.obs
	next := rec // the record we will write, with its copies rebuilt below
	next.Replicas = nil

	complete := len(p.desired) > 0
	for _, n := range p.desired {
		complete = complete && obs[n] == present
	}
	for _, n := range p.nodes {
		if slices.Contains(p.desired, n) {
			continue
		}
		prev, hadRow := rec.Replica(n)
		switch {
		case complete && (obs[n] == present || obs[n] == mismatch):
			if err := r.remove(ctx, id, n); err != nil {
				p.out.Failures++
				r.log.Warn("could not remove surplus copy", "file", id, "node", n, "err", err)
				next.Replicas = append(next.Replicas, withStatus(prev, id, n, meta.ReplicaActive, hadRow))
				continue
			}
			p.out.CopiesRemoved++
			r.log.Info("removed surplus copy (no longer assigned by the ring)", "file", id, "node", n)
		case complete && obs[n] == absent:
			// Nothing there to delete: forget the row.
		case complete && r.deregistered(n):
			// A deregistered node that cannot be reached leaves nothing to track.
		case obs[n] == present:
			next.Replicas = append(next.Replicas, withStatus(prev, id, n, meta.ReplicaActive, hadRow))
		case hadRow && obs[n] != absent:
			next.Replicas = append(next.Replicas, withStatus(prev, id, n, meta.ReplicaFailed, hadRow))
		}
	}
	for _, n := range p.desired {
		prev, hadRow := rec.Replica(n)
		switch obs[n] {
		case present:
			next.Replicas = append(next.Replicas, withStatus(prev, id, n, meta.ReplicaActive, hadRow))
		case absent, mismatch, unreachable, offline:
			if hadRow || obs[n] != absent {
				next.Replicas = append(next.Replicas, withStatus(prev, id, n, meta.ReplicaFailed, hadRow))
			}
		}
	}
	slices.SortFunc(next.Replicas, func(a, b meta.Replica) int { return strings.Compare(a.NodeID, b.NodeID) })
	return next
}

// promote is the PROMOTE and STATUS step: the primary is the first desired
// node with a good copy (or any node with one), and the status follows from
// the good copies.
func (p *pass) promote(next *meta.FileRecord) {
	desiredCopies, total := 0, 0
	primary := ""
	for _, n := range p.desired {
		if p.obs[n] == present {
			desiredCopies++
			if primary == "" {
				primary = n
			}
		}
	}
	for _, c := range next.Replicas {
		if c.Status == meta.ReplicaActive {
			total++
			if primary == "" {
				primary = c.NodeID
			}
		}
	}
	if primary != "" {
		next.PrimaryNodeID = primary
	}
	next.Status = meta.StatusFor(desiredCopies, total, p.r.rf)
	next.StatusReason = p.r.reason(next.Status, p.desired, p.obs, len(p.rg.Nodes()))
	p.out.PrimaryPromoted = primary != "" && primary != p.rec.PrimaryNodeID
	p.out.Unrecoverable = total == 0
	p.out.Status = next.Status
}

// commit writes next unless nothing changed.
func (p *pass) commit(ctx context.Context, next meta.FileRecord) (Outcome, error) {
	r, id, out := p.r, p.id, p.out
	if sameState(p.rec, next) {
		return out, nil
	}
	if err := r.store.UpdateFile(ctx, &next); err != nil {
		// The file may have been deleted while its copies were being made
		// (its row is then DELETED, or gone altogether): the copies made for
		// it would be orphans that nothing else lists.
		if (errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound)) && len(p.created) > 0 {
			r.undoIfDeleted(ctx, id, p.created, p.obs)
		}
		if errs.Is(err, errs.NotFound) {
			return Outcome{FileID: id, Removed: true, CopiesCreated: out.CopiesCreated, BytesCopied: out.BytesCopied}, nil
		}
		return out, err
	}
	out.Changed = true
	if out.Unrecoverable {
		r.log.Error("file has no reachable copy", "file", id)
	}
	return out, nil
}

// observe asks each node that may hold the file what it has. Nodes off the
// ring are not asked unless they are draining (deregistered): a failed node
// would only make us wait for a timeout.
func (r *Reconciler) observe(ctx context.Context, rec meta.FileRecord, nodes []string) map[string]state {
	obs := make(map[string]state, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	rg := r.cluster.Ring()
	for _, n := range nodes {
		base, ok := r.cluster.BaseURL(n)
		if !ok || !(rg.Has(n) || r.deregistered(n)) {
			mu.Lock()
			obs[n] = offline
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			st := r.head(ctx, rec.File, base)
			mu.Lock()
			obs[n] = st
			mu.Unlock()
		})
	}
	wg.Wait()
	return obs
}

// observeOne asks one more node, as observe would.
func (r *Reconciler) observeOne(ctx context.Context, f meta.File, n string) state {
	base, ok := r.cluster.BaseURL(n)
	if !ok || !(r.cluster.Ring().Has(n) || r.deregistered(n)) {
		return offline
	}
	return r.head(ctx, f, base)
}

// head asks the node at base what it holds under the file's id.
func (r *Reconciler) head(ctx context.Context, f meta.File, base string) state {
	info, err := r.nodes.Head(ctx, base, f.ID)
	switch {
	case errs.Is(err, errs.NotFound):
		return absent
	case errs.Is(err, errs.Corrupt):
		// The node answered, and what it holds under this id is not a good
		// copy (a torn or garbage checksum sidecar): a copy to replace, not
		// an unreachable node.
		return mismatch
	case err != nil:
		return unreachable
	case info.Checksum == f.Checksum && info.Size == f.SizeBytes:
		return present
	default:
		return mismatch
	}
}

// needsCopy reports whether a desired node in state st must be given a copy
// now (a node that cannot be asked is left for a later run).
func needsCopy(st state) bool { return st == absent || st == mismatch }

func (r *Reconciler) deregistered(n string) bool {
	st, ok := r.cluster.Status(n)
	return ok && st == meta.NodeDeregistered
}

// sources lists nodes holding a good copy, desired nodes first.
func (r *Reconciler) sources(obs map[string]state, desired, nodes []string) []string {
	var out []string
	for _, n := range desired {
		if obs[n] == present {
			out = append(out, n)
		}
	}
	for _, n := range nodes {
		if obs[n] == present && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// markMoving records the copies about to be created as PENDING and the file
// as REBALANCING, before any byte moves.
func (r *Reconciler) markMoving(ctx context.Context, rec *meta.FileRecord, dests []string) error {
	next := *rec
	next.Replicas = slices.Clone(rec.Replicas)
	for _, n := range dests {
		if _, ok := rec.Replica(n); !ok {
			next.Replicas = append(next.Replicas, meta.Replica{FileID: rec.ID, NodeID: n, Status: meta.ReplicaPending})
		}
	}
	next.Status = meta.FileRebalancing
	if err := r.store.UpdateFile(ctx, &next); err != nil {
		return err
	}
	*rec = next
	return nil
}

// copyTo streams the file from the first source that can supply it to dest.
// The destination re-hashes what arrives against the file's checksum, so a
// corrupt source is refused instead of propagated; such a source is then
// re-hashed where it lies and, if its bytes are really bad, removed.
func (r *Reconciler) copyTo(ctx context.Context, f meta.File, dest string, sources []string, obs map[string]state) error {
	dbase, ok := r.cluster.BaseURL(dest)
	if !ok {
		return errs.E(errs.Unavailable, "node %s has no known address", dest)
	}
	if obs[dest] == mismatch {
		// Other bytes under this id would make the node refuse the write.
		if err := r.nodes.Delete(ctx, dbase, f.ID); err != nil {
			return err
		}
	}
	var errsSeen []string
	for _, src := range sources {
		if obs[src] != present {
			continue
		}
		sbase, _ := r.cluster.BaseURL(src)
		obj, err := r.nodes.Get(ctx, sbase, f.ID, nil)
		if err != nil {
			errsSeen = append(errsSeen, src+": "+err.Error())
			continue
		}
		_, _, err = r.nodes.Put(ctx, dbase, f.ID, f.Checksum, f.SizeBytes, r.pace.Reader(ctx, obj.Body))
		obj.Body.Close()
		if err == nil {
			return nil
		}
		if errs.Is(err, errs.NoSpace) {
			return err // the destination is full: no other source helps
		}
		errsSeen = append(errsSeen, src+"→"+dest+": "+err.Error())
		if errs.Is(err, errs.Corrupt) && r.sourceCorrupt(ctx, f, src, sbase) {
			obs[src] = absent
		}
	}
	return errs.E(errs.Unavailable, "no source could supply a copy (%s)", strings.Join(errsSeen, "; "))
}

// sourceCorrupt re-hashes a source's copy and removes it if it is bad.
func (r *Reconciler) sourceCorrupt(ctx context.Context, f meta.File, src, base string) bool {
	rh, err := r.nodes.Rehash(ctx, base, f.ID)
	if err != nil || rh.ActualChecksum == f.Checksum {
		return false
	}
	r.log.Error("source copy is corrupt; removing it", "file", f.ID, "node", src, "actual", rh.ActualChecksum)
	if err := r.nodes.Delete(ctx, base, f.ID); err != nil {
		r.log.Warn("could not remove corrupt copy", "file", f.ID, "node", src, "err", err)
	}
	return true
}

func (r *Reconciler) remove(ctx context.Context, id, n string) error {
	base, ok := r.cluster.BaseURL(n)
	if !ok {
		return errs.E(errs.Unavailable, "node %s has no known address", n)
	}
	return r.nodes.Delete(ctx, base, id)
}

// undoIfDeleted removes copies this run created when the file was deleted
// while they were being made, so a concurrent delete leaves no orphan.
func (r *Reconciler) undoIfDeleted(ctx context.Context, id string, created []string, obs map[string]state) {
	cur, err := r.store.GetFile(ctx, id)
	if err == nil && cur.Status != meta.FileDeleted || err != nil && !errs.Is(err, errs.NotFound) {
		return
	}
	for _, n := range created {
		if obs[n] == present {
			if err := r.remove(ctx, id, n); err != nil {
				r.log.Warn("could not remove a copy made for a file deleted meanwhile", "file", id, "node", n, "err", err)
			}
		}
	}
}

// finishDelete removes every remaining copy of a DELETED file it can reach,
// on the nodes its rows name and on the extra ones, and drops the row once
// none is left. A deleted file is never re-created.
func (r *Reconciler) finishDelete(ctx context.Context, rec meta.FileRecord, extra []string) (Outcome, error) {
	out := Outcome{FileID: rec.ID, Status: meta.FileDeleted}
	next := rec
	next.Replicas = nil
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range extra {
		if _, listed := rec.Replica(n); listed {
			continue
		}
		wg.Go(func() {
			if err := r.remove(ctx, rec.ID, n); err != nil {
				r.log.Warn("could not remove an unlisted copy of a deleted file", "file", rec.ID, "node", n, "err", err)
				return
			}
			mu.Lock()
			out.CopiesRemoved++
			mu.Unlock()
		})
	}
	for _, c := range rec.Replicas {
		wg.Go(func() {
			err := r.remove(ctx, rec.ID, c.NodeID)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Failures++
				c.Status = meta.ReplicaDeleting
				next.Replicas = append(next.Replicas, c)
				out.RemainingHolders = append(out.RemainingHolders, c.NodeID)
				return
			}
			out.CopiesRemoved++
		})
	}
	wg.Wait()
	if len(next.Replicas) == 0 {
		if err := r.store.DeleteFile(ctx, rec.ID); err != nil {
			return out, err
		}
		out.Removed, out.Changed, out.Status = true, true, ""
		return out, nil
	}
	slices.SortFunc(next.Replicas, func(a, b meta.Replica) int { return strings.Compare(a.NodeID, b.NodeID) })
	slices.Sort(out.RemainingHolders)
	if sameState(rec, next) {
		return out, nil
	}
	if err := r.store.UpdateFile(ctx, &next); err != nil {
		return out, err
	}
	out.Changed = true
	return out, nil
}

// reason explains a status short of ACTIVE.
func (r *Reconciler) reason(st meta.FileStatus, desired []string, obs map[string]state, ringNodes int) string {
	if st == meta.FileActive {
		return ""
	}
	var why []string
	if ringNodes < r.rf {
		why = append(why, fmt.Sprintf("only %d node(s) on the ring for replication factor %d", ringNodes, r.rf))
	}
	for _, n := range desired {
		if obs[n] != present {
			why = append(why, n+": "+obs[n].String())
		}
	}
	if st == meta.FileFailed {
		why = append([]string{"no reachable copy"}, why...)
	}
	return strings.Join(why, "; ")
}

func withStatus(prev meta.Replica, id, n string, st meta.ReplicaStatus, had bool) meta.Replica {
	if !had {
		prev = meta.Replica{FileID: id, NodeID: n}
	}
	prev.Status = st
	return prev
}

// sameState reports whether writing next would change nothing.
func sameState(a, b meta.FileRecord) bool {
	if a.Status != b.Status || a.StatusReason != b.StatusReason || a.PrimaryNodeID != b.PrimaryNodeID || len(a.Replicas) != len(b.Replicas) {
		return false
	}
	for _, c := range b.Replicas {
		p, ok := a.Replica(c.NodeID)
		if !ok || p.Status != c.Status {
			return false
		}
	}
	return true
}

// Placed reports whether rec is exactly where the ring wants it, judged from
// the metadata alone: ACTIVE, one ACTIVE copy on each desired node and no
// other copy row, with the first desired node as primary. It costs a
// comparison, not a node call, so a sweep over every file spends I/O only on
// the files it returns false for.
func Placed(rec meta.FileRecord, desired []string) bool {
	if rec.Status != meta.FileActive || len(desired) == 0 || rec.PrimaryNodeID != desired[0] || len(rec.Replicas) != len(desired) {
		return false
	}
	for _, c := range rec.Replicas {
		if c.Status != meta.ReplicaActive || !slices.Contains(desired, c.NodeID) {
			return false
		}
	}
	return true
}
