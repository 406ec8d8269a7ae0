package rebalance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
)

func TestProgressExtrapolatesFromTheFilesDone(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := &liveRun{start: start, total: 10}
	p := r.at(start.Add(2 * time.Second))
	require.Nil(t, p.EtaSeconds, "no estimate before the first file")
	require.Zero(t, p.BytesPerSecond)

	r.done.Add(4)
	r.bytes.Add(8000)
	p = r.at(start.Add(2 * time.Second))
	require.Equal(t, Progress{StartedAt: start, FilesDone: 4, FilesTotal: 10, BytesCopied: 8000, BytesPerSecond: 4000,
		EtaSeconds: p.EtaSeconds}, p)
	require.InDelta(t, 3.0, *p.EtaSeconds, 1e-9, "6 files left at 2 files a second")
}

// sizedReconciler copies 100 bytes per file, holding each reconcile until
// released.
type sizedReconciler struct{ release chan struct{} }

func (s sizedReconciler) Reconcile(_ context.Context, id string) (reconcile.Outcome, error) {
	<-s.release
	return reconcile.Outcome{FileID: id, CopiesCreated: 1, BytesCopied: 100}, nil
}

func TestDrainProgressShowsTheRunGoingOn(t *testing.T) {
	rc := sizedReconciler{release: make(chan struct{})}
	b := New(Options{Store: &recordingStore{}, Reconciler: rc, Ring: func() *ring.Ring { return ring.New(100, "n1") }, Parallelism: 1})
	d, err := b.DrainProgress(t.Context(), "n2")
	require.NoError(t, err)
	require.Nil(t, d.Progress, "no run is going on")

	done := make(chan Report)
	go func() { done <- b.RunFiles(t.Context(), Deregistered, "n2", []string{"a", "b", "c"}) }()
	rc.release <- struct{}{} // a is done once b is taken
	rc.release <- struct{}{}
	d, err = b.DrainProgress(t.Context(), "n2")
	require.NoError(t, err)
	require.NotNil(t, d.Progress)
	require.Equal(t, 3, d.Progress.FilesTotal)
	require.GreaterOrEqual(t, d.Progress.FilesDone, 1)
	require.LessOrEqual(t, d.Progress.FilesDone, 2)
	require.EqualValues(t, 100*d.Progress.FilesDone, d.Progress.BytesCopied)
	require.NotNil(t, d.Progress.EtaSeconds)

	other, err := b.DrainProgress(t.Context(), "n3")
	require.NoError(t, err)
	require.Nil(t, other.Progress, "the run is n2's drain")

	rc.release <- struct{}{}
	<-done
	d, err = b.DrainProgress(t.Context(), "n2")
	require.NoError(t, err)
	require.Nil(t, d.Progress, "the run has ended")
}
