package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

// repairBatch bounds the files one repair pass takes per status group.
const repairBatch = 10000

// staleLeaseAge is how long after its expiry a lease row is deleted by the
// repair pass. Every lease is renewed within its TTL (seconds to minutes), so
// a row this far past expiry belongs to a coordinator that died holding it.
const staleLeaseAge = time.Hour

// repairLoop is the self-healing pass: it re-runs the reconciler over files
// that are not where they should be, and has the file service settle uploads
// abandoned by a crashed coordinator.
type repairLoop struct {
	store      meta.Store
	rebalancer *rebalance.Rebalancer
	uploads    interface {
		SettleAbandoned(ctx context.Context, id string, timeout time.Duration) error
		// ExpireSessions removes upload sessions past UPLOAD_SESSION_TTL
		// with their chunks.
		ExpireSessions(ctx context.Context, limit int) (int, error)
	}
	cluster interface {
		Ring() *ring.Ring
	}
	interval       time.Duration
	pendingTimeout time.Duration
	// leaseAge is how long after expiry lease rows are pruned (staleLeaseAge).
	leaseAge time.Duration
	log      *slog.Logger
	now      func() time.Time
	// lock, when set, lets one coordinator at a time run the pass.
	lock lease.Locker
	// catchUp, when set, runs the rebalance that membership changes are
	// still owed (see catchUpEpochs); off with automatic rebalancing off.
	catchUp bool
	// busy reports whether this process still has membership rebalances
	// queued or running, which will record their own epochs.
	busy func() bool
	// refresh rebuilds the ring from the store (membership.Registry.Load).
	refresh func(ctx context.Context) error
	// owed is the membership epoch the previous pass found not rebalanced
	// (0: none); only a pass that finds the same gap again catches up.
	owed int64
}

// run passes once at start, so that a coordinator that starts behind on
// membership epochs catches up at once, then every interval.
func (l *repairLoop) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		if _, err := l.pass(ctx); err != nil && ctx.Err() == nil {
			l.log.Error("repair pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// catchUpEpochs runs the rebalance that the recorded membership changes are
// still owed. A change's own rebalance records its epoch when it completes;
// one that never did — its coordinator was killed mid-run, its run was cut
// short by a lost lease or skipped files — leaves the rebalanced epoch
// behind. The catch-up cannot know which nodes changed, so it visits every
// file and reconciles those the current ring places elsewhere; when it
// completes it records the membership epoch it read before it began.
//
// A gap is caught up only when two passes in a row find it at the same
// epoch, and on a ring rebuilt from the store after that: a membership
// change bumps the epoch a moment before it writes the node, and another
// coordinator learns of the node only at its next refresh, so a gap seen
// once may belong to a change whose ring this coordinator does not have yet
// — rebalancing on the old ring and recording the epoch would hide the
// change's own rebalance should that one be cut short.
func (l *repairLoop) catchUpEpochs(ctx context.Context) {
	if !l.catchUp || (l.busy != nil && l.busy()) {
		return
	}
	ep, err := l.store.Epochs(ctx)
	if err != nil {
		l.log.Warn("could not read the membership epochs", "err", err)
		return
	}
	if ep.Rebalanced >= ep.Membership {
		l.owed = 0
		return
	}
	if l.owed != ep.Membership {
		l.owed = ep.Membership
		l.log.Info("membership changes are not rebalanced yet; the next repair pass catches up if they still are not",
			"membership_epoch", ep.Membership, "rebalanced_epoch", ep.Rebalanced)
		return
	}
	if l.refresh != nil {
		if err := l.refresh(ctx); err != nil {
			l.log.Warn("could not rebuild the ring before catching up", "err", err)
			return
		}
	}
	l.log.Warn("membership changes are owed a rebalance that did not complete; catching up",
		"membership_epoch", ep.Membership, "rebalanced_epoch", ep.Rebalanced)
	rep, err := l.rebalancer.RunMisplaced(ctx, rebalance.Repair)
	if err != nil || !rep.Complete {
		l.log.Warn("catch-up rebalance did not complete; the next repair pass runs it again",
			"membership_epoch", ep.Membership, "skipped", rep.FilesSkipped, "err", err)
		return
	}
	if err := l.store.CompleteRebalance(ctx, ep.Membership); err != nil {
		l.log.Warn("could not record the completed rebalance; the next repair pass runs it again", "epoch", ep.Membership, "err", err)
		return
	}
	l.log.Info("catch-up rebalance completed", "rebalanced_epoch", ep.Membership,
		"scanned", rep.FilesScanned, "affected", rep.FilesAffected, "created", rep.CopiesCreated, "removed", rep.CopiesRemoved)
}

func (l *repairLoop) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// pass runs one repair. It does nothing while no node is on the ring: there
// is nowhere to repair to, and marking every copy FAILED would help nobody.
func (l *repairLoop) pass(ctx context.Context) (rebalance.Report, error) {
	if l.cluster.Ring().Len() == 0 {
		l.log.Debug("repair skipped: no storage node is on the ring")
		return rebalance.Report{Trigger: rebalance.Repair}, nil
	}
	if l.lock != nil {
		work, release, ok := lease.Hold(ctx, l.lock, "repair", l.interval, l.log)
		if !ok {
			l.log.Debug("repair skipped: another coordinator is running it")
			return rebalance.Report{Trigger: rebalance.Repair, Skipped: true}, nil
		}
		defer release()
		ctx = work
	}
	// The catch-up comes last, so that a long one does not hold up the
	// abandoned uploads and deletes below.
	defer l.catchUpEpochs(ctx)
	if n, err := l.store.PruneLeases(ctx, l.leaseAge); err != nil {
		l.log.Warn("could not prune expired leases", "err", err)
	} else if n > 0 {
		l.log.Info("pruned leases left by stopped coordinators", "leases", n, "expired_for_over", l.leaseAge)
	}
	now := l.clock()
	// The files closest to loss first: the store lists them by fewest ACTIVE
	// copies, so a batch never leaves a one-copy file for a later pass while
	// it takes a two-copy one, and pending deletes, which hold nothing to
	// lose, are a batch of their own. The run sorts the whole list the same
	// way (rebalance.Options.RiskOrder), the stuck moves among the rest.
	ids, err := l.store.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileDegraded, meta.FileFailed}, now, repairBatch)
	if err != nil {
		return rebalance.Report{}, err
	}
	deleted, err := l.store.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileDeleted}, now, repairBatch)
	if err != nil {
		return rebalance.Report{}, err
	}
	// A file REBALANCING for longer than one interval was left so by a run
	// that died; a younger one may be moving right now.
	stuck, err := l.store.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileRebalancing}, now.Add(-l.interval), repairBatch)
	if err != nil {
		return rebalance.Report{}, err
	}
	abandoned, err := l.store.FileIDsByStatus(ctx, []meta.FileStatus{meta.FilePending}, now.Add(-l.pendingTimeout), repairBatch)
	if err != nil {
		return rebalance.Report{}, err
	}
	for _, id := range abandoned {
		if err := l.uploads.SettleAbandoned(ctx, id, l.pendingTimeout); err != nil {
			l.log.Warn("could not settle an abandoned upload", "file", id, "err", err)
		}
	}
	if n, err := l.uploads.ExpireSessions(ctx, repairBatch); err != nil {
		l.log.Warn("could not remove expired upload sessions", "err", err)
	} else if n > 0 {
		l.log.Info("removed expired upload sessions and their chunks", "sessions", n)
	}
	ids = append(append(append(ids, stuck...), deleted...), abandoned...)
	if len(ids) == 0 {
		return rebalance.Report{Trigger: rebalance.Repair}, nil
	}
	rep := l.rebalancer.RunFiles(ctx, rebalance.Repair, "", ids)
	l.log.Info("repair pass completed", "scanned", rep.FilesScanned, "affected", rep.FilesAffected,
		"created", rep.CopiesCreated, "removed", rep.CopiesRemoved, "failures", rep.Failures,
		"unrecoverable", len(rep.UnrecoverableFiles), "abandoned_uploads", len(abandoned), "duration_ms", rep.DurationMs)
	return rep, nil
}
