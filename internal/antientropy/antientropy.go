// Package antientropy is the coordinator's sweep over observed state: within
// every ANTI_ENTROPY_INTERVAL it visits every file, ACTIVE ones included,
// and compares it with the current ring and with what the nodes report they
// hold. Every other correction in dfs is triggered by an event (a join, a
// failure, a delete); an event that is lost — a crash, a restart faster than
// the failure detector, a Redis blip — would otherwise leave a file wrong
// for ever while it reads ACTIVE. The sweep needs no event.
//
// One pass walks the metadata in pages by file id (meta.Store.FilesAfter)
// and, in step with it, each ring node's inventory in the same id order (the
// node's blob listing), so that both sides of one id range are compared at
// once:
//
//   - misplaced: the copy rows differ from the ring's preference list (a
//     surplus copy, a copy short, a FAILED row, the wrong primary, a status
//     other than ACTIVE). Judged from the metadata alone: a hash, no node
//     call.
//   - missing: an ACTIVE copy row on a node whose inventory does not list
//     the blob (a wiped disk, a lost write).
//   - corrupt: the inventory lists the blob with another size or checksum
//     (a torn or garbage checksum sidecar lists with none).
//   - orphan: a node holds a blob no copy row lists on it. Only once it has
//     been seen so for ORPHAN_GRACE is anything done: then, if the file still
//     exists, the reconciler is asked to look at that node too (it adopts the
//     copy or removes it as surplus), and if the file does not, the blob is
//     removed after the store has been asked once more.
//
// Every file found wrong is handed to the reconciler, the one routine that
// moves data; the sweep itself changes nothing but orphans of files that no
// longer exist. Files are checked at a bounded rate, the cursor is kept in
// the metadata store after every page so that a restarted coordinator
// resumes where the pass stopped, and a lease keeps it to one coordinator at
// a time.
package antientropy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Kind names what the sweep found wrong with a copy.
type Kind string

// The kinds, also the values of the metrics' kind label.
const (
	Misplaced Kind = "misplaced"
	Missing   Kind = "missing"
	Corrupt   Kind = "corrupt"
	Orphan    Kind = "orphan"
)

// Kinds lists every kind, for metrics that start their series at zero.
var Kinds = []Kind{Misplaced, Missing, Corrupt, Orphan}

// Store is what the sweep reads and keeps in the metadata store.
type Store interface {
	FilesAfter(ctx context.Context, after string, limit int) ([]meta.FileRecord, error)
	GetFile(ctx context.Context, id string) (meta.FileRecord, error)
	GetState(ctx context.Context, key string) (string, error)
	PutState(ctx context.Context, key, value string) error
}

// Nodes lists what a storage node holds and removes orphans.
type Nodes interface {
	List(ctx context.Context, base, after string, limit int) (wire.BlobList, error)
	Delete(ctx context.Context, base, id string) error
}

// Cluster is the sweep's view of membership.
type Cluster interface {
	Ring() *ring.Ring
	BaseURL(nodeID string) (string, bool)
}

// Reconciler is the one placement routine; extra names nodes to look at
// besides those the ring and the copy rows name.
type Reconciler interface {
	ReconcileWith(ctx context.Context, id string, extra ...string) (reconcile.Outcome, error)
}

// Events receives what the sweep does, for metrics. Calls never block.
type Events interface {
	// Found and Fixed count copies (files, for Misplaced) found wrong and
	// put right, by kind.
	Found(kind Kind, n int)
	Fixed(kind Kind, n int)
	// Checked counts files compared.
	Checked(n int)
	// Progress is how far the current pass has come through the id space,
	// from 0 to 1.
	Progress(fraction float64)
	// PassCompleted marks the end of a full pass.
	PassCompleted(at time.Time)
}

type noEvents struct{}

func (noEvents) Found(Kind, int)         {}
func (noEvents) Fixed(Kind, int)         {}
func (noEvents) Checked(int)             {}
func (noEvents) Progress(float64)        {}
func (noEvents) PassCompleted(time.Time) {}

// Defaults of Options.
const (
	DefaultInterval    = 10 * time.Minute
	DefaultRate        = 2000
	DefaultOrphanGrace = 30 * time.Minute
	DefaultPageSize    = 500
	DefaultParallelism = 8
	// maxCandidates bounds the orphans remembered between passes; past it,
	// new ones wait for a later pass to be remembered.
	maxCandidates = 100_000
)

// stateKey is where the sweep keeps its progress in the metadata store.
const stateKey = "anti-entropy"

// Options configure a Sweeper. Store, Nodes, Cluster and Reconciler are
// required.
type Options struct {
	Store      Store
	Nodes      Nodes
	Cluster    Cluster
	Reconciler Reconciler
	// ReplicationFactor is the copies each file should have (default 3).
	ReplicationFactor int
	// Interval is the period within which every file is visited: a pass
	// starts Interval after the previous one started (default 10m).
	Interval time.Duration
	// Rate bounds the files compared per second (default 2000).
	Rate int
	// OrphanGrace is how long a blob must have been seen with no copy row
	// before it is acted on (default 30m). It must exceed the longest time an
	// upload or a copy can be in flight before its row is written.
	OrphanGrace time.Duration
	// PageSize is the files read per metadata page (default 500).
	PageSize int
	// Parallelism is the files reconciled at once (default 8).
	Parallelism int
	// MoveMisplaced, when false, leaves files whose only fault is their
	// placement to the operator (REBALANCE_ON_MEMBERSHIP_CHANGE=false):
	// missing, corrupt and orphan copies are still put right.
	MoveMisplaced bool
	// Lock, when set, keeps the sweep to one coordinator at a time.
	Lock   lease.Locker
	Events Events
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Sweeper runs anti-entropy passes.
type Sweeper struct {
	o       Options
	log     *slog.Logger
	limiter *rate.Limiter

	mu sync.Mutex
	// seen remembers, for each blob on a node that no row listed, when it
	// was first seen so and in which pass last. It lives in memory: a
	// restart only delays removal. Entries a whole pass did not see again
	// are dropped at its end.
	seen map[copyKey]sighting
	pass int
}

type sighting struct {
	first time.Time
	pass  int
}

type copyKey struct{ id, node string }

// New returns a Sweeper.
func New(o Options) (*Sweeper, error) {
	if o.Store == nil || o.Nodes == nil || o.Cluster == nil || o.Reconciler == nil {
		return nil, errs.E(errs.Invalid, "antientropy: Store, Nodes, Cluster and Reconciler are required")
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	// A page is checked in one go, so it is never larger than a second's
	// worth of files: a low rate then paces pages, not just passes.
	o.PageSize = min(o.PageSize, o.Rate)
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.Events == nil {
		o.Events = noEvents{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// The burst is one page, so a page waits for its whole share at once.
	return &Sweeper{o: o, log: o.Logger, limiter: rate.NewLimiter(rate.Limit(o.Rate), max(o.PageSize, 1)),
		seen: map[copyKey]sighting{}}, nil
}

// State is the sweep's progress, kept in the metadata store.
type State struct {
	// Cursor is the last file id of the current pass already compared; empty
	// between passes.
	Cursor string `json:"cursor"`
	// PassStartedAt is when the current (or last) pass started.
	PassStartedAt time.Time `json:"passStartedAt"`
	// LastFullPassAt is when the last pass that reached the end finished.
	LastFullPassAt time.Time `json:"lastFullPassAt"`
}

// LoadState reads the sweep's progress; a store that has none yet answers
// the zero State.
func (s *Sweeper) LoadState(ctx context.Context) (State, error) {
	v, err := s.o.Store.GetState(ctx, stateKey)
	if errs.Is(err, errs.NotFound) {
		return State{}, nil
	}
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		// A record this program cannot read starts a new pass rather than
		// stopping the sweep for good.
		s.log.Warn("anti-entropy state is unreadable; starting a new pass", "err", err)
		return State{}, nil
	}
	return st, nil
}

func (s *Sweeper) saveState(ctx context.Context, st State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return s.o.Store.PutState(ctx, stateKey, string(b))
}

// Run sweeps until ctx ends: a pass starts Interval after the previous one
// started, or at once when a pass was cut short (by a restart, a lost lease)
// and left its cursor behind.
func (s *Sweeper) Run(ctx context.Context) {
	s.log.Info("anti-entropy sweep started", "interval", s.o.Interval, "rate_per_s", s.o.Rate,
		"orphan_grace", s.o.OrphanGrace)
	defer s.log.Info("anti-entropy sweep stopped")
	for {
		wait := s.untilDue(ctx)
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		rep, err := s.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("anti-entropy pass stopped; it resumes from its cursor", "err", err)
		}
		if err != nil || rep.Skipped {
			// Another coordinator holds the sweep (its cursor then says a
			// pass is under way), or this one failed: look again later.
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(s.o.Interval, 10*time.Second)):
			}
		}
	}
}

// untilDue is how long until the next pass should start: zero when one is
// due now. A state that cannot be read is retried after a short pause.
func (s *Sweeper) untilDue(ctx context.Context) time.Duration {
	st, err := s.LoadState(ctx)
	if err != nil {
		return min(s.o.Interval, 10*time.Second)
	}
	if st.Cursor != "" || st.PassStartedAt.IsZero() {
		return 0
	}
	// Checking again every so often, rather than sleeping the whole wait,
	// lets a pass another coordinator ran push the next one back.
	return min(max(st.PassStartedAt.Add(s.o.Interval).Sub(s.o.Now()), 0), time.Minute)
}

// Report is what one pass (or the part of it this call ran) did.
type Report struct {
	Checked int          `json:"checked"`
	Found   map[Kind]int `json:"found"`
	Fixed   map[Kind]int `json:"fixed"`
	// Unresolved counts files handed to the reconciler that it could not put
	// right this time (skipped for a lease, failed); a later pass retries.
	Unresolved int   `json:"unresolved"`
	Complete   bool  `json:"complete"`
	DurationMs int64 `json:"durationMs"`
	// Skipped is true when another coordinator holds the sweep's lease.
	Skipped bool `json:"skipped,omitempty"`
}

func newReport() Report { return Report{Found: map[Kind]int{}, Fixed: map[Kind]int{}} }

// Pass runs one pass from the stored cursor to the end of the id space,
// under the sweep's lease. It returns early, with the cursor kept, when ctx
// ends or a page cannot be read.
func (s *Sweeper) Pass(ctx context.Context) (rep Report, err error) {
	if s.o.Lock != nil {
		work, release, ok := lease.Hold(ctx, s.o.Lock, "anti-entropy", max(s.o.Interval, time.Minute), s.log)
		if !ok {
			return Report{Skipped: true}, nil
		}
		defer release()
		ctx = work
	}
	start := s.o.Now()
	rep = newReport()
	defer func() { rep.DurationMs = s.o.Now().Sub(start).Milliseconds() }()
	if s.o.Cluster.Ring().Len() == 0 {
		// Skipped, so that Run waits before it looks again.
		s.log.Debug("anti-entropy pass skipped: no storage node is on the ring")
		rep.Skipped = true
		return rep, nil
	}
	st, err := s.LoadState(ctx)
	if err != nil {
		return rep, err
	}
	if st.Cursor == "" {
		st.PassStartedAt = start
		s.log.Info("anti-entropy pass started")
	} else {
		s.log.Info("anti-entropy pass resumed", "cursor", st.Cursor, "started_at", st.PassStartedAt)
	}
	inv := newInventories(s.o.Nodes, s.o.Cluster, s.o.PageSize)
	s.startPass()
	fromStart := st.Cursor == ""
	lastLog := s.o.Now()
	for {
		page, err := s.o.Store.FilesAfter(ctx, st.Cursor, s.o.PageSize)
		if err != nil {
			return rep, err
		}
		if err := s.limiter.WaitN(ctx, max(len(page), 1)); err != nil {
			return rep, err
		}
		end := len(page) < s.o.PageSize
		hi := maxID
		if !end {
			hi = page[len(page)-1].ID
		}
		held := inv.upTo(ctx, st.Cursor, hi)
		s.checkPage(ctx, page, held, &rep)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		rep.Checked += len(page)
		s.o.Events.Checked(len(page))
		if end {
			break
		}
		st.Cursor = hi
		s.o.Events.Progress(idFraction(hi))
		if err := s.saveState(ctx, st); err != nil {
			return rep, err
		}
		if s.o.Now().Sub(lastLog) > 10*time.Second {
			lastLog = s.o.Now()
			s.log.Info("anti-entropy progress", "checked", rep.Checked, "percent", int(100*idFraction(hi)))
		}
	}
	st.Cursor, st.LastFullPassAt = "", s.o.Now()
	if err := s.saveState(ctx, st); err != nil {
		return rep, err
	}
	rep.Complete = true
	if fromStart {
		// A resumed pass saw only part of the id space.
		s.dropUnseen()
	}
	s.o.Events.Progress(1)
	s.o.Events.PassCompleted(st.LastFullPassAt)
	s.log.Info("anti-entropy pass completed", "checked", rep.Checked,
		"misplaced", rep.Found[Misplaced], "missing", rep.Found[Missing], "corrupt", rep.Found[Corrupt], "orphans", rep.Found[Orphan],
		"fixed_misplaced", rep.Fixed[Misplaced], "fixed_missing", rep.Fixed[Missing], "fixed_corrupt", rep.Fixed[Corrupt],
		"fixed_orphans", rep.Fixed[Orphan], "unresolved", rep.Unresolved, "duration_ms", s.o.Now().Sub(start).Milliseconds())
	return rep, nil
}

// maxID sorts after every canonical file id.
const maxID = "ffffffff-ffff-ffff-ffff-ffffffffffff"

// idFraction is how far id lies through the id space, from its first eight
// hex digits: file ids are random, so this is the share of files behind it.
func idFraction(id string) float64 {
	if len(id) < 8 {
		return 0
	}
	v, err := strconv.ParseUint(id[:8], 16, 32)
	if err != nil {
		return 0
	}
	return float64(v) / float64(1<<32)
}

// work is one file the reconciler must look at, and why.
type work struct {
	id    string
	kinds map[Kind]int
	extra []string // nodes holding an unlisted copy past its grace
}

// checkPage compares one page of files with what the nodes hold in the same
// id range and hands every file found wrong to the reconciler.
func (s *Sweeper) checkPage(ctx context.Context, page []meta.FileRecord, held map[string]map[string]wire.BlobInfo, rep *Report) {
	rg := s.o.Cluster.Ring()
	now := s.o.Now()
	listed := make(map[string]bool, len(page))
	var todo []work
	for _, rec := range page {
		listed[rec.ID] = true
		if rec.Status == meta.FilePending {
			// An upload in flight, or one the repair loop will settle: its
			// copies are not yet what its rows will say.
			s.forgetFile(rec.ID, held)
			continue
		}
		w := work{id: rec.ID, kinds: map[Kind]int{}}
		desired := rg.Preference(rec.ID, s.o.ReplicationFactor)
		if rec.Status != meta.FileDeleted && !reconcile.Placed(rec, desired) {
			w.kinds[Misplaced] = 1
		}
		for _, c := range rec.Replicas {
			blobs, known := held[c.NodeID]
			if !known || c.Status != meta.ReplicaActive {
				continue
			}
			b, ok := blobs[rec.ID]
			switch {
			case !ok:
				w.kinds[Missing]++
			case b.Checksum != rec.Checksum || b.Size != rec.SizeBytes:
				w.kinds[Corrupt]++
			}
		}
		for node, blobs := range held {
			if _, ok := blobs[rec.ID]; !ok {
				continue
			}
			if _, hasRow := rec.Replica(node); hasRow {
				s.forget(copyKey{rec.ID, node})
				continue
			}
			if s.orphanDue(copyKey{rec.ID, node}, now) {
				w.kinds[Orphan]++
				w.extra = append(w.extra, node)
			}
		}
		if w.kinds[Misplaced] > 0 && len(w.kinds) == 1 && !s.o.MoveMisplaced {
			continue
		}
		if rec.Status == meta.FileDeleted && len(w.kinds) == 0 {
			// The repair loop finishes deletes; only unlisted copies of a
			// deleted file are the sweep's to report.
			continue
		}
		if len(w.kinds) > 0 {
			slices.Sort(w.extra)
			todo = append(todo, w)
		}
	}
	// Blobs whose file is not in the metadata at all.
	var gone []copyKey
	for node, blobs := range held {
		for id := range blobs {
			if !listed[id] && s.orphanDue(copyKey{id, node}, now) {
				gone = append(gone, copyKey{id, node})
			}
		}
	}
	for _, w := range todo {
		for k, n := range w.kinds {
			rep.Found[k] += n
			s.o.Events.Found(k, n)
		}
	}
	rep.Found[Orphan] += len(gone)
	s.o.Events.Found(Orphan, len(gone))
	s.reconcileAll(ctx, todo, rep)
	s.removeGone(ctx, gone, rep)
}

// orphanDue records that key was seen with no copy row and reports whether
// it has been so for the grace period.
func (s *Sweeper) orphanDue(key copyKey, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, ok := s.seen[key]
	if !ok {
		if len(s.seen) < maxCandidates {
			s.seen[key] = sighting{first: now, pass: s.pass}
		}
		return false
	}
	sg.pass = s.pass
	s.seen[key] = sg
	return now.Sub(sg.first) >= s.o.OrphanGrace
}

// startPass numbers a new pass for the sightings it makes.
func (s *Sweeper) startPass() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pass++
}

// dropUnseen forgets the orphans the pass that just ended did not see: they
// are gone (removed elsewhere, or adopted), and a stale first sighting must
// not make a later one look old.
func (s *Sweeper) dropUnseen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, sg := range s.seen {
		if sg.pass != s.pass {
			delete(s.seen, k)
		}
	}
}

func (s *Sweeper) forget(key copyKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, key)
}

func (s *Sweeper) forgetFile(id string, held map[string]map[string]wire.BlobInfo) {
	for node := range held {
		s.forget(copyKey{id, node})
	}
}

// reconcileAll hands the files to the reconciler, Parallelism at a time.
func (s *Sweeper) reconcileAll(ctx context.Context, todo []work, rep *Report) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.o.Parallelism)
	for _, w := range todo {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := s.o.Reconciler.ReconcileWith(ctx, w.id, w.extra...)
			// Put right means left ACTIVE (or gone, for a deleted file): a
			// file that stays DEGRADED, say with fewer nodes on the ring
			// than its copies, is found again by the next pass.
			ok := err == nil && !out.Busy && out.Failures == 0 && (out.Status == meta.FileActive || out.Removed)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				rep.Unresolved++
				s.log.Info("anti-entropy could not put a file right yet; a later pass retries",
					"file", w.id, "found", kindsString(w.kinds), "busy", out.Busy, "failures", out.Failures, "err", err)
				return
			}
			for k, n := range w.kinds {
				rep.Fixed[k] += n
				s.o.Events.Fixed(k, n)
			}
			for _, node := range w.extra {
				s.forget(copyKey{w.id, node})
			}
			s.log.Info("anti-entropy put a file right", "file", w.id, "found", kindsString(w.kinds),
				"created", out.CopiesCreated, "removed", out.CopiesRemoved, "status", out.Status)
		})
	}
	wg.Wait()
}

// removeGone deletes blobs whose file the metadata does not hold, asking the
// store once more first: a file created since the page was read is then
// left alone, and its copy becomes an ordinary one.
func (s *Sweeper) removeGone(ctx context.Context, gone []copyKey, rep *Report) {
	for _, k := range gone {
		if ctx.Err() != nil {
			return
		}
		_, err := s.o.Store.GetFile(ctx, k.id)
		switch {
		case err == nil:
			s.forget(k)
			continue
		case !errs.Is(err, errs.NotFound):
			rep.Unresolved++
			continue
		}
		base, ok := s.o.Cluster.BaseURL(k.node)
		if !ok {
			rep.Unresolved++
			continue
		}
		if err := s.o.Nodes.Delete(ctx, base, k.id); err != nil {
			rep.Unresolved++
			s.log.Warn("could not remove an orphan blob", "node", k.node, "blob", k.id, "err", err)
			continue
		}
		s.forget(k)
		rep.Fixed[Orphan]++
		s.o.Events.Fixed(Orphan, 1)
		s.log.Info("removed an orphan blob: no file in the metadata owns it", "node", k.node, "blob", k.id,
			"unlisted_for_at_least", s.o.OrphanGrace)
	}
}

func kindsString(kinds map[Kind]int) string {
	var parts []string
	for _, k := range Kinds {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return fmt.Sprint(parts)
}
