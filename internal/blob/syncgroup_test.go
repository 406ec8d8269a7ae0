package blob

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

// gatedSync is a sync function for tests: call i (from 1) blocks until the
// test opens gate i, then returns the error set for it.
type gatedSync struct {
	calls   atomic.Int64
	started chan int // receives i as call i starts
	mu      sync.Mutex
	gates   map[int]chan struct{}
	errs    map[int]error
}

func newGatedSync() *gatedSync {
	return &gatedSync{started: make(chan int, 1000), gates: map[int]chan struct{}{}, errs: map[int]error{}}
}

func (s *gatedSync) gate(i int) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[i] == nil {
		s.gates[i] = make(chan struct{})
	}
	return s.gates[i]
}

// hold makes call i block until open(i).
func (s *gatedSync) hold(i int) { s.gate(i) }

func (s *gatedSync) open(i int) { close(s.gate(i)) }

func (s *gatedSync) fail(i int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[i] = err
}

func (s *gatedSync) sync() error {
	i := int(s.calls.Add(1))
	s.started <- i
	s.mu.Lock()
	g, err := s.gates[i], s.errs[i]
	s.mu.Unlock()
	if g != nil {
		<-g
	}
	return err
}

// watchJoins makes g report each caller that starts waiting; call it before
// any Sync.
func watchJoins(g *syncGroup) <-chan struct{} {
	ch := make(chan struct{}, 1000)
	g.joined = func() { ch <- struct{}{} }
	return ch
}

// awaitJoins returns once n more callers have started waiting.
func awaitJoins(joins <-chan struct{}, n int) {
	for range n {
		<-joins
	}
}

// syncAsync calls g.Sync in a goroutine and returns where its result arrives.
func syncAsync(ctx context.Context, g *syncGroup) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- g.Sync(ctx) }()
	return ch
}

func TestSyncGroupWaitsForASyncThatStartsAfterTheCall(t *testing.T) {
	s := newGatedSync()
	g := newSyncGroup(s.sync)
	joins := watchJoins(g)
	s.hold(1)
	s.hold(2)
	first := syncAsync(context.Background(), g)
	require.Equal(t, 1, <-s.started)
	awaitJoins(joins, 1)

	// Sync 1 is running: it may already be past the data of a caller that
	// arrives now, so that caller must wait for sync 2.
	late := syncAsync(context.Background(), g)
	awaitJoins(joins, 1)
	s.open(1)
	require.NoError(t, <-first)
	select {
	case i := <-s.started:
		require.Equal(t, 2, i)
	case err := <-late:
		t.Fatalf("a caller that arrived during sync 1 returned (%v) with it", err)
	}
	select {
	case err := <-late:
		t.Fatalf("a caller that arrived during sync 1 returned (%v) before sync 2 completed", err)
	default:
	}
	s.open(2)
	require.NoError(t, <-late)
	st := g.snapshot()
	require.Equal(t, int64(2), st.Syncs)
	require.Equal(t, int64(2), st.Waits)
}

func TestSyncGroupSharesOneSyncAmongEveryoneWaiting(t *testing.T) {
	const n = 32
	s := newGatedSync()
	g := newSyncGroup(s.sync)
	joins := watchJoins(g)
	s.hold(1)
	results := make([]<-chan error, n)
	for i := range results {
		results[i] = syncAsync(context.Background(), g)
	}
	awaitJoins(joins, n) // every caller waits: some in sync 1, the rest for the next
	s.open(1)
	for _, r := range results {
		require.NoError(t, <-r)
	}
	// Those who arrived while sync 1 ran all share sync 2 (sync 1 alone if
	// every caller arrived before it started).
	require.LessOrEqual(t, s.calls.Load(), int64(2))
	require.Equal(t, int64(n), g.snapshot().Waits)
}

func TestSyncGroupErrorFailsTheBatchAndEverySyncAfter(t *testing.T) {
	const n = 16
	boom := errors.New("write-back error")
	s := newGatedSync()
	g := newSyncGroup(s.sync)
	joins := watchJoins(g)
	s.hold(1)
	s.fail(1, boom)
	results := make([]<-chan error, n)
	for i := range results {
		results[i] = syncAsync(context.Background(), g)
	}
	awaitJoins(joins, n)
	s.open(1)
	for _, r := range results {
		require.ErrorIs(t, <-r, boom, "every caller waiting when the sync failed fails")
	}
	require.ErrorIs(t, g.Sync(context.Background()), boom, "and every caller after")
	require.ErrorIs(t, g.err(), boom)
	require.Equal(t, int64(1), s.calls.Load(), "no sync runs after a failure: none could vouch for the lost data")
}

func TestSyncGroupCancelledWaiterLeaves(t *testing.T) {
	s := newGatedSync()
	g := newSyncGroup(s.sync)
	joins := watchJoins(g)
	s.hold(1)
	s.hold(2)
	running, cancelRunning := context.WithCancel(context.Background())
	defer cancelRunning()
	first := syncAsync(running, g) // waits in sync 1, which is running
	require.Equal(t, 1, <-s.started)
	awaitJoins(joins, 1)

	queued, cancelQueued := context.WithCancel(context.Background())
	defer cancelQueued()
	leaver := syncAsync(queued, g) // waits for sync 2, not started
	stayer := syncAsync(context.Background(), g)
	awaitJoins(joins, 2)

	cancelRunning()
	cancelQueued()
	for _, ch := range []<-chan error{first, leaver} {
		err := <-ch // while both syncs are still blocked
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, errs.Unavailable, errs.KindOf(err))
	}
	s.open(1) // sync 1 went on without its caller
	require.Equal(t, 2, <-s.started)
	s.open(2)
	require.NoError(t, <-stayer)
	require.Equal(t, int64(2), s.calls.Load())
	require.Equal(t, int64(1), g.snapshot().Waits, "only the caller that stayed was served")
}
