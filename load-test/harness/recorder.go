package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

// Kind names a sort of request the harness makes.
type Kind string

// The kinds of request.
const (
	KindUpload    Kind = "upload"
	KindDownload  Kind = "download"
	KindFinalRead Kind = "final-read" // the closing pass over every acknowledged file
	KindMetadata  Kind = "metadata"
	KindVerify    Kind = "verify"
)

// maxFailureLog bounds the failures kept one by one for the failure windows;
// beyond it failures are still counted, only not placed in time.
const maxFailureLog = 200_000

// Failure is one failed request, placed in time from the start of the run.
type Failure struct {
	Kind  Kind          `json:"kind"`
	Start time.Duration `json:"startNs"`
	End   time.Duration `json:"endNs"`
	Class string        `json:"class"`
}

// Violation is an answer that breaks a promise of the system rather than a
// request that failed: an acknowledged file answered 404, or bytes that differ
// from what was uploaded delivered as a successful download.
type Violation struct {
	Kind   Kind          `json:"kind"`
	At     time.Duration `json:"atNs"`
	FileID string        `json:"fileId"`
	What   string        `json:"what"`
}

type kindStats struct {
	ok, failed *Histogram
	classes    map[string]uint64
	bytes      int64 // bytes byte-compared (downloads) or sent (uploads), successful requests only
	servedBy   map[string]uint64
}

// Recorder collects the outcome of every request of a run. It is safe for
// concurrent use.
type Recorder struct {
	start time.Time

	mu         sync.Mutex
	kinds      map[Kind]*kindStats
	failures   []Failure
	unlogged   uint64 // failures past maxFailureLog
	violations []Violation
}

// NewRecorder returns a recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now(), kinds: make(map[Kind]*kindStats)}
}

// Since is the time elapsed from the start of the run to t.
func (r *Recorder) Since(t time.Time) time.Duration { return t.Sub(r.start) }

// Start is when the run began.
func (r *Recorder) Start() time.Time { return r.start }

func (r *Recorder) statsLocked(k Kind) *kindStats {
	s := r.kinds[k]
	if s == nil {
		s = &kindStats{ok: NewHistogram(), failed: NewHistogram(), classes: map[string]uint64{}, servedBy: map[string]uint64{}}
		r.kinds[k] = s
	}
	return s
}

// OK records a successful request of kind k that began at start and moved
// n bytes; servedBy names the node that served a download ("" otherwise).
func (r *Recorder) OK(k Kind, start time.Time, n int64, servedBy string) {
	d := time.Since(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.statsLocked(k)
	s.ok.Record(d)
	s.bytes += n
	if servedBy != "" {
		s.servedBy[servedBy]++
	}
}

// Fail records a failed request of kind k that began at start, classified
// by Classify(err).
func (r *Recorder) Fail(k Kind, start time.Time, err error) {
	end := time.Now()
	class := Classify(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.statsLocked(k)
	s.failed.Record(end.Sub(start))
	s.classes[class]++
	if len(r.failures) < maxFailureLog {
		r.failures = append(r.failures, Failure{Kind: k, Start: start.Sub(r.start), End: end.Sub(r.start), Class: class})
	} else {
		r.unlogged++
	}
}

// Violate records a broken promise about file id.
func (r *Recorder) Violate(k Kind, id, what string) {
	at := time.Since(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, Violation{Kind: k, At: at, FileID: id, What: what})
}

// Classify names the sort of a request's failure in a few stable words, so
// that failures can be counted by cause: "503 STORAGE_UNAVAILABLE", "no
// answer: connection refused", "corrupt: …", "timeout".
func Classify(err error) string {
	var apiErr *client.APIError
	var connErr *client.ConnError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &apiErr):
		if apiErr.Code == "" {
			return fmt.Sprintf("%d", apiErr.Status)
		}
		return fmt.Sprintf("%d %s", apiErr.Status, apiErr.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &connErr):
		return "no answer: " + netCause(connErr.Err)
	case errs.KindOf(err) == errs.Corrupt:
		return "corrupt"
	case errs.KindOf(err) == errs.Unavailable:
		// The client's own wording for a body that broke off or came short.
		return "transfer broke off"
	}
	return "other: " + firstLine(err.Error(), 80)
}

func netCause(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return firstLine(err.Error(), 60)
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// KindReport is the figures of one kind of request.
type KindReport struct {
	Kind     Kind              `json:"kind"`
	Requests uint64            `json:"requests"`
	Failures uint64            `json:"failures"`
	OK       Summary           `json:"okLatency"`
	Failed   Summary           `json:"failedLatency"`
	Bytes    int64             `json:"bytes"`
	Classes  map[string]uint64 `json:"failuresByClass,omitempty"`
	ServedBy map[string]uint64 `json:"servedByNode,omitempty"`
}

// Snapshot is everything a Recorder has seen so far.
type Snapshot struct {
	Elapsed    time.Duration
	Kinds      []KindReport
	Failures   []Failure // in order of start
	Unlogged   uint64
	Violations []Violation
}

// Snapshot copies the recorder's figures.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	snap := Snapshot{Elapsed: time.Since(r.start), Unlogged: r.unlogged}
	for k, s := range r.kinds {
		kr := KindReport{
			Kind: k, Requests: s.ok.Count() + s.failed.Count(), Failures: s.failed.Count(),
			OK: s.ok.Summary(), Failed: s.failed.Summary(), Bytes: s.bytes,
			Classes: map[string]uint64{}, ServedBy: map[string]uint64{},
		}
		for c, n := range s.classes {
			kr.Classes[c] = n
		}
		for c, n := range s.servedBy {
			kr.ServedBy[c] = n
		}
		snap.Kinds = append(snap.Kinds, kr)
	}
	order := map[Kind]int{KindUpload: 0, KindDownload: 1, KindMetadata: 2, KindVerify: 3, KindFinalRead: 4}
	sort.Slice(snap.Kinds, func(i, j int) bool { return order[snap.Kinds[i].Kind] < order[snap.Kinds[j].Kind] })
	snap.Failures = append([]Failure(nil), r.failures...)
	sort.Slice(snap.Failures, func(i, j int) bool { return snap.Failures[i].Start < snap.Failures[j].Start })
	snap.Violations = append([]Violation(nil), r.violations...)
	return snap
}
