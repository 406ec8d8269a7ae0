package scrub

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/errs"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock moves on by exactly what the scrubber sleeps, and cancels the
// run when the time would pass stopAt.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	stopAt time.Time
	cancel context.CancelFunc
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.Add(d).After(c.stopAt) {
		c.now = c.stopAt
		c.cancel()
		return context.Canceled
	}
	c.now = c.now.Add(d)
	return ctx.Err()
}

// fetch is one blob read: which, and when on the fake clock.
type fetch struct {
	id string
	at time.Time
}

// recordingStore notes every Fetch.
type recordingStore struct {
	*blob.Memory
	clock   *fakeClock
	mu      sync.Mutex
	fetches []fetch
	// removed is a blob that is listed but gone by the time it is read.
	removed string
}

func (r *recordingStore) Fetch(ctx context.Context, id string) (io.ReadSeekCloser, blob.Info, error) {
	r.mu.Lock()
	r.fetches = append(r.fetches, fetch{id, r.clock.Now()})
	r.mu.Unlock()
	if id == r.removed {
		return nil, blob.Info{}, errs.E(errs.NotFound, "blob %s not found", id)
	}
	return r.Memory.Fetch(ctx, id)
}

func (r *recordingStore) fetched() []fetch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]fetch(nil), r.fetches...)
}

// fill writes n random blobs of size bytes and returns their ids in order.
func fill(t *testing.T, m *blob.Memory, n, size int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		sum := sha256.Sum256(b)
		ids[i] = fmt.Sprintf("blob-%04d", i)
		_, _, err := m.Receive(context.Background(), ids[i], hex.EncodeToString(sum[:]), int64(size), bytes.NewReader(b))
		require.NoError(t, err)
	}
	return ids
}

type reporter struct {
	mu    sync.Mutex
	got   []Finding
	fails int // answer this many calls with an error first
}

func (r *reporter) ReportCorrupt(_ context.Context, f Finding) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fails > 0 {
		r.fails--
		return errors.New("coordinator away")
	}
	r.got = append(r.got, f)
	return nil
}

func (r *reporter) findings() []Finding {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Finding(nil), r.got...)
}

type harness struct {
	t      *testing.T
	store  *recordingStore
	clock  *fakeClock
	state  string
	report *reporter
}

func newHarness(t *testing.T) *harness {
	c := &fakeClock{now: epoch}
	return &harness{
		t: t, clock: c, store: &recordingStore{Memory: blob.NewMemory(blob.Options{}), clock: c},
		state: filepath.Join(t.TempDir(), StateFile), report: &reporter{},
	}
}

// run runs a scrubber with the given period and bandwidth until the fake
// clock reaches stopAt, and returns it.
func (h *harness) run(period time.Duration, bandwidth int64, stopAt time.Time) *Scrubber {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.clock.mu.Lock()
	h.clock.stopAt, h.clock.cancel = stopAt, cancel
	h.clock.mu.Unlock()
	s, err := New(Options{Store: h.store, StatePath: h.state, Period: period, Bandwidth: bandwidth, Reporter: h.report, Clock: h.clock})
	require.NoError(h.t, err)
	s.Run(ctx)
	return s
}

func TestPassHashesEveryBlobAndReportsTheCorruptOnes(t *testing.T) {
	h := newHarness(t)
	ids := fill(t, h.store.Memory, 20, 10<<10)
	require.True(t, h.store.Corrupt(ids[3]))
	require.True(t, h.store.Corrupt(ids[17]))

	s := h.run(time.Hour, 1<<20, epoch.Add(59*time.Minute))
	st := s.Status(context.Background())
	require.Equal(t, int64(20), st.CopiesScrubbed)
	require.Equal(t, int64(200<<10), st.BytesScrubbed)
	require.Equal(t, int64(20), st.CopiesTotal)
	require.Equal(t, int64(200<<10), st.BytesTotal)
	require.False(t, st.Running, "the pass is finished")
	require.False(t, st.LastFullPassAt.IsZero())
	require.Equal(t, epoch, st.PeriodStart)
	require.Equal(t, int64(2), st.CorruptionsFound)
	require.Equal(t, int64(2), st.CorruptionsFoundTotal)
	require.Zero(t, st.Unreported)
	require.Zero(t, st.Overruns)

	got := h.report.findings()
	require.Len(t, got, 2)
	for i, want := range []string{ids[3], ids[17]} {
		require.Equal(t, want, got[i].ID)
		require.NotEmpty(t, got[i].Stored)
		require.NotEqual(t, got[i].Stored, got[i].Actual)
	}
}

func TestPassIsSpreadOverThePeriod(t *testing.T) {
	h := newHarness(t)
	const n = 50
	fill(t, h.store.Memory, n, 4<<10)
	period := 10 * time.Hour
	s := h.run(period, 1<<20, epoch.Add(period-time.Second))
	require.False(t, s.Status(context.Background()).Running)

	f := h.store.fetched()
	require.Len(t, f, n)
	for k, fe := range f {
		// Blob k waits for k/n of the spread share of the period.
		earliest := epoch.Add(time.Duration(float64(k) / n * spreadShare * float64(period)))
		require.False(t, fe.at.Before(earliest), "blob %d read at %s, before its turn at %s", k, fe.at, earliest)
	}
	require.True(t, f[n-1].at.After(epoch.Add(period*8/10)), "the last blob was read at %s: the pass was not spread", f[n-1].at)
	require.True(t, f[n-1].at.Before(epoch.Add(period)), "the pass overran its period")
}

func TestBandwidthIsNeverExceeded(t *testing.T) {
	h := newHarness(t)
	fill(t, h.store.Memory, 10, 100<<10)
	const bandwidth = 64 << 10
	// A period far too short for 1000 KiB at 64 KiB/s: the schedule never
	// holds the pass back, only the bandwidth does.
	// The first pass needs 15.6 s; the second, begun at once, does not end
	// by 20 s.
	s := h.run(time.Second, bandwidth, epoch.Add(20*time.Second))
	st := s.Status(context.Background())
	require.Greater(t, st.HashedCopies, int64(10))
	// Every byte read took its tokens: those of the blobs hashed whole, and
	// those of the one being read when the run was stopped.
	require.GreaterOrEqual(t, st.ThrottledBytes, st.HashedBytes)
	require.LessOrEqual(t, st.ThrottledBytes, st.HashedBytes+100<<10)
	require.Equal(t, int64(1), st.Overruns, "the pass could not finish within its period")
	require.False(t, st.LastFullPassAt.IsZero())

	// The bucket starts empty, so by the time each blob is opened the bytes
	// hashed before it fit in the time elapsed at the bandwidth.
	var before int64
	for _, fe := range h.store.fetched()[:10] {
		allowed := int64(fe.at.Sub(epoch).Seconds() * bandwidth)
		require.LessOrEqual(t, before, allowed, "at %s", fe.at)
		before += 100 << 10
	}
	took := st.LastFullPassAt.Sub(epoch)
	require.GreaterOrEqual(t, took, time.Duration(float64(1000<<10)/bandwidth*float64(time.Second)))
	require.GreaterOrEqual(t, st.ThrottleWait, took)
}

func TestBehindIsShownWhileThePassCannotFinish(t *testing.T) {
	h := newHarness(t)
	fill(t, h.store.Memory, 4, 100<<10)
	s := h.run(time.Second, MinBandwidth, epoch.Add(10*time.Second))
	st := s.Status(context.Background())
	require.True(t, st.Running)
	require.True(t, st.Behind)
}

func TestRestartResumesFromTheCursor(t *testing.T) {
	h := newHarness(t)
	const n = 40
	fill(t, h.store.Memory, n, 4<<10)
	period := 10 * time.Hour
	first := h.run(period, 1<<20, epoch.Add(period/2))
	st1 := first.Status(context.Background())
	require.True(t, st1.Running)
	require.Greater(t, st1.HashedCopies, int64(5))
	require.Less(t, st1.HashedCopies, int64(n))
	done := len(h.store.fetched())

	second := h.run(period, 1<<20, epoch.Add(period-time.Second))
	st2 := second.Status(context.Background())
	require.False(t, st2.Running)
	require.Equal(t, int64(n)-st1.HashedCopies, st2.HashedCopies, "the second run hashed only what the first had not")
	require.Equal(t, int64(n), st2.CopiesScrubbed)
	require.Equal(t, epoch, st2.PeriodStart, "the same period went on")
	seen := map[string]int{}
	for _, f := range h.store.fetched() {
		seen[f.id]++
	}
	require.Len(t, seen, n)
	for id, k := range seen {
		require.Equal(t, 1, k, "%s read twice", id)
	}
	require.Equal(t, h.store.fetched()[done-1].id, st1.Cursor)
}

func TestNextPeriodStartsAnotherPass(t *testing.T) {
	h := newHarness(t)
	fill(t, h.store.Memory, 3, 1<<10)
	s := h.run(time.Hour, 1<<20, epoch.Add(2*time.Hour-time.Second))
	st := s.Status(context.Background())
	require.Equal(t, epoch.Add(time.Hour), st.PeriodStart)
	require.False(t, st.Running, "the second period's pass is done")
	require.Equal(t, int64(3), st.CopiesScrubbed, "counts are the period's")
	require.Equal(t, int64(6), st.HashedCopies)
}

func TestFailedReportsAreKeptAndRetried(t *testing.T) {
	h := newHarness(t)
	ids := fill(t, h.store.Memory, 5, 1<<10)
	require.True(t, h.store.Corrupt(ids[0]))
	h.report.fails = 1 << 30 // the coordinator is away for the whole run
	s := h.run(time.Hour, 1<<20, epoch.Add(55*time.Minute))
	require.False(t, s.Status(context.Background()).Running)
	require.Equal(t, 1, s.Status(context.Background()).Unreported)
	require.Empty(t, h.report.findings())

	// The finding survives a restart and is delivered once the coordinator
	// answers, even though this period's pass is over.
	h.report.fails = 0
	h.store.fetches = nil
	s = h.run(time.Hour, 1<<20, epoch.Add(59*time.Minute))
	require.Empty(t, h.store.fetched(), "the finished pass was not run again")
	st := s.Status(context.Background())
	require.Zero(t, st.Unreported)
	require.Len(t, h.report.findings(), 1)
	require.Equal(t, ids[0], h.report.findings()[0].ID)
	require.Equal(t, int64(1), st.CorruptionsFound)
}

func TestNewRejectsBadOptions(t *testing.T) {
	m := blob.NewMemory(blob.Options{})
	good := Options{Store: m, StatePath: "x", Period: time.Hour, Bandwidth: 1 << 20}
	for name, mod := range map[string]func(*Options){
		"no store":       func(o *Options) { o.Store = nil },
		"no state path":  func(o *Options) { o.StatePath = "" },
		"short period":   func(o *Options) { o.Period = time.Millisecond },
		"tiny bandwidth": func(o *Options) { o.Bandwidth = 100 },
	} {
		o := good
		mod(&o)
		_, err := New(o)
		require.Error(t, err, name)
	}
	_, err := New(good)
	require.NoError(t, err)
}

func TestABlobRemovedSinceItWasListedIsNeitherCountedNorReported(t *testing.T) {
	h := newHarness(t)
	ids := fill(t, h.store.Memory, 4, 1<<10)
	h.store.removed = ids[1]
	s := h.run(time.Hour, 1<<20, epoch.Add(59*time.Minute))
	st := s.Status(context.Background())
	require.False(t, st.Running)
	require.Equal(t, int64(3), st.CopiesScrubbed)
	require.Zero(t, st.CorruptionsFound)
	require.Empty(t, h.report.findings())
}

func TestStateSurvivesAnInterruptedSave(t *testing.T) {
	h := newHarness(t)
	fill(t, h.store.Memory, 2, 1<<10)
	h.run(time.Hour, 1<<20, epoch.Add(50*time.Minute))
	// A crash between a save's temp file and its rename leaves the temp
	// file and the previous state.
	leftover := filepath.Join(filepath.Dir(h.state), "."+StateFile+"123456")
	require.NoError(t, os.WriteFile(leftover, []byte("{half"), 0o640))
	s := h.run(time.Hour, 1<<20, epoch.Add(55*time.Minute))
	require.Equal(t, int64(2), s.Status(context.Background()).CopiesScrubbed, "the saved state was read")
	require.NoFileExists(t, leftover)
}

func TestAnUnreadableStateStartsANewPass(t *testing.T) {
	h := newHarness(t)
	fill(t, h.store.Memory, 3, 1<<10)
	require.NoError(t, os.WriteFile(h.state, []byte("not json"), 0o640))
	s := h.run(time.Hour, 1<<20, epoch.Add(59*time.Minute))
	st := s.Status(context.Background())
	require.Equal(t, epoch, st.PeriodStart)
	require.Equal(t, int64(3), st.CopiesScrubbed)
	require.False(t, st.Running)
}

// The last complete pass's figures outlive the period counters that the
// next pass resets, so the coordinator can list it beside the running one.
func TestLastPassIsKeptThroughTheNextPeriod(t *testing.T) {
	h := newHarness(t)
	ids := fill(t, h.store.Memory, 20, 10<<10)
	require.True(t, h.store.Corrupt(ids[5]))

	s := h.run(time.Hour, 1<<20, epoch.Add(30*time.Minute+time.Hour))
	st := s.Status(context.Background())
	require.True(t, st.Running, "the second period's pass is under way")
	require.Equal(t, epoch.Add(time.Hour), st.PeriodStart)
	require.Less(t, st.CopiesScrubbed, int64(20))
	require.NotNil(t, st.LastPass)
	require.Equal(t, epoch, st.LastPass.Start)
	require.Equal(t, st.LastFullPassAt, st.LastPass.End)
	require.True(t, st.LastPass.End.Before(epoch.Add(time.Hour)))
	require.Equal(t, int64(20), st.LastPass.Copies)
	require.Equal(t, int64(200<<10), st.LastPass.Bytes)
	require.Equal(t, int64(1), st.LastPass.CorruptionsFound)

	// A restart reads it back from the state file.
	s = h.run(time.Hour, 1<<20, epoch.Add(30*time.Minute+time.Hour))
	require.Equal(t, st.LastPass, s.Status(context.Background()).LastPass)
}
