// Package ops keeps the coordinator's record of its long-running operations —
// rebalances, drains, repairs and scrubs — while they run and for a while
// after, for GET /api/cluster/operations and the console.
//
// The record lives in this process's memory only: each coordinator knows the
// operations it runs itself, a restart forgets the history, and the history
// is bounded (the oldest finished operation goes first). Operations are
// counted as they go by their owner (Op.Add) and ended once (Op.Finish);
// everything else (rate, ETA) is derived when asked. The history is bounded
// per kind, so that repair passes, which come every REPAIR_INTERVAL, cannot
// push the last drain out of it.
package ops

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Kind names what an operation does.
type Kind string

// The kinds of API.md, "Operations".
const (
	Rebalance Kind = "REBALANCE"
	Drain     Kind = "DRAIN"
	Repair    Kind = "REPAIR"
	Scrub     Kind = "SCRUB"
)

// State is where an operation stands.
type State string

// The states of an operation. FAILED means the operation ended without doing
// all its work (an error, skipped files, a timeout); its report says why.
const (
	Running State = "RUNNING"
	Done    State = "DONE"
	Failed  State = "FAILED"
)

// Operation is one operation as the API shows it.
type Operation struct {
	ID      string `json:"id"`
	Kind    Kind   `json:"kind"`
	Trigger string `json:"trigger"`
	NodeID  string `json:"nodeId,omitempty"`
	State   State  `json:"state"`
	// Done and Total count the operation's units of work (files visited);
	// Total may grow while an operation that discovers its work runs.
	Done           int64   `json:"done"`
	Total          int64   `json:"total"`
	BytesDone      int64   `json:"bytesDone"`
	BytesPerSecond float64 `json:"bytesPerSecond"`
	// EtaSeconds extrapolates the time left from the work done so far; nil
	// before the first unit is done and once the operation has ended.
	EtaSeconds *float64   `json:"etaSeconds"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	// Report is the operation's final report, when it has ended.
	Report any `json:"report,omitempty"`
}

// DefaultHistory is how many finished operations of each kind a Tracker
// keeps.
const DefaultHistory = 100

// Tracker records operations. The nil *Tracker records nothing, so code that
// runs without one needs no checks.
type Tracker struct {
	history int
	now     func() time.Time
	seq     atomic.Int64
	// prefix tells this process's ids from a predecessor's.
	prefix string

	mu      sync.Mutex
	running []*Op
	recent  []Operation // oldest first
}

// Options configures a Tracker.
type Options struct {
	// History bounds the finished operations kept of each kind
	// (DefaultHistory).
	History int
	// Now is the clock (time.Now).
	Now func() time.Time
}

// New returns a Tracker.
func New(o Options) *Tracker {
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Tracker{history: o.History, now: o.Now, prefix: strconv.FormatInt(o.Now().UnixMilli(), 36) + "-"}
}

// Op is a running operation, counted by its owner.
type Op struct {
	t       *Tracker
	id      string
	kind    Kind
	trigger string
	node    string
	start   time.Time
	done    atomic.Int64
	total   atomic.Int64
	bytes   atomic.Int64
	ended   atomic.Bool
}

// Start records a new running operation with total units of work.
func (t *Tracker) Start(kind Kind, trigger, node string, total int) *Op {
	if t == nil {
		return nil
	}
	op := &Op{t: t, id: t.prefix + strconv.FormatInt(t.seq.Add(1), 10), kind: kind, trigger: trigger, node: node, start: t.now()}
	op.total.Store(int64(total))
	t.mu.Lock()
	t.running = append(t.running, op)
	t.mu.Unlock()
	return op
}

// Add counts units of work done and bytes moved.
func (o *Op) Add(units int, bytes int64) {
	if o == nil {
		return
	}
	o.done.Add(int64(units))
	o.bytes.Add(bytes)
}

// Grow adds units of work found while the operation runs.
func (o *Op) Grow(units int) {
	if o != nil {
		o.total.Add(int64(units))
	}
}

// Finish ends the operation, DONE when ok and FAILED otherwise, with its
// report. Only the first call counts.
func (o *Op) Finish(ok bool, report any) {
	if o == nil || !o.ended.CompareAndSwap(false, true) {
		return
	}
	t := o.t
	end := t.now()
	snap := o.at(end)
	snap.EtaSeconds = nil
	snap.State, snap.FinishedAt, snap.Report = Failed, &end, report
	if ok {
		snap.State = Done
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = slices.DeleteFunc(t.running, func(r *Op) bool { return r == o })
	t.recent = append(t.recent, snap)
	kept := 0
	for _, r := range t.recent {
		if r.Kind == o.kind {
			kept++
		}
	}
	if kept > t.history {
		oldest := slices.IndexFunc(t.recent, func(r Operation) bool { return r.Kind == o.kind })
		t.recent = slices.Delete(t.recent, oldest, oldest+1)
	}
}

// at is the operation as of now, RUNNING.
func (o *Op) at(now time.Time) Operation {
	s := Operation{
		ID: o.id, Kind: o.kind, Trigger: o.trigger, NodeID: o.node, State: Running,
		Done: o.done.Load(), Total: o.total.Load(), BytesDone: o.bytes.Load(), StartedAt: o.start.UTC(),
	}
	elapsed := now.Sub(o.start).Seconds()
	if elapsed > 0 {
		s.BytesPerSecond = float64(s.BytesDone) / elapsed
	}
	if s.Done > 0 {
		eta := max(0, elapsed*float64(s.Total-s.Done)/float64(s.Done))
		s.EtaSeconds = &eta
	}
	return s
}

// Snapshot is the tracker's operations: the running ones oldest first, the
// finished ones newest first.
type Snapshot struct {
	Running []Operation `json:"running"`
	Recent  []Operation `json:"recent"`
}

// List returns the operations as of now.
func (t *Tracker) List() Snapshot {
	out := Snapshot{Running: []Operation{}, Recent: []Operation{}}
	if t == nil {
		return out
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, op := range t.running {
		out.Running = append(out.Running, op.at(now))
	}
	for i := len(t.recent) - 1; i >= 0; i-- {
		out.Recent = append(out.Recent, t.recent[i])
	}
	return out
}

// RunningOn returns the running operation of kind on node, the latest if
// there are several.
func (t *Tracker) RunningOn(kind Kind, node string) (Operation, bool) {
	if t == nil {
		return Operation{}, false
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.running) - 1; i >= 0; i-- {
		if op := t.running[i]; op.kind == kind && op.node == node {
			return op.at(now), true
		}
	}
	return Operation{}, false
}

// failure is the report of an operation that ended in an error.
type failure struct {
	Error string `json:"error"`
}

// Fail ends the operation FAILED with err as its report.
func (o *Op) Fail(err error) { o.Finish(false, failure{Error: err.Error()}) }
