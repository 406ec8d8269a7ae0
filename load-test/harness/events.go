package harness

import (
	"sync"
	"time"
)

// Event is one thing the harness did to the cluster.
type Event struct {
	At     time.Duration `json:"atNs"` // from the start of the run
	Action string        `json:"action"`
	Target string        `json:"target"`
	// Fault marks an event that disturbs the cluster (a kill, a join, a
	// leave) and so opens a new failure window; a restart does not.
	Fault bool          `json:"fault"`
	Took  time.Duration `json:"tookNs"`
	Err   string        `json:"error,omitempty"`
}

// EventLog records events against a Recorder's clock. It is safe for
// concurrent use.
type EventLog struct {
	rec    *Recorder
	mu     sync.Mutex
	events []Event
}

// NewEventLog returns an empty log on rec's clock.
func NewEventLog(rec *Recorder) *EventLog { return &EventLog{rec: rec} }

// Do runs act, records it as an event and returns its error.
func (l *EventLog) Do(action, target string, fault bool, act func() error) error {
	start := time.Now()
	err := act()
	ev := Event{At: l.rec.Since(start), Action: action, Target: target, Fault: fault, Took: time.Since(start)}
	if err != nil {
		ev.Err = err.Error()
	}
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
	return err
}

// Events returns every event so far, in order.
func (l *EventLog) Events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Window is the failures that followed one fault: every failed request that
// ended (failed) at or after the fault and before the next one. A request in
// flight when the fault struck belongs to it, though it started earlier.
type Window struct {
	// Fault describes the fault ("kill node-2"); "before any fault" for the
	// failures that came first.
	Fault string        `json:"fault"`
	At    time.Duration `json:"atNs"`
	// Failures counts the failed requests in the window; FirstStart and
	// LastEnd are the start of the first and the end of the last, from the
	// start of the run.
	Failures   int            `json:"failures"`
	ByKind     map[Kind]int   `json:"byKind,omitempty"`
	FirstStart time.Duration  `json:"firstStartNs"`
	LastEnd    time.Duration  `json:"lastEndNs"`
	Classes    map[string]int `json:"classes,omitempty"`
}

// Span is how long requests kept failing in the window: from the start of
// its first failed request to the end of its last; 0 when nothing failed.
func (w Window) Span() time.Duration {
	if w.Failures == 0 {
		return 0
	}
	return w.LastEnd - w.FirstStart
}

// Windows groups failures by the fault they followed.
// Windows without failures are kept, since "no failure after this fault" is
// a result too.
func Windows(failures []Failure, events []Event) []Window {
	var faults []Event
	for _, e := range events {
		if e.Fault {
			faults = append(faults, e)
		}
	}
	windows := []Window{{Fault: "before any fault"}}
	for _, f := range faults {
		windows = append(windows, Window{Fault: f.Action + " " + f.Target, At: f.At})
	}
	for _, f := range failures {
		i := 0 // the window of the last fault at or before the failure
		for j, fe := range faults {
			if fe.At <= f.End {
				i = j + 1
			}
		}
		w := &windows[i]
		if w.Failures == 0 || f.Start < w.FirstStart {
			w.FirstStart = f.Start
		}
		if w.Failures == 0 {
			w.ByKind = map[Kind]int{}
			w.Classes = map[string]int{}
		}
		w.Failures++
		w.ByKind[f.Kind]++
		w.Classes[f.Class]++
		w.LastEnd = max(w.LastEnd, f.End)
	}
	if windows[0].Failures == 0 {
		windows = windows[1:]
	}
	return windows
}
