// Package scrub is the storage node's anti-entropy scrubber: it re-reads every
// blob the node holds and hashes it against the checksum recorded when it was
// written, so that bit rot on a copy nobody downloads is found within a
// bounded time instead of on the day the other copies are lost too.
//
// One pass over the store is spread over a period (SCRUB_PERIOD): before each
// blob the scrubber waits until the pass is as far along as the elapsed part
// of the period says it should be, so the disk sees a steady trickle rather
// than a week's work at once. Independently of that schedule, every byte read
// takes its tokens from a token bucket (golang.org/x/time/rate) at
// SCRUB_BANDWIDTH, so the scrubber never reads faster than that, also when
// it is behind. Its position (the id of the last blob it hashed) and its
// counts are written atomically to a state file in the data directory, so a
// restarted node resumes its pass where it stopped.
//
// The blobs are walked through the blob store's interfaces only (Enumerate,
// Fetch, Usage), so every layout is scrubbed the same way. A blob whose bytes
// do not hash to their recorded checksum is reported to a Reporter (the
// coordinator, which checks the copy again and quarantines and rebuilds it as
// a failed verify does); reports that fail are kept in the state file and
// retried.
package scrub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/errs"
)

// Store is what the scrubber needs of a blob store.
type Store interface {
	blob.Enumerator
	blob.Fetcher
	blob.UsageReporter
}

// Finding is a copy whose bytes do not match its recorded checksum.
type Finding struct {
	ID   string
	Size int64
	// Stored is the recorded checksum ("" when the record is unreadable);
	// Actual the hash of the bytes read ("" when they could not be read).
	Stored, Actual string
	Reason         string
}

// Reporter hands a finding to whoever repairs it. A nil error means the
// finding was taken; an error means it is kept and offered again later.
type Reporter interface {
	ReportCorrupt(ctx context.Context, f Finding) error
}

// Clock is the scrubber's time. Tests give it a fake one whose Sleep moves
// the time on at once.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Defaults and bounds.
const (
	DefaultPeriod    = 7 * 24 * time.Hour
	DefaultBandwidth = 32 << 20 // bytes/s; see README ("Scrubbing")
	MinPeriod        = time.Second
	MinBandwidth     = 4 << 10
	// readChunk is the largest read, and so the token bucket's burst: the
	// scrubber is never more than one chunk ahead of its bandwidth.
	readChunk = 256 << 10
	// spreadShare is the part of the period a pass is spread over; the rest
	// is headroom for blobs written during the pass and for restarts.
	spreadShare = 0.9
	// saveEvery bounds the work a crash can make the scrubber do again.
	saveEvery = 5 * time.Second
	// pageSize is how many blobs one Enumerate call lists.
	pageSize = 256
	// maxUnreported bounds the findings kept while the coordinator cannot
	// be told; beyond it the oldest are dropped (the coordinator's verify and
	// verified downloads still find them).
	maxUnreported = 1000
	// retryReports is the pause between attempts to deliver findings.
	retryReports = 30 * time.Second
	// reportTimeout bounds one report.
	reportTimeout = 30 * time.Second
)

// Options configure a Scrubber.
type Options struct {
	Store Store
	// StatePath is the file the scrubber's position and counts are kept in.
	StatePath string
	// Period is the time within which every blob is hashed once.
	Period time.Duration
	// Bandwidth caps the bytes read per second.
	Bandwidth int64
	// Reporter receives findings; nil keeps them in the state file only.
	Reporter Reporter
	Logger   *slog.Logger
	// Clock defaults to the real one.
	Clock Clock
	// StartDelay is how long Run waits before it reads the store or its
	// state file.
	StartDelay time.Duration
}

// Status is the scrubber's progress, for the node's API and metrics.
type Status struct {
	PeriodStart time.Time
	Period      time.Duration
	Bandwidth   int64
	// CopiesScrubbed and BytesScrubbed count the blobs hashed in this period.
	CopiesScrubbed, BytesScrubbed int64
	// CopiesTotal and BytesTotal are what the store holds now.
	CopiesTotal, BytesTotal int64
	// LastFullPassAt is when the last complete pass ended; zero if none has.
	LastFullPassAt time.Time
	// LastPass is the last complete pass (nil before the first, and after a
	// state file written before passes were kept).
	LastPass *Pass
	// CorruptionsFound counts findings in this period; CorruptionsFoundTotal
	// over the life of the data directory.
	CorruptionsFound, CorruptionsFoundTotal int64
	// Unreported is the number of findings not yet taken by the Reporter.
	Unreported int
	// Running is true while this period's pass is not finished.
	Running bool
	// Cursor is the id of the last blob hashed in this pass.
	Cursor string
	// Behind is true when the rest of the pass cannot be read within the
	// period at Bandwidth.
	Behind bool
	// Counters of this process (they start at zero with it): blobs and bytes
	// hashed, bytes the token bucket granted, time spent waiting for it and
	// passes that ended after their period.
	HashedCopies, HashedBytes int64
	ThrottledBytes            int64
	ThrottleWait              time.Duration
	Overruns                  int64
}

// Scrubber walks a store. Run it once; Status may be called from any
// goroutine.
type Scrubber struct {
	o       Options
	log     *slog.Logger
	limiter *rate.Limiter

	mu     sync.Mutex
	st     state
	status Status // the process counters and flags not kept in st
	// lastReport is when findings were last offered to the Reporter.
	lastReport time.Time
	lastSave   time.Time
}

// New checks o and builds a scrubber; it reads no state until Run.
func New(o Options) (*Scrubber, error) {
	switch {
	case o.Store == nil:
		return nil, errs.E(errs.Invalid, "scrub: a store is required")
	case o.StatePath == "":
		return nil, errs.E(errs.Invalid, "scrub: a state path is required")
	case o.Period < MinPeriod:
		return nil, errs.E(errs.Invalid, "scrub: period %s is shorter than %s", o.Period, MinPeriod)
	case o.Bandwidth < MinBandwidth:
		return nil, errs.E(errs.Invalid, "scrub: bandwidth %d bytes/s is below %d", o.Bandwidth, MinBandwidth)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	burst := int(min(o.Bandwidth, readChunk))
	lim := rate.NewLimiter(rate.Limit(o.Bandwidth), burst)
	// The bucket starts empty: a restart must not buy a burst.
	lim.ReserveN(o.Clock.Now(), burst)
	return &Scrubber{o: o, log: o.Logger.With("component", "scrub"), limiter: lim}, nil
}

// Status returns the scrubber's progress.
func (s *Scrubber) Status(ctx context.Context) Status {
	s.mu.Lock()
	out := s.status
	st := s.st
	s.mu.Unlock()
	out.PeriodStart, out.Period, out.Bandwidth = st.PeriodStart, s.o.Period, s.o.Bandwidth
	out.CopiesScrubbed, out.BytesScrubbed = st.CopiesScrubbed, st.BytesScrubbed
	out.LastFullPassAt, out.LastPass = st.LastFullPassAt, st.LastPass
	out.CorruptionsFound, out.CorruptionsFoundTotal = st.CorruptionsFound, st.CorruptionsFoundTotal
	out.Unreported = len(st.Unreported)
	out.Running = !st.Complete && !st.PeriodStart.IsZero()
	out.Cursor = st.Cursor
	if u, err := s.o.Store.Usage(ctx); err == nil {
		out.CopiesTotal, out.BytesTotal = u.Blobs, u.BytesUsed
	}
	return out
}

// Run scrubs until ctx is done, then saves its position.
func (s *Scrubber) Run(ctx context.Context) {
	if s.o.StartDelay > 0 && s.o.Clock.Sleep(ctx, s.o.StartDelay) != nil {
		return
	}
	st, err := loadState(s.o.StatePath)
	if err != nil {
		// The state is a convenience: without it the pass starts over.
		s.log.Warn("scrub state unreadable; starting a new pass", "path", s.o.StatePath, "err", err)
		st = state{}
	}
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	if st.PeriodStart.IsZero() {
		s.newPeriod()
	} else {
		s.log.Info("scrub resumed", "period_start", st.PeriodStart, "cursor", st.Cursor,
			"copies_scrubbed", st.CopiesScrubbed, "complete", st.Complete)
	}
	s.log.Info("scrubber running", "period", s.o.Period, "bandwidth_bytes_per_second", s.o.Bandwidth)
	for ctx.Err() == nil {
		s.mu.Lock()
		complete, next := s.st.Complete, s.st.PeriodStart.Add(s.o.Period)
		s.mu.Unlock()
		if complete {
			if err := s.idle(ctx, next); err != nil {
				break
			}
			s.newPeriod()
			continue
		}
		s.pass(ctx)
	}
	s.save()
}

// idle waits for the next period, delivering findings meanwhile.
func (s *Scrubber) idle(ctx context.Context, next time.Time) error {
	for {
		s.deliver(ctx)
		s.mu.Lock()
		left := len(s.st.Unreported) > 0 && s.o.Reporter != nil
		s.mu.Unlock()
		until := next
		if left {
			until = minTime(next, s.o.Clock.Now().Add(retryReports))
		}
		if err := s.sleepUntil(ctx, until); err != nil {
			return err
		}
		if !s.o.Clock.Now().Before(next) {
			return nil
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// newPeriod starts a period and its pass now.
func (s *Scrubber) newPeriod() {
	now := s.o.Clock.Now()
	s.mu.Lock()
	s.st.newPeriod(now)
	s.mu.Unlock()
	s.save()
	s.log.Info("scrub pass started", "period_start", now, "period", s.o.Period)
}

// pass hashes blobs after the cursor until the store has none left or ctx
// is done.
func (s *Scrubber) pass(ctx context.Context) {
	buf := make([]byte, readChunk)
	lastProgress := s.o.Clock.Now()
	for ctx.Err() == nil {
		s.mu.Lock()
		cursor := s.st.Cursor
		s.mu.Unlock()
		page, err := s.o.Store.Enumerate(ctx, cursor, pageSize)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("scrub cannot list blobs; retrying", "after", cursor, "err", err)
				_ = s.o.Clock.Sleep(ctx, saveEvery)
			}
			continue
		}
		if len(page) == 0 {
			s.finishPass()
			return
		}
		for _, info := range page {
			if err := s.pace(ctx); err != nil {
				return
			}
			if err := s.scrubOne(ctx, info.ID, buf); err != nil {
				return
			}
			s.deliver(ctx)
			if now := s.o.Clock.Now(); now.Sub(lastProgress) >= time.Minute {
				lastProgress = now
				st := s.Status(ctx)
				s.log.Info("scrub progress", "copies_scrubbed", st.CopiesScrubbed, "copies_total", st.CopiesTotal,
					"bytes_scrubbed", st.BytesScrubbed, "bytes_total", st.BytesTotal, "corruptions", st.CorruptionsFound)
			}
		}
	}
}

// finishPass records a complete pass.
func (s *Scrubber) finishPass() {
	now := s.o.Clock.Now()
	s.mu.Lock()
	s.st.Complete, s.st.Cursor, s.st.LastFullPassAt = true, "", now
	s.st.LastPass = &Pass{Start: s.st.PeriodStart, End: now, Copies: s.st.CopiesScrubbed,
		Bytes: s.st.BytesScrubbed, CorruptionsFound: s.st.CorruptionsFound}
	overran := now.After(s.st.PeriodStart.Add(s.o.Period))
	if overran {
		s.status.Overruns++
	}
	s.status.Behind = false
	st := s.st
	s.mu.Unlock()
	s.save()
	args := []any{"copies", st.CopiesScrubbed, "bytes", st.BytesScrubbed, "corruptions", st.CorruptionsFound,
		"took", now.Sub(st.PeriodStart)}
	if overran {
		s.log.Warn("scrub pass finished after its period; raise SCRUB_BANDWIDTH or SCRUB_PERIOD", args...)
		return
	}
	s.log.Info("scrub pass finished", args...)
}

// pace waits until the pass is no further along than its share of the
// period, and notes whether the rest can still be read in time.
func (s *Scrubber) pace(ctx context.Context) error {
	u, err := s.o.Store.Usage(ctx)
	if err != nil {
		return nil // no totals: the bandwidth alone paces this blob
	}
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	now := s.o.Clock.Now()
	end := st.PeriodStart.Add(s.o.Period)
	remaining := max(u.BytesUsed-st.BytesScrubbed, 0)
	need := time.Duration(float64(remaining) / float64(s.o.Bandwidth) * float64(time.Second))
	behind := now.Add(need).After(end)
	s.mu.Lock()
	was := s.status.Behind
	s.status.Behind = behind
	s.mu.Unlock()
	if behind && !was {
		s.log.Warn("scrub pass cannot finish within SCRUB_PERIOD at SCRUB_BANDWIDTH", "bytes_left", remaining,
			"needs", need.Round(time.Second), "period_ends", end, "bandwidth_bytes_per_second", s.o.Bandwidth)
	}
	done := 0.0
	if u.BytesUsed > 0 {
		done = float64(st.BytesScrubbed) / float64(u.BytesUsed)
	}
	if u.Blobs > 0 {
		done = max(done, float64(st.CopiesScrubbed)/float64(u.Blobs))
	}
	done = min(done, 1)
	wake := st.PeriodStart.Add(time.Duration(done * spreadShare * float64(s.o.Period)))
	if !wake.After(now) {
		return nil
	}
	// No save before a long wait: the next blob's saves it, and a crash in
	// between costs at most what was hashed since the last save.
	return s.sleepUntil(ctx, wake)
}

func (s *Scrubber) sleepUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(s.o.Clock.Now())
	if d <= 0 {
		return ctx.Err()
	}
	return s.o.Clock.Sleep(ctx, d)
}

// scrubOne hashes one blob and records the result. It fails only when ctx
// is done; a blob that cannot be read is a finding.
func (s *Scrubber) scrubOne(ctx context.Context, id string, buf []byte) error {
	rc, info, err := s.o.Store.Fetch(ctx, id)
	switch {
	case errs.Is(err, errs.NotFound): // removed since it was listed
		s.mu.Lock()
		s.st.Cursor = id
		s.mu.Unlock()
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errs.Is(err, errs.Corrupt):
		s.advance(id, 0, &Finding{ID: id, Reason: "recorded checksum unreadable: " + err.Error()})
		return nil
	case err != nil:
		s.advance(id, 0, &Finding{ID: id, Reason: "cannot open: " + err.Error()})
		return nil
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, &throttled{ctx: ctx, r: rc, s: s}, buf)
	rc.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f := &Finding{ID: id, Size: info.Size, Stored: info.Checksum}
	switch {
	case err != nil:
		f.Reason = "read failed: " + err.Error()
	case n != info.Size:
		f.Reason = fmt.Sprintf("read %d bytes of %d", n, info.Size)
	default:
		f.Actual = hex.EncodeToString(h.Sum(nil))
		if f.Actual == info.Checksum && info.Checksum != "" {
			f = nil
		} else {
			f.Reason = "bytes do not match the recorded checksum"
		}
	}
	s.advance(id, n, f)
	return nil
}

// advance moves the cursor past id, counting n bytes hashed and a finding.
func (s *Scrubber) advance(id string, n int64, f *Finding) {
	s.mu.Lock()
	s.st.Cursor = id
	s.st.CopiesScrubbed++
	s.st.BytesScrubbed += n
	s.status.HashedCopies++
	s.status.HashedBytes += n
	if f != nil {
		s.st.found(*f)
	}
	due := s.o.Clock.Now().Sub(s.lastSave) >= saveEvery
	s.mu.Unlock()
	if f != nil {
		s.log.Error("scrub found a corrupt copy", "id", f.ID, "stored", f.Stored, "actual", f.Actual, "reason", f.Reason)
		s.save() // a finding is worth a write of its own
		return
	}
	if due {
		s.save()
	}
}

// deliver offers the findings not yet taken to the Reporter, at most every
// retryReports after a failure.
func (s *Scrubber) deliver(ctx context.Context) {
	if s.o.Reporter == nil {
		return
	}
	s.mu.Lock()
	pending := append([]Finding(nil), s.st.Unreported...)
	wait := !s.lastReport.IsZero() && s.o.Clock.Now().Sub(s.lastReport) < retryReports
	s.mu.Unlock()
	if len(pending) == 0 || wait {
		return
	}
	var taken []string
	var failed error
	for _, f := range pending {
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		err := s.o.Reporter.ReportCorrupt(rctx, f)
		cancel()
		if err != nil {
			failed = err
			break
		}
		taken = append(taken, f.ID)
	}
	s.mu.Lock()
	s.st.taken(taken)
	if failed != nil {
		s.lastReport = s.o.Clock.Now()
	} else {
		s.lastReport = time.Time{}
	}
	left := len(s.st.Unreported)
	s.mu.Unlock()
	if len(taken) > 0 {
		s.log.Info("corrupt copies reported", "ids", taken)
		s.save()
	}
	if failed != nil && ctx.Err() == nil {
		s.log.Warn("cannot report corrupt copies; will retry", "left", left, "every", retryReports, "err", failed)
	}
}

// save writes the state; a failure is logged and the next save tries again.
func (s *Scrubber) save() {
	s.mu.Lock()
	st := s.st
	st.Unreported = append([]Finding(nil), st.Unreported...)
	s.lastSave = s.o.Clock.Now()
	s.mu.Unlock()
	if err := st.save(s.o.StatePath); err != nil {
		s.log.Warn("cannot save the scrub state; a restart would repeat work", "path", s.o.StatePath, "err", err)
	}
}

// throttled takes every byte read from the limiter, waiting on the clock as
// it says.
type throttled struct {
	ctx context.Context
	r   io.Reader
	s   *Scrubber
}

func (t *throttled) Read(p []byte) (int, error) {
	if len(p) > t.s.limiter.Burst() {
		p = p[:t.s.limiter.Burst()]
	}
	n, err := t.r.Read(p)
	if n > 0 {
		if werr := t.s.take(t.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// take reserves n tokens and sleeps until they are due.
func (s *Scrubber) take(ctx context.Context, n int) error {
	now := s.o.Clock.Now()
	r := s.limiter.ReserveN(now, n)
	if !r.OK() {
		return errors.New("scrub: a read exceeded the token bucket's burst") // cannot happen: reads are capped to it
	}
	d := r.DelayFrom(now)
	s.mu.Lock()
	s.status.ThrottledBytes += int64(n)
	s.status.ThrottleWait += d
	s.mu.Unlock()
	if d <= 0 {
		return nil
	}
	return s.o.Clock.Sleep(ctx, d)
}
