// Package rebalance decides which files a membership change or a manual
// request affects and runs the reconciler over them with bounded
// parallelism, those closest to loss first, producing one report per run.
//
// Which files a trigger visits:
//   - a node failed or was deregistered: the files with a copy on it (an
//     indexed query), since only their preference lists contained it;
//   - a node joined: exactly the files whose preference list now includes it,
//     found by position ranges derived from the ring, not by a scan;
//   - a node recovered: both of the above, so its old copies are re-adopted
//     and files placed on it in its absence get their copies;
//   - manual: every file.
package rebalance

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
)

// Trigger names why a rebalance runs.
type Trigger = apiwire.Trigger

// The triggers a rebalance report names (API.md).
const (
	Joined    = apiwire.TriggerJoined
	Failed    = apiwire.TriggerFailed
	Recovered = apiwire.TriggerRecovered
	// PlacementChanged visits what Recovered does: the lists that change are
	// those that held the node (its copies) or now hold it (its ranges).
	PlacementChanged = apiwire.TriggerPlacementChanged
	Deregistered     = apiwire.TriggerDeregistered
	Manual           = apiwire.TriggerManual
	Repair           = apiwire.TriggerRepair
)

// Report is the outcome of one run, and DrainReport how far a deregistered
// node's drain has come, as the API sends them.
type (
	Report      = apiwire.RebalanceReport
	DrainReport = apiwire.DrainReport
)

// Reconciler is the one placement routine.
type Reconciler interface {
	Reconcile(ctx context.Context, fileID string) (reconcile.Outcome, error)
}

// Store is the part of the metadata store rebalancing reads.
type Store interface {
	GetFile(ctx context.Context, id string) (meta.FileRecord, error)
	FileIDsOnNode(ctx context.Context, nodeID string) ([]string, error)
	FileIDsInRanges(ctx context.Context, ranges []meta.PositionRange) ([]string, error)
	FilesAfter(ctx context.Context, after string, limit int) ([]meta.FileRecord, error)
}

// Options configures a Rebalancer.
type Options struct {
	Store             Store
	Reconciler        Reconciler
	Ring              func() *ring.Ring
	ReplicationFactor int
	Parallelism       int           // files reconciled at once (default 32)
	DrainTimeout      time.Duration // bound on Drain (default 5m)
	Logger            *slog.Logger
	// OnReport, when set, receives the report of every run (for metrics).
	OnReport func(Report)
	// Lock, when set, keeps one rebalance per trigger and node running at a
	// time across coordinators; a second one is skipped.
	Lock lease.Locker
	// NodeStatus, when set, tells a drain plan which nodes' copies are
	// healthy; without it, those of the nodes on the ring are.
	NodeStatus func(nodeID string) (meta.NodeStatus, bool)
	// FreeSpace, when set, asks a node how many bytes it can still take,
	// for drain plans; without it no node's free space is known.
	FreeSpace func(ctx context.Context, nodeID string) (int64, error)
	// RiskOrder, when set, puts the files of every run in the order they
	// are reconciled: those closest to loss first (meta.Store.FileIDsByRisk,
	// which leaves out the files that no longer exist; the run takes those
	// last, and its reconcile finds them gone). Without it, or when it fails,
	// files go in the order they were listed.
	RiskOrder func(ctx context.Context, ids []string) ([]string, error)
	// Ops, when set, records every run as an operation (GET
	// /api/cluster/operations): a drain, a repair or a rebalance by trigger.
	Ops *ops.Tracker
}

// kindOf is the kind of operation a run for trigger is: the rebalance of a
// deregistration is the node's drain, the repair loop's runs are repairs.
func kindOf(t Trigger) ops.Kind {
	switch t {
	case Deregistered:
		return ops.Drain
	case Repair:
		return ops.Repair
	}
	return ops.Rebalance
}

// DefaultParallelism is how many files a run reconciles at once unless told
// otherwise. Measured on the join of a 4th node to 5,000 files of 16 KiB:
// 183 files/s at 8, 277 at 32, with storage nodes sharing syncs among
// concurrent writes.
const DefaultParallelism = 32

// Parallelism is how many files a run reconciles at once.
func (b *Rebalancer) Parallelism() int { return b.o.Parallelism }

// Rebalancer runs rebalances.
type Rebalancer struct {
	o    Options
	log  *slog.Logger
	live liveRuns
}

// New returns a Rebalancer.
func New(o Options) *Rebalancer {
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 5 * time.Minute
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Rebalancer{o: o, log: o.Logger}
}

// AffectedFiles lists the files a trigger for node must visit.
func (b *Rebalancer) AffectedFiles(ctx context.Context, trigger Trigger, node string) ([]string, error) {
	switch trigger {
	case Failed, Deregistered:
		return b.o.Store.FileIDsOnNode(ctx, node)
	case Joined:
		return b.inRangesOf(ctx, node)
	case Recovered, PlacementChanged:
		held, err := b.o.Store.FileIDsOnNode(ctx, node)
		if err != nil {
			return nil, err
		}
		wanted, err := b.inRangesOf(ctx, node)
		if err != nil {
			return nil, err
		}
		all := append(held, wanted...)
		slices.Sort(all)
		return slices.Compact(all), nil
	default:
		return b.allFiles(ctx)
	}
}

// inRangesOf lists the files whose preference list on the current ring
// includes node.
func (b *Rebalancer) inRangesOf(ctx context.Context, node string) ([]string, error) {
	rg := b.o.Ring()
	if !rg.Has(node) {
		return nil, nil
	}
	var pr []meta.PositionRange
	for _, r := range rg.RangesIncluding(node, b.o.ReplicationFactor) {
		pr = append(pr, meta.PositionRange{From: r.From, To: r.To})
	}
	return b.o.Store.FileIDsInRanges(ctx, pr)
}

func (b *Rebalancer) allFiles(ctx context.Context) ([]string, error) {
	// The walk over every blob by id: a chunked file's chunks are blobs of
	// their own (the file list shows the file, not them), and PENDING
	// uploads are left to their upload.
	var ids []string
	const page = 1000
	after := ""
	for {
		recs, err := b.o.Store.FilesAfter(ctx, after, page)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Status != meta.FilePending {
				ids = append(ids, r.ID)
			}
		}
		if len(recs) < page {
			return ids, nil
		}
		after = recs[len(recs)-1].ID
	}
}

// runLockTTL is the lifetime of a rebalance's lease; it is renewed while the
// run lasts and lapses soon after a coordinator dies.
const runLockTTL = 30 * time.Second

// Run visits the files trigger affects and reconciles each one.
func (b *Rebalancer) Run(ctx context.Context, trigger Trigger, node string) (Report, error) {
	if b.o.Lock != nil {
		work, release, ok := lease.Hold(ctx, b.o.Lock, "rebalance:"+string(trigger)+":"+node, runLockTTL, b.log)
		if !ok {
			b.log.Info("rebalance skipped: its lease is held by another coordinator, or leases are settling after a Redis change",
				"trigger", trigger, "node", node)
			return Report{Trigger: trigger, Node: node, UnrecoverableFiles: []string{}, Skipped: true}, nil
		}
		defer release()
		ctx = work
	}
	b.log.Info("rebalance started", "trigger", trigger, "node", node)
	op := b.o.Ops.Start(kindOf(trigger), string(trigger), node, 0)
	ids, err := b.AffectedFiles(ctx, trigger, node)
	if err != nil {
		b.log.Error("rebalance could not list its files", "trigger", trigger, "node", node, "err", err)
		op.Fail(err)
		return Report{Trigger: trigger, Node: node}, err
	}
	op.Grow(len(ids))
	rep := b.runFiles(ctx, trigger, node, ids, op)
	b.report(rep)
	op.Finish(rep.Complete, rep)
	msg, level := "rebalance completed", slog.LevelInfo
	if !rep.Complete {
		msg, level = "rebalance cut short: some files were not reconciled and the run will be retried", slog.LevelWarn
	}
	b.log.Log(ctx, level, msg, "trigger", trigger, "node", node,
		"scanned", rep.FilesScanned, "affected", rep.FilesAffected, "chunks", rep.ChunksMoved, "skipped", rep.FilesSkipped,
		"created", rep.CopiesCreated, "removed", rep.CopiesRemoved,
		"promoted", rep.PrimariesPromoted, "failures", rep.Failures,
		"unrecoverable", len(rep.UnrecoverableFiles), "duration_ms", rep.DurationMs)
	return rep, nil
}

// misplacedPage is how many files RunMisplaced reads per metadata page.
const misplacedPage = 1000

// RunMisplaced visits every file but reconciles only those whose copy rows
// differ from the current ring (reconcile.Placed), so a file already in
// place costs a hash and no node call. It is the catch-up for membership
// changes whose own rebalance was lost (a coordinator killed mid-run, a run
// cut short): it does not know which nodes changed, only where every file
// belongs now. Uploads in flight are left to their upload.
func (b *Rebalancer) RunMisplaced(ctx context.Context, trigger Trigger) (Report, error) {
	start := time.Now()
	total := Report{Trigger: trigger, UnrecoverableFiles: []string{}, Complete: true}
	b.log.Info("rebalance started", "trigger", trigger, "scope", "files misplaced on the current ring")
	op := b.o.Ops.Start(kindOf(trigger), string(trigger), "", 0)
	after := ""
	for {
		page, err := b.o.Store.FilesAfter(ctx, after, misplacedPage)
		if err != nil {
			total.Complete = false
			b.log.Error("rebalance could not read its files", "trigger", trigger, "err", err)
			op.Fail(err)
			return total, err
		}
		rg := b.o.Ring()
		var ids []string
		for _, rec := range page {
			if rec.Status != meta.FilePending && !reconcile.Placed(rec, rg.Preference(rec.ID, b.o.ReplicationFactor)) {
				ids = append(ids, rec.ID)
			}
		}
		total.FilesScanned += len(page)
		if len(ids) > 0 {
			op.Grow(len(ids))
			rep := b.runFiles(ctx, trigger, "", ids, op)
			total.FilesAffected += rep.FilesAffected
			total.ChunksMoved += rep.ChunksMoved
			total.CopiesCreated += rep.CopiesCreated
			total.CopiesRemoved += rep.CopiesRemoved
			total.PrimariesPromoted += rep.PrimariesPromoted
			total.Failures += rep.Failures
			total.FilesSkipped += rep.FilesSkipped
			total.UnrecoverableFiles = append(total.UnrecoverableFiles, rep.UnrecoverableFiles...)
			total.Complete = total.Complete && rep.Complete
		}
		if len(page) < misplacedPage || ctx.Err() != nil {
			break
		}
		after = page[len(page)-1].ID
	}
	if ctx.Err() != nil {
		total.Complete = false
	}
	slices.Sort(total.UnrecoverableFiles)
	total.DurationMs = time.Since(start).Milliseconds()
	b.report(total)
	op.Finish(total.Complete, total)
	msg, level := "rebalance completed", slog.LevelInfo
	if !total.Complete {
		msg, level = "rebalance cut short: some files were not reconciled and the run will be retried", slog.LevelWarn
	}
	b.log.Log(ctx, level, msg, "trigger", trigger, "scope", "files misplaced on the current ring",
		"scanned", total.FilesScanned, "affected", total.FilesAffected, "chunks", total.ChunksMoved, "skipped", total.FilesSkipped,
		"created", total.CopiesCreated, "removed", total.CopiesRemoved, "failures", total.Failures,
		"unrecoverable", len(total.UnrecoverableFiles), "duration_ms", total.DurationMs)
	return total, nil
}

// RunFiles reconciles the given files with bounded parallelism and reports
// the run (to OnReport and as an operation too).
func (b *Rebalancer) RunFiles(ctx context.Context, trigger Trigger, node string, ids []string) Report {
	op := b.o.Ops.Start(kindOf(trigger), string(trigger), node, len(ids))
	rep := b.runFiles(ctx, trigger, node, ids, op)
	b.report(rep)
	op.Finish(rep.Complete, rep)
	return rep
}

// byRisk orders ids for a run (see Options.RiskOrder).
func (b *Rebalancer) byRisk(ctx context.Context, trigger Trigger, node string, ids []string) []string {
	if b.o.RiskOrder == nil || len(ids) < 2 {
		return ids
	}
	ordered, err := b.o.RiskOrder(ctx, ids)
	if err != nil {
		// The order only decides what is safe soonest; the work is the same.
		b.log.Warn("could not order the run's files by risk; reconciling them in the order listed",
			"trigger", trigger, "node", node, "files", len(ids), "err", err)
		return ids
	}
	if len(ordered) < len(ids) {
		listed := make(map[string]bool, len(ordered))
		for _, id := range ordered {
			listed[id] = true
		}
		for _, id := range ids {
			if !listed[id] {
				ordered = append(ordered, id)
				listed[id] = true
			}
		}
	}
	return ordered
}

// report hands a run's report to OnReport.
func (b *Rebalancer) report(rep Report) {
	if b.o.OnReport != nil {
		b.o.OnReport(rep)
	}
}

// runFiles reconciles the given files, those closest to loss first, with
// bounded parallelism, counting each one on op.
func (b *Rebalancer) runFiles(ctx context.Context, trigger Trigger, node string, ids []string, op *ops.Op) Report {
	start := time.Now()
	ids = b.byRisk(ctx, trigger, node, ids)
	rep := Report{Trigger: trigger, Node: node, FilesScanned: len(ids), UnrecoverableFiles: []string{}}
	live, end := b.live.begin(trigger, node, len(ids), start)
	defer end()
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	lastLog := time.Now()
	for range min(b.o.Parallelism, max(len(ids), 1)) {
		wg.Go(func() {
			for id := range work {
				out, err := b.o.Reconciler.Reconcile(ctx, id)
				n := live.done.Add(1)
				live.bytes.Add(out.BytesCopied)
				op.Add(1, out.BytesCopied)
				mu.Lock()
				if err != nil {
					rep.Failures++
					rep.FilesSkipped++
					b.log.Warn("reconcile failed", "file", id, "err", err)
				} else if out.Busy {
					rep.FilesSkipped++
				}
				if out.Changed || out.CopiesCreated > 0 || out.CopiesRemoved > 0 {
					rep.FilesAffected++
					if out.Chunk {
						rep.ChunksMoved++
					}
				}
				rep.CopiesCreated += out.CopiesCreated
				rep.CopiesRemoved += out.CopiesRemoved
				rep.Failures += out.Failures
				if out.PrimaryPromoted {
					rep.PrimariesPromoted++
				}
				if out.Unrecoverable {
					rep.UnrecoverableFiles = append(rep.UnrecoverableFiles, id)
				}
				if time.Since(lastLog) > 5*time.Second {
					lastLog = time.Now()
					b.log.Info("rebalance progress", "trigger", trigger, "node", node, "done", n, "of", len(ids))
				}
				mu.Unlock()
			}
		})
	}
	sent := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		work <- id
		sent++
	}
	close(work)
	wg.Wait()
	slices.Sort(rep.UnrecoverableFiles)
	rep.FilesSkipped += len(ids) - sent
	rep.Complete = rep.FilesSkipped == 0 && ctx.Err() == nil
	rep.DurationMs = time.Since(start).Milliseconds()
	return rep
}

// pendingCheckLimit bounds how many files with a copy on a draining node are
// looked at one by one to set uploads in flight apart; with more left, the
// drain is far from done anyway.
const pendingCheckLimit = 1000

// remaining lists the files with a copy on node that a drain must still
// move, and counts the PENDING uploads among them, which reconciliation
// leaves to their upload (or to the repair loop).
func (b *Rebalancer) remaining(ctx context.Context, node string) (move []string, pending int, err error) {
	ids, err := b.o.Store.FileIDsOnNode(ctx, node)
	if err != nil || len(ids) > pendingCheckLimit {
		return ids, 0, err
	}
	for _, id := range ids {
		rec, err := b.o.Store.GetFile(ctx, id)
		switch {
		case errs.Is(err, errs.NotFound):
		case err != nil:
			return nil, 0, err
		case rec.Status == meta.FilePending:
			pending++
		default:
			move = append(move, id)
		}
	}
	return move, pending, nil
}

// DrainProgress reports how many files still have a copy on node.
func (b *Rebalancer) DrainProgress(ctx context.Context, node string) (DrainReport, error) {
	move, pending, err := b.remaining(ctx, node)
	if err != nil {
		return DrainReport{}, err
	}
	d := DrainReport{Node: node, FilesRemaining: len(move), PendingUploads: pending, Complete: len(move) == 0}
	if p, ok := b.live.progress(Deregistered, node, time.Now()); ok {
		d.Progress = &p
	}
	return d, nil
}

// Drain moves every file off a deregistered node now and reports what is
// left. It runs rounds until no file has a copy on the node or the drain
// timeout passes; files another run is reconciling at that moment (their
// lease is held) are picked up by a later round, so a concurrent rebalance
// of the same node cannot make the drain answer early.
func (b *Rebalancer) Drain(ctx context.Context, node string) (DrainReport, error) {
	ctx = context.WithoutCancel(ctx) // a client hanging up must not stop a drain half-way
	work, cancel := context.WithTimeout(ctx, b.o.DrainTimeout)
	defer cancel()
	start := time.Now()
	total := Report{Trigger: Deregistered, Node: node, UnrecoverableFiles: []string{}}
	b.log.Info("drain started", "node", node)
	op := b.o.Ops.Start(ops.Drain, string(Deregistered), node, 0)
	for round := 0; ; round++ {
		ids, _, err := b.remaining(ctx, node)
		if err != nil {
			op.Fail(err)
			return DrainReport{}, err
		}
		if len(ids) == 0 || work.Err() != nil {
			break
		}
		op.Grow(len(ids))
		rep := b.runFiles(work, Deregistered, node, ids, op)
		b.report(rep)
		if round == 0 {
			total.FilesScanned = rep.FilesScanned
		}
		total.FilesAffected += rep.FilesAffected
		total.ChunksMoved += rep.ChunksMoved
		total.CopiesCreated += rep.CopiesCreated
		total.CopiesRemoved += rep.CopiesRemoved
		total.PrimariesPromoted += rep.PrimariesPromoted
		total.Failures += rep.Failures
		total.UnrecoverableFiles = append(total.UnrecoverableFiles, rep.UnrecoverableFiles...)
		if rep.FilesAffected == 0 {
			// Nothing moved this round: the files are held by another run or
			// cannot move yet. Wait a little before looking again.
			select {
			case <-work.Done():
			case <-time.After(drainRetry):
			}
		}
	}
	total.DurationMs = time.Since(start).Milliseconds()
	d, err := b.DrainProgress(ctx, node)
	total.FilesSkipped, total.Complete = d.FilesRemaining, err == nil && d.Complete
	d.Run = &total
	op.Finish(err == nil && d.Complete, d)
	b.log.Info("drain finished", "node", node, "complete", d.Complete, "files_remaining", d.FilesRemaining,
		"created", total.CopiesCreated, "removed", total.CopiesRemoved, "failures", total.Failures, "duration_ms", total.DurationMs)
	return d, err
}

// drainRetry is the pause between drain rounds that moved nothing.
const drainRetry = 200 * time.Millisecond
