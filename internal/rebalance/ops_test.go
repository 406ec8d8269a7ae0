package rebalance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
)

// Each kind of run is recorded as its kind of operation, with the files and
// bytes it moved, and a run that left work undone ends FAILED.
func TestRunsAreRecordedAsOperations(t *testing.T) {
	tracker := ops.New(ops.Options{})
	rg := ring.New(100, "n1")
	b := New(Options{Store: &recordingStore{records: fourFiles()}, Reconciler: sizedReconciler{release: closed()}, Ring: func() *ring.Ring { return rg }, Ops: tracker})

	_, err := b.Run(t.Context(), Manual, "")
	require.NoError(t, err)
	_, err = b.Run(t.Context(), Deregistered, "n2")
	require.NoError(t, err)
	b.RunFiles(t.Context(), Repair, "", []string{"x"})

	recent := tracker.List().Recent
	require.Len(t, recent, 3)
	want := []struct {
		kind          ops.Kind
		trigger, node string
		files         int64
	}{
		{ops.Repair, "REPAIR", "", 1},
		{ops.Drain, "DEREGISTERED", "n2", 2},
		{ops.Rebalance, "MANUAL", "", 4},
	}
	for i, w := range want {
		o := recent[i]
		require.Equal(t, w.kind, o.Kind, "operation %d", i)
		require.Equal(t, w.trigger, o.Trigger)
		require.Equal(t, w.node, o.NodeID)
		require.Equal(t, ops.Done, o.State)
		require.Equal(t, w.files, o.Done)
		require.Equal(t, w.files, o.Total)
		require.Equal(t, 100*w.files, o.BytesDone, "sizedReconciler copies 100 bytes per file")
		rep, ok := o.Report.(Report)
		require.True(t, ok, "the report is the run's: %T", o.Report)
		require.True(t, rep.Complete)
	}

	b = New(Options{Store: &recordingStore{records: fourFiles()}, Reconciler: busyReconciler{busy: "b"}, Ring: func() *ring.Ring { return rg }, Ops: tracker})
	_, err = b.Run(t.Context(), Manual, "")
	require.NoError(t, err)
	last := tracker.List().Recent[0]
	require.Equal(t, ops.Failed, last.State, "a run that skipped a file did not do its job")
	require.Equal(t, 1, last.Report.(Report).FilesSkipped)
}

// A store whose listing fails ends the operation FAILED with the error.
type failingStore struct{ recordingStore }

func (*failingStore) FilesAfter(context.Context, string, int) ([]meta.FileRecord, error) {
	return nil, errors.New("metadata store down")
}

func TestARunThatCannotListItsFilesFails(t *testing.T) {
	tracker := ops.New(ops.Options{})
	b := New(Options{Store: &failingStore{}, Reconciler: &countingReconciler{}, Ring: func() *ring.Ring { return ring.New(100, "n1") }, Ops: tracker})
	_, err := b.Run(t.Context(), Manual, "")
	require.Error(t, err)
	o := tracker.List().Recent[0]
	require.Equal(t, ops.Failed, o.State)
	require.Contains(t, fmt.Sprint(o.Report), "metadata store down")
}

// A drain's rounds are one operation, running while it goes on and shown
// with its node.
func TestADrainIsOneOperationWhileItRuns(t *testing.T) {
	tracker := ops.New(ops.Options{})
	store := &drainingStore{left: []string{"a", "b", "c"}}
	rc := sizedReconciler{release: make(chan struct{})}
	b := New(Options{Store: store, Reconciler: store.moving(rc), Ring: func() *ring.Ring { return ring.New(100, "n1") }, Parallelism: 1, Ops: tracker})

	done := make(chan DrainReport)
	errc := make(chan error, 1)
	go func() {
		d, err := b.Drain(context.Background(), "n2")
		errc <- err
		done <- d
	}()
	rc.release <- struct{}{}
	rc.release <- struct{}{} // a is done once b is taken
	o, ok := tracker.RunningOn(ops.Drain, "n2")
	require.True(t, ok, "the drain is running")
	require.EqualValues(t, 3, o.Total)
	require.GreaterOrEqual(t, o.Done, int64(1))
	rc.release <- struct{}{}
	require.NoError(t, <-errc)
	d := <-done
	require.True(t, d.Complete)
	snap := tracker.List()
	require.Empty(t, snap.Running)
	require.Len(t, snap.Recent, 1, "the drain's rounds are one operation")
	require.Equal(t, ops.Done, snap.Recent[0].State)
	require.EqualValues(t, 3, snap.Recent[0].Done)
	require.IsType(t, DrainReport{}, snap.Recent[0].Report)
}

// closed is a release channel that never holds a reconcile.
func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// drainingStore holds the files left on a draining node; the reconciler
// moving returns takes each file it reconciles off the node.
type drainingStore struct {
	recordingStore
	mu   sync.Mutex
	left []string
}

func (s *drainingStore) FileIDsOnNode(context.Context, string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.left), nil
}

type movingReconciler struct {
	s    *drainingStore
	next Reconciler
}

func (m movingReconciler) Reconcile(ctx context.Context, id string) (reconcile.Outcome, error) {
	out, err := m.next.Reconcile(ctx, id)
	m.s.mu.Lock()
	m.s.left = slices.DeleteFunc(m.s.left, func(l string) bool { return l == id })
	m.s.mu.Unlock()
	return out, err
}

func (s *drainingStore) moving(next Reconciler) Reconciler { return movingReconciler{s, next} }
