// Shared by every layout that makes writes durable with whole-file-system
// syncs (batch mode).

package blob

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// syncGroup makes writes durable in batches (group commit). A caller of Sync
// returns only after a whole-file-system sync that started after the call
// has completed, and every caller waiting when a sync starts shares it.
//
// One sync runs at a time. A caller arriving while one runs cannot count on
// it (it may already have passed the caller's data), so it waits for the
// next, which starts as soon as the running one ends. Nothing but the length
// of the previous sync decides how many callers gather: there is no timer.
// Alone, a caller waits for one sync of its own; under load, a sync serves
// every caller that arrived during the one before.
//
// A failed sync fails its batch and every batch after it. The kernel reports
// a write-back error to one syncfs only, the first to finish after the
// error, and not necessarily the one whose callers' data was lost: a later
// sync succeeds even though that data never reached the disk. Once a sync
// has failed, nothing more can be acknowledged safely, so the group stays
// failed until the store is reopened (PostgreSQL stops after a failed fsync
// for the same reason).
type syncGroup struct {
	// fn syncs the file system holding the store.
	fn func() error
	// joined, when set, is called each time a caller starts waiting; tests
	// use it to know when every writer is queued.
	joined func()

	mu      sync.Mutex
	running bool       // a goroutine is running rounds
	next    *syncRound // the round that callers join now; it has not started
	failed  error      // set by the first failed sync, returned ever after
	stats   SyncStats
}

// syncRound is one sync and the callers it serves.
type syncRound struct {
	done    chan struct{}
	err     error // valid once done is closed
	waiters int   // callers still waiting for it, under syncGroup.mu
}

// SyncStats counts the file-system syncs of a Disk in batch mode.
type SyncStats struct {
	// Syncs is the number of file-system syncs run.
	Syncs int64
	// Waits is the number of waits those syncs ended. A write waits twice, a
	// removal once, so Waits/Syncs is the mean number of callers per sync.
	Waits int64
	// Time is the total time spent in syncs.
	Time time.Duration
}

func newSyncGroup(fn func() error) *syncGroup { return &syncGroup{fn: fn} }

// Sync waits for a sync that starts after it is called, and returns that
// sync's error. A cancelled ctx lets the caller stop waiting (with an
// errs.Unavailable error); the sync goes on for the others.
func (g *syncGroup) Sync(ctx context.Context) error {
	g.mu.Lock()
	if g.failed != nil {
		err := g.failed
		g.mu.Unlock()
		return err
	}
	r := g.next
	if r == nil {
		r = &syncRound{done: make(chan struct{})}
		g.next = r
	}
	r.waiters++
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	if g.joined != nil {
		g.joined()
	}

	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		g.mu.Lock()
		r.waiters--
		g.mu.Unlock()
		return errs.Wrap(errs.Unavailable, ctx.Err(), "stopped waiting for a file-system sync")
	}
}

// run starts rounds one after the other while callers are waiting for one.
func (g *syncGroup) run() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.next != nil {
		r := g.next
		g.next = nil // callers from now on need a sync that starts later
		// A round whose callers all left is skipped; after a failure no sync
		// can vouch for anything.
		if r.waiters > 0 && g.failed == nil {
			g.mu.Unlock()
			start := time.Now()
			err := g.fn()
			elapsed := time.Since(start)
			g.mu.Lock()
			g.stats.Syncs++
			g.stats.Waits += int64(r.waiters)
			g.stats.Time += elapsed
			if err != nil {
				g.failed = fmt.Errorf("file-system sync failed, and no write is acknowledged after that until the store is reopened: %w", err)
			}
		}
		r.err = g.failed
		close(r.done)
	}
	g.running = false
}

// err returns the error of the failed sync that stopped the group, or nil.
func (g *syncGroup) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

func (g *syncGroup) snapshot() SyncStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}
