package rebalance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
)

// recordingStore answers the three queries rebalancing may use and records
// which were asked.
type recordingStore struct {
	mu      sync.Mutex
	calls   []string
	records []meta.FileRecord // in ID order, for FilesAfter
}

func (s *recordingStore) record(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *recordingStore) GetFile(_ context.Context, id string) (meta.FileRecord, error) {
	return meta.FileRecord{File: meta.File{ID: id, Status: meta.FileActive}}, nil
}

func (s *recordingStore) FileIDsOnNode(_ context.Context, node string) ([]string, error) {
	s.record("on-node " + node)
	return []string{"a", "b"}, nil
}

func (s *recordingStore) FileIDsInRanges(_ context.Context, r []meta.PositionRange) ([]string, error) {
	s.record("in-ranges")
	return []string{"b", "c"}, nil
}

// fourFiles are the files a manual run's walk finds; a PENDING upload is
// not one of them.
func fourFiles() []meta.FileRecord {
	var out []meta.FileRecord
	for _, id := range []string{"a", "b", "c", "d"} {
		out = append(out, meta.FileRecord{File: meta.File{ID: id, Status: meta.FileActive}})
	}
	return append(out, meta.FileRecord{File: meta.File{ID: "e", Status: meta.FilePending}})
}

func (s *recordingStore) FilesAfter(_ context.Context, after string, limit int) ([]meta.FileRecord, error) {
	s.record("files-after " + after)
	var out []meta.FileRecord
	for _, rec := range s.records {
		if rec.ID > after && len(out) < limit {
			out = append(out, rec)
		}
	}
	return out, nil
}

type countingReconciler struct {
	mu   sync.Mutex
	seen []string
}

func (c *countingReconciler) Reconcile(_ context.Context, id string) (reconcile.Outcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, id)
	return reconcile.Outcome{FileID: id, Changed: id == "a", CopiesCreated: 1}, nil
}

func TestEachTriggerVisitsOnlyItsFiles(t *testing.T) {
	rg := ring.New(100, "n1", "n2", "n3", "n4")
	cases := []struct {
		trigger Trigger
		calls   []string
		files   []string
	}{
		// A departure uses the indexed per-node query, never a scan.
		{Failed, []string{"on-node n2"}, []string{"a", "b"}},
		{Deregistered, []string{"on-node n2"}, []string{"a", "b"}},
		// A join uses ring ranges.
		{Joined, []string{"in-ranges"}, []string{"b", "c"}},
		// A recovery does both, each file once.
		{Recovered, []string{"on-node n2", "in-ranges"}, []string{"a", "b", "c"}},
		// Only a manual run walks every blob.
		{Manual, []string{"files-after "}, []string{"a", "b", "c", "d"}},
	}
	for _, c := range cases {
		t.Run(string(c.trigger), func(t *testing.T) {
			st := &recordingStore{records: fourFiles()}
			rec := &countingReconciler{}
			var reports []Report
			b := New(Options{Store: st, Reconciler: rec, Ring: func() *ring.Ring { return rg }, OnReport: func(r Report) { reports = append(reports, r) }})
			rep, err := b.Run(context.Background(), c.trigger, "n2")
			require.NoError(t, err)
			require.Equal(t, c.calls, st.calls)
			slices.Sort(rec.seen)
			require.Equal(t, c.files, rec.seen)
			require.Equal(t, len(c.files), rep.FilesScanned)
			require.Equal(t, len(c.files), rep.CopiesCreated)
			require.Equal(t, len(c.files), rep.FilesAffected)
			require.Len(t, reports, 1, "every run is reported")
		})
	}
}

func TestAJoinOfANodeOffTheRingVisitsNothing(t *testing.T) {
	st := &recordingStore{}
	b := New(Options{Store: st, Reconciler: &countingReconciler{}, Ring: func() *ring.Ring { return ring.New(100, "n1") }})
	rep, err := b.Run(context.Background(), Joined, "n9")
	require.NoError(t, err)
	require.Zero(t, rep.FilesScanned)
	require.Empty(t, st.calls)
}

func TestRunSkipsWhenAnotherHoldsTheLease(t *testing.T) {
	st := &recordingStore{}
	b := New(Options{Store: st, Reconciler: &countingReconciler{}, Ring: func() *ring.Ring { return ring.New(100, "n1") },
		Lock: lease.LockerFunc(func(_ context.Context, name string, _ time.Duration) (lease.Lease, bool, error) {
			require.Equal(t, "rebalance:MANUAL:", name)
			return nil, false, nil
		})})
	rep, err := b.Run(context.Background(), Manual, "")
	require.NoError(t, err)
	require.True(t, rep.Skipped)
	require.Empty(t, st.calls, "a skipped run reads nothing")
}

// gatedReconciler holds every reconcile until released and counts how many
// run at once.
type gatedReconciler struct {
	release          chan struct{}
	started          chan string
	running, maxSeen atomic.Int32
}

func (g *gatedReconciler) Reconcile(_ context.Context, id string) (reconcile.Outcome, error) {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.maxSeen.Load(); n > m && !g.maxSeen.CompareAndSwap(m, n); m = g.maxSeen.Load() {
	}
	g.started <- id
	<-g.release
	return reconcile.Outcome{FileID: id}, nil
}

func TestParallelismBoundsFilesReconciledAtOnce(t *testing.T) {
	for _, p := range []int{1, 3, 8} {
		g := &gatedReconciler{release: make(chan struct{}), started: make(chan string, 64)}
		b := New(Options{Store: &recordingStore{}, Reconciler: g, Ring: func() *ring.Ring { return ring.New(100, "n1") }, Parallelism: p})
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = string(rune('a' + i))
		}
		done := make(chan Report)
		go func() { done <- b.RunFiles(context.Background(), Manual, "", ids) }()
		for range p { // p reconciles start without any finishing
			<-g.started
		}
		select {
		case id := <-g.started:
			t.Fatalf("parallelism %d: a reconcile of %s started beyond the bound", p, id)
		case <-time.After(50 * time.Millisecond):
		}
		close(g.release)
		rep := <-done
		require.Equal(t, 20, rep.FilesScanned)
		require.EqualValues(t, p, g.maxSeen.Load())
	}
}

// A catch-up visits every file but reconciles only those the ring would
// place elsewhere, reading the metadata in pages by ID.
func TestRunMisplacedReconcilesOnlyMisplacedFiles(t *testing.T) {
	rg := ring.New(100, "n1", "n2", "n3", "n4")
	st := &recordingStore{}
	var want []string
	for i := range 2500 {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		pref := rg.Preference(id, 3)
		rec := meta.FileRecord{File: meta.File{ID: id, Status: meta.FileActive, PrimaryNodeID: pref[0]}}
		on := pref
		switch i % 5 {
		case 0: // a copy on a node the ring no longer names for it
			on = rg.Preference(id, 4)[1:]
			rec.PrimaryNodeID = on[0]
			want = append(want, id)
		case 1:
			rec.Status = meta.FilePending // an upload in flight: left alone
		}
		for _, n := range on {
			rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: meta.ReplicaActive})
		}
		st.records = append(st.records, rec)
	}
	rec := &countingReconciler{}
	b := New(Options{Store: st, Reconciler: rec, Ring: func() *ring.Ring { return rg }})
	rep, err := b.RunMisplaced(context.Background(), Repair)
	require.NoError(t, err)
	slices.Sort(rec.seen)
	require.Equal(t, want, rec.seen)
	require.Equal(t, 2500, rep.FilesScanned)
	require.True(t, rep.Complete)
	require.Equal(t, []string{"files-after ", "files-after " + st.records[999].ID, "files-after " + st.records[1999].ID}, st.calls)
}

// busyReconciler reports some files busy (their lease held elsewhere) and
// fails others.
type busyReconciler struct{ busy, fail string }

func (r busyReconciler) Reconcile(_ context.Context, id string) (reconcile.Outcome, error) {
	switch id {
	case r.busy:
		return reconcile.Outcome{FileID: id, Skipped: true, Busy: true}, nil
	case r.fail:
		return reconcile.Outcome{FileID: id}, errs.E(errs.Unavailable, "metadata store down")
	}
	return reconcile.Outcome{FileID: id}, nil
}

func TestSkippedFilesMakeARunIncomplete(t *testing.T) {
	rg := ring.New(100, "n1")
	run := func(ctx context.Context, r Reconciler) Report {
		b := New(Options{Store: &recordingStore{records: fourFiles()}, Reconciler: r, Ring: func() *ring.Ring { return rg }})
		rep, err := b.Run(ctx, Manual, "")
		require.NoError(t, err)
		return rep
	}
	rep := run(context.Background(), busyReconciler{})
	require.True(t, rep.Complete)
	require.Zero(t, rep.FilesSkipped)

	rep = run(context.Background(), busyReconciler{busy: "b", fail: "c"})
	require.False(t, rep.Complete, "a run that left files behind is not complete")
	require.Equal(t, 2, rep.FilesSkipped)
	require.Equal(t, 1, rep.Failures)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep = run(ctx, busyReconciler{})
	require.False(t, rep.Complete, "a run cut short is not complete")
	require.Equal(t, 4, rep.FilesSkipped, "none of the four files was reached")
}
