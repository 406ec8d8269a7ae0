package harness

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Exit is a process of the cluster that ended without being asked to.
type Exit struct {
	Name string `json:"name"`
	Err  string `json:"error"`
}

// Report is everything a run found.
type Report struct {
	Mode           string           `json:"mode"`
	Plan           string           `json:"plan"`
	Duration       time.Duration    `json:"durationNs"` // asked for
	Elapsed        time.Duration    `json:"elapsedNs"`  // the traffic's actual run
	Traffic        TrafficOptions   `json:"traffic"`
	CoordinatorEnv []string         `json:"coordinatorEnv,omitempty"`
	NodeEnv        []string         `json:"nodeEnv,omitempty"`
	DataDir        string           `json:"dataDir,omitempty"`
	Acked          int              `json:"acknowledged"`
	AckedByStatus  map[string]int   `json:"acknowledgedByStatus"`
	Kinds          []KindReport     `json:"kinds"`
	Windows        []Window         `json:"failureWindows"`
	Events         []Event          `json:"events"`
	Violations     []Violation      `json:"violations"`
	Unlogged       uint64           `json:"failuresNotPlacedInTime,omitempty"`
	Final          FinalReport      `json:"final"`
	Invariant      *InvariantReport `json:"invariant,omitempty"`
	Repair         *RepairReport    `json:"repair,omitempty"`
	Exits          []Exit           `json:"unexpectedExits"`
	Notes          []string         `json:"notes,omitempty"`

	mu sync.Mutex // guards Exits while the cluster runs
}

func (r *Report) addExit(name string, err error) {
	msg := "exit status 0"
	if err != nil {
		msg = err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Exits = append(r.Exits, Exit{Name: name, Err: msg})
}

func (r *Report) fill(snap Snapshot, trafficElapsed time.Duration, events []Event, acked []Acked) {
	r.Elapsed = trafficElapsed
	r.Kinds = snap.Kinds
	r.Events = events
	r.Violations = snap.Violations
	r.Unlogged = snap.Unlogged
	r.Acked = len(acked)
	r.AckedByStatus = map[string]int{}
	for _, a := range acked {
		r.AckedByStatus[a.Status]++
	}
	// Only the traffic's failures make windows: the closing passes run on
	// a cluster already put back together.
	var traffic []Failure
	for _, f := range snap.Failures {
		if f.Kind == KindUpload || f.Kind == KindDownload {
			traffic = append(traffic, f)
		}
	}
	r.Windows = Windows(traffic, events)
}

// OK reports whether the run found nothing wrong: every fault of the plan
// was made, every acknowledged file read back intact, no promise was broken
// during the run, no process crashed, and (when checked) the cluster settled
// on the invariant by itself and the repaired state is clean.
func (r *Report) OK() bool {
	r.mu.Lock()
	exits := len(r.Exits)
	r.mu.Unlock()
	return len(r.FailedEvents()) == 0 && r.Final.OK() && len(r.Violations) == 0 && exits == 0 &&
		(r.Invariant == nil || r.Invariant.OK) && (r.Repair == nil || r.Repair.OK())
}

// FailedEvents are the faults and restarts that could not be made (or were
// skipped): a run with any of them did not test what its plan says.
func (r *Report) FailedEvents() []Event {
	var failed []Event
	for _, e := range r.Events {
		if e.Err != "" {
			failed = append(failed, e)
		}
	}
	return failed
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	t := r.Traffic
	p("")
	p("== dfs load-test report ==")
	p("cluster:  %s", r.Mode)
	if len(r.CoordinatorEnv) > 0 {
		p("          coordinator env %s", strings.Join(r.CoordinatorEnv, " "))
		p("          node env %s", strings.Join(r.NodeEnv, " "))
	}
	p("faults:   %s", orNone(r.Plan))
	p("load:     %d workers, each a closed loop of 1 upload (%s–%s, uniform) then %d downloads of random acknowledged files;",
		t.Workers, bytesText(t.MinSize), bytesText(t.MaxSize), t.ReadsPerWrite)
	p("          %s pause after a failed request, %s timeout per request, seed %d", t.FailurePause, t.RequestTimeout, t.Seed)
	byStatus := map[string]uint64{}
	for s, n := range r.AckedByStatus {
		byStatus[s] = uint64(n)
	}
	p("ran:      %s of traffic; %d files acknowledged with a 201 (%s)", r.Elapsed.Round(time.Millisecond), r.Acked, countsText(byStatus))
	p("")

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\trequests\tfailed\tsucceeded\tok p50\tok p99\tok max\tfailed p50\tfailed max\tbytes ok\t")
	for _, k := range r.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.Kind, k.Requests, k.Failures,
			percent(k.Requests-k.Failures, k.Requests), msText(k.OK.P50), msText(k.OK.P99), msText(k.OK.Max),
			msText(k.Failed.P50), msText(k.Failed.Max), bytesText(k.Bytes))
	}
	tw.Flush()
	p("(latencies in ms; percentiles within 2 %%; 'succeeded' holds only under the load and faults above)")

	for _, k := range r.Kinds {
		if len(k.Classes) > 0 {
			p("%s failures by cause: %s", k.Kind, countsText(k.Classes))
		}
	}
	for _, k := range r.Kinds {
		if k.Kind == KindDownload && len(k.ServedBy) > 0 {
			p("downloads served by: %s", countsText(k.ServedBy))
		}
	}

	p("")
	p("events (from the start of the traffic):")
	if len(r.Events) == 0 {
		p("  none")
	}
	for _, e := range r.Events {
		line := fmt.Sprintf("  %9s  %s %s (took %s)", offset(e.At), e.Action, e.Target, e.Took.Round(time.Millisecond))
		if e.Err != "" {
			line += ": " + e.Err
		}
		p("%s", line)
	}
	p("")
	p("failure windows (traffic only; from the start of the first failed request to the end of the last, per fault):")
	if len(r.Windows) == 0 {
		p("  no fault")
	}
	for _, win := range r.Windows {
		if win.Failures == 0 {
			p("  %-28s no failed request", win.Fault+" @"+offset(win.At))
			continue
		}
		kinds := map[string]uint64{}
		for k, n := range win.ByKind {
			kinds[string(k)] = uint64(n)
		}
		classes := map[string]uint64{}
		for c, n := range win.Classes {
			classes[c] = uint64(n)
		}
		p("  %-28s %d failed (%s) from %s to %s: %s; %s", win.Fault+" @"+offset(win.At), win.Failures, countsText(kinds),
			offset(win.FirstStart), offset(win.LastEnd), win.Span().Round(time.Millisecond), countsText(classes))
	}
	if r.Unlogged > 0 {
		p("  (%d further failures were counted but not placed in time)", r.Unlogged)
	}

	p("")
	f := r.Final
	p("final pass: %d acknowledged files read back: %d intact (%s byte-compared), %d lost, %d corrupt, %d unreadable; %d needed a retry",
		f.Checked, f.Intact, bytesText(f.Bytes), f.Lost, f.Corrupt, f.Unreadable, f.Retried)
	for _, b := range f.Bad {
		p("  %s", b)
	}
	if inv := r.Invariant; inv != nil {
		verdict := "held"
		if !inv.OK {
			verdict = "NOT reached"
		}
		p("invariant (placement, copies on disk, orphans; no rebalance asked for): %s after %s, %d checks",
			verdict, inv.Waited.Round(time.Millisecond), inv.Polls)
		if inv.Summary != "" {
			p("  %s", inv.Summary)
		}
		if inv.Error != "" {
			p("  the last check failed: %s", inv.Error)
		}
		for _, v := range inv.Violations {
			p("  %s", v)
		}
	}
	if rp := r.Repair; rp != nil {
		if rp.Rebalance != nil {
			rb := rp.Rebalance
			p("repair pass: rebalance scanned %d, affected %d, created %d copies, removed %d, failures %d, in %d ms",
				rb.FilesScanned, rb.FilesAffected, rb.CopiesCreated, rb.CopiesRemoved, rb.Failures, rb.DurationMs)
		} else {
			p("repair pass: rebalance failed: %s", rp.RebalanceError)
		}
		p("  ACTIVE with %d active copies: %d of %d when the rebalance answered, %d after %s",
			rp.RF, rp.ActiveAfterRebalance, rp.Files, rp.Active, rp.Waited.Round(time.Millisecond))
		p("  verify: %d of %d files with %d copies OK (none rebuilt by the verify itself)", rp.Verified, rp.Files, rp.RF)
		for _, b := range rp.Bad {
			p("  %s", b)
		}
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	p("")
	if len(r.Violations) == 0 {
		p("broken promises during the run: none")
	} else {
		p("broken promises during the run: %d", len(r.Violations))
		for i, v := range r.Violations {
			if i == maxBadListed {
				p("  …")
				break
			}
			p("  %s %s %s: %s", offset(v.At), v.Kind, v.FileID, v.What)
		}
	}
	if failed := r.FailedEvents(); len(failed) > 0 {
		p("faults or restarts that could not be made: %d (see the events above)", len(failed))
	}
	if len(r.Exits) == 0 {
		p("processes that exited unasked: none")
	}
	for _, e := range r.Exits {
		p("process exited unasked: %s: %s", e.Name, e.Err)
	}
	if r.OK() {
		p("RESULT: PASS — every acknowledged upload was read back byte-identical")
	} else {
		p("RESULT: FAIL")
	}
	if r.DataDir != "" {
		p("(cluster data and logs kept in %s)", r.DataDir)
	}
}

func offset(d time.Duration) string { return fmt.Sprintf("+%.3fs", d.Seconds()) }

func msText(v float64) string {
	if v == 0 {
		return "-"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func percent(n, of uint64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f%%", 100*float64(n)/float64(of))
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// countsText lists counts largest first: "a 12, b 3".
func countsText(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
