package files

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// writeLog is a store that notes the file writes made through it and can be
// told to fail CreateFile.
type writeLog struct {
	meta.Store
	mu         sync.Mutex
	writes     []string // "create PENDING", "update ACTIVE", …
	failCreate error
	// unclear makes the next CreateFile store the row and still fail, as
	// a commit whose answer was lost does.
	unclear bool
}

func (w *writeLog) note(op string, rec *meta.FileRecord) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, op+" "+string(rec.Status))
}

func (w *writeLog) CreateFile(ctx context.Context, rec *meta.FileRecord) error {
	w.note("create", rec)
	w.mu.Lock()
	fail, unclear := w.failCreate, w.unclear
	w.unclear = false
	w.mu.Unlock()
	if fail != nil {
		return fail
	}
	if unclear {
		stored := *rec
		if err := w.Store.CreateFile(ctx, &stored); err != nil {
			return err
		}
		return errs.E(errs.Unavailable, "the answer to the commit was lost")
	}
	return w.Store.CreateFile(ctx, rec)
}

func (w *writeLog) UpdateFile(ctx context.Context, rec *meta.FileRecord) error {
	w.note("update", rec)
	return w.Store.UpdateFile(ctx, rec)
}

func (w *writeLog) log() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

// newLoggedService is newService with its store behind a writeLog.
func newLoggedService(t *testing.T, nodes *gateNodes, ids []string, mod func(*Options)) (*Service, *writeLog) {
	t.Helper()
	var wl *writeLog
	s, _ := newService(t, nodes, ids, func(o *Options) {
		wl = &writeLog{Store: o.Store}
		o.Store = wl
		if mod != nil {
			mod(o)
		}
	})
	return s, wl
}

func TestFastUploadWritesItsRowOnce(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	s, wl := newLoggedService(t, nodes, ids, func(o *Options) { o.PendingRecordDelay = time.Hour })
	start := time.Now()
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("quick")})
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, res.Status)
	require.Equal(t, []string{"create ACTIVE"}, wl.log(), "one metadata write, after the copies")
	rec, err := wl.GetFile(context.Background(), res.FileID)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, activeOf(rec))
	require.False(t, rec.CreatedAt.Before(start.Truncate(time.Microsecond)), "created at the upload's start")
	require.False(t, rec.CreatedAt.After(rec.UpdatedAt))

	// An Idempotency-Key is claimed by the PENDING row before any copy.
	_, err = s.Upload(context.Background(), UploadRequest{FileName: "k", Body: strings.NewReader("keyed"), IdempotencyKey: "key-1"})
	require.NoError(t, err)
	require.Equal(t, []string{"create ACTIVE", "create PENDING", "update ACTIVE"}, wl.log())
}

func TestSlowUploadIsRecordedPendingAfterTheDelay(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, wl := newLoggedService(t, nodes, ids, func(o *Options) {
		o.PendingRecordDelay = 30 * time.Millisecond
		o.PendingTouch = 10 * time.Millisecond
	})
	nodes.gate = make(chan struct{})
	start := time.Now()
	done := make(chan UploadResult, 1)
	go func() {
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("slow")})
		require.NoError(t, err)
		done <- res
	}()
	<-nodes.started
	var pending meta.FileRecord
	require.Eventually(t, func() bool {
		got, err := wl.FileIDsByStatus(context.Background(), []meta.FileStatus{meta.FilePending}, time.Now().Add(time.Hour), 10)
		if err != nil || len(got) != 1 {
			return false
		}
		pending, err = wl.GetFile(context.Background(), got[0])
		return err == nil
	}, 5*time.Second, 5*time.Millisecond, "a held upload is recorded PENDING")
	require.Len(t, pending.Replicas, 3)
	for _, r := range pending.Replicas {
		require.Equal(t, meta.ReplicaPending, r.Status)
	}
	require.False(t, pending.CreatedAt.Before(start.Truncate(time.Microsecond)))
	require.Eventually(t, func() bool {
		rec, err := wl.GetFile(context.Background(), pending.ID)
		return err == nil && rec.UpdatedAt.After(pending.UpdatedAt)
	}, 5*time.Second, 5*time.Millisecond, "the recorded row is then touched")

	close(nodes.gate)
	res := <-done
	require.Equal(t, pending.ID, res.FileID)
	require.Equal(t, meta.FileActive, res.Status)
	require.Equal(t, []string{"create PENDING", "update ACTIVE"}, wl.log())
	rec, err := wl.GetFile(context.Background(), res.FileID)
	require.NoError(t, err)
	require.Equal(t, pending.CreatedAt, rec.CreatedAt)
}

// A failover to a node outside the plan is recorded by the one write too.
func TestFastUploadRecordsItsFailovers(t *testing.T) {
	ids := []string{"A", "B", "C", "D"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	s, wl := newLoggedService(t, nodes, ids, func(o *Options) { o.PendingRecordDelay = time.Hour })
	// Three of the four refuse, so whatever the plan the write fails
	// over beyond it.
	for _, n := range []string{"A", "B", "C"} {
		nodes.fail[n] = errs.E(errs.NoSpace, "disk full")
	}
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("payload")})
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, res.Status)
	rec, err := wl.GetFile(context.Background(), res.FileID)
	require.NoError(t, err)
	require.Len(t, rec.Replicas, 4, "every node written to is recorded")
	require.Equal(t, []string{"D"}, activeOf(rec))
	require.Equal(t, []string{"create DEGRADED"}, wl.log())
}

// When the only metadata write fails, no file lists the copies: they are
// removed, and the upload fails with the store's error.
func TestFailedFirstCommitRemovesTheCopies(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	s, wl := newLoggedService(t, nodes, ids, func(o *Options) { o.PendingRecordDelay = time.Hour })
	wl.failCreate = errs.E(errs.Unavailable, "metadata store down")
	_, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("lost")})
	require.True(t, errs.Is(err, errs.Unavailable), "got %v", err)
	require.Equal(t, int32(3), nodes.puts.Load(), "the copies were written first")
	for _, id := range ids {
		list, err := nodes.stores[id].Enumerate(context.Background(), "", 10)
		require.NoError(t, err)
		require.Empty(t, list, "node %s keeps a copy no file lists", id)
	}
}

// A PENDING row whose write seemed to fail but landed is found by the
// upload's commit, which then updates it rather than failing on the
// existing id.
func TestAnUnclearPendingWriteIsUpdatedByTheCommit(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, wl := newLoggedService(t, nodes, ids, func(o *Options) {
		o.PendingRecordDelay = 10 * time.Millisecond
		o.PendingTouch = time.Hour
	})
	wl.unclear = true
	nodes.gate = make(chan struct{})
	var res UploadResult
	done := make(chan error, 1)
	go func() {
		var err error
		res, err = s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("held")})
		done <- err
	}()
	<-nodes.started
	require.Eventually(t, func() bool { return len(wl.log()) == 1 }, 5*time.Second, 5*time.Millisecond, "the PENDING row is attempted")
	close(nodes.gate)
	require.NoError(t, <-done)
	require.Equal(t, meta.FileActive, res.Status)
	require.Equal(t, []string{"create PENDING", "create ACTIVE", "update ACTIVE"}, wl.log())
	rec, err := wl.GetFile(context.Background(), res.FileID)
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, rec.Status)
	require.ElementsMatch(t, ids, activeOf(rec))
}
