package taskq

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestQueuedTasksRun(t *testing.T) {
	q := New(Options{Workers: 2})
	var n atomic.Int32
	done := make(chan struct{}, 10)
	for range 10 {
		require.True(t, q.Go(func(context.Context) { n.Add(1); done <- struct{}{} }))
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); q.Run(ctx) }()
	for range 10 {
		<-done
	}
	cancel()
	<-stopped
	require.Equal(t, int32(10), n.Load())
}

func TestFullQueueRefuses(t *testing.T) {
	q := New(Options{Size: 2})
	require.True(t, q.Go(func(context.Context) {}))
	require.True(t, q.Go(func(context.Context) {}))
	require.False(t, q.Go(func(context.Context) {}), "a full queue refuses rather than blocks")
}

// TestShutdownCancelsRunningAndDropsWaiting: Run returns only after a task
// blocked in its work has seen the cancellation and returned; tasks still
// waiting never run, and no goroutine is left behind.
func TestShutdownCancelsRunningAndDropsWaiting(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	q := New(Options{Workers: 1})
	started, returned := make(chan struct{}), make(chan struct{})
	require.True(t, q.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // finishing up takes a moment
		close(returned)
	}))
	var late atomic.Bool
	require.True(t, q.Go(func(context.Context) { late.Store(true) }))

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); q.Run(ctx) }()
	<-started
	cancel()
	<-stopped
	select {
	case <-returned:
	default:
		t.Fatal("Run returned while a task was still running")
	}
	require.False(t, late.Load(), "a waiting task does not start after shutdown")
	require.False(t, q.Go(func(context.Context) {}), "a stopped queue refuses tasks")
}
