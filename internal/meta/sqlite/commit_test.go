package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// TestMain fails the package if any test leaves a goroutine behind, such as
// the committer of a store that was closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// hold keeps the committer busy inside a write of its own until release is
// called, so that writes started meanwhile wait in the queue and form the
// next batch. The held write inserts a lease row and commits once released;
// its result arrives on the returned channel.
func hold(t *testing.T, s *Store) (release func(), result <-chan error) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- s.writeTx(context.Background(), "hold", func(ctx context.Context, tx *sql.Tx) error {
			close(started)
			<-unblock
			_, err := tx.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES ('hold', 'test', 0)`)
			return err
		})
	}()
	<-started
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before the store's Close, which would wait for it
	return release, res
}

// waitQueued waits until n writes are in the committer's queue.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(s.w.queue) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d writes reached the queue", len(s.w.queue), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// async runs f in a goroutine; its error arrives on the returned channel.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// counts is what the committer has done so far.
type counts struct{ ran, commits int64 }

func countsOf(s *Store) counts {
	return counts{ran: s.w.ran.Load(), commits: s.w.commits.Load()}
}

func (c counts) since(before counts) counts {
	return counts{ran: c.ran - before.ran, commits: c.commits - before.commits}
}

// newRec is a PENDING file with one pending copy on each of nodes.
func newRec(name string, nodes ...string) *meta.FileRecord {
	rec := &meta.FileRecord{File: meta.File{ID: uuid.NewString(), Name: name, Status: meta.FilePending, ReplicationFactor: max(1, len(nodes))}}
	for _, n := range nodes {
		rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: meta.ReplicaPending})
	}
	return rec
}

func storeWithNode(t *testing.T) *Store {
	t.Helper()
	return withNode(t, openTest(t))
}

// withNode registers node-1 in s.
func withNode(t *testing.T, s *Store) *Store {
	t.Helper()
	require.NoError(t, s.CreateNode(context.Background(), &meta.Node{ID: "node-1", Host: "h", Port: 1, Status: meta.NodeHealthy}))
	return s
}

func requireStored(t *testing.T, s *Store, rec *meta.FileRecord) {
	t.Helper()
	got, err := s.GetFile(context.Background(), rec.ID)
	require.NoError(t, err, "file %s", rec.Name)
	require.Equal(t, *rec, got, "file %s", rec.Name)
}

func requireAbsent(t *testing.T, s *Store, id, what string) {
	t.Helper()
	_, err := s.GetFile(context.Background(), id)
	require.Equal(t, errs.NotFound, errs.KindOf(err), "%s must not be stored: %v", what, err)
}

func TestSequentialWritesCommitOneEach(t *testing.T) {
	s := storeWithNode(t)
	before := countsOf(s)
	for i := range 5 {
		require.NoError(t, s.CreateFile(context.Background(), newRec("f", "node-1")), "write %d", i)
	}
	require.Equal(t, counts{ran: 5, commits: 5}, countsOf(s).since(before), "a lone writer is never held back for company")
}

// TestQueuedWritesShareOneCommit queues a full batch behind a held write and
// checks that it costs one COMMIT, and that every write in it is stored and
// reported as its caller's struct.
func TestQueuedWritesShareOneCommit(t *testing.T) {
	s := storeWithNode(t)
	before := countsOf(s)
	release, held := hold(t, s)

	const writers = MaxBatch
	recs := make([]*meta.FileRecord, writers)
	results := make([]<-chan error, writers)
	for i := range recs {
		recs[i] = newRec("f", "node-1")
		results[i] = async(func() error { return s.CreateFile(context.Background(), recs[i]) })
	}
	waitQueued(t, s, writers)
	release()
	require.NoError(t, <-held)
	for i, res := range results {
		require.NoError(t, <-res, "writer %d", i)
	}
	got := countsOf(s).since(before)
	require.Equal(t, int64(1+writers), got.ran)
	require.Equal(t, int64(2), got.commits, "the held write's commit, then one for all %d queued writes", writers)
	for _, rec := range recs {
		require.Equal(t, int64(1), rec.Version)
		requireStored(t, s, rec)
	}
}

// TestFailingMemberFailsAlone puts writes that fail in different ways into
// one batch with writes that succeed: each failure keeps the kind it has on
// its own, leaves nothing behind, and the others are committed.
func TestFailingMemberFailsAlone(t *testing.T) {
	s := storeWithNode(t)
	ctx := context.Background()
	existing := newRec("existing", "node-1")
	existing.IdempotencyKey = "key-1"
	require.NoError(t, s.CreateFile(ctx, existing))
	stale := *existing // holds version 1
	stale.Replicas = append([]meta.Replica(nil), existing.Replicas...)
	existing.Status = meta.FileActive
	require.NoError(t, s.UpdateFile(ctx, existing)) // now version 2

	before := countsOf(s)
	release, held := hold(t, s)

	good := make([]*meta.FileRecord, 6)
	goodRes := make([]<-chan error, len(good))
	for i := range good {
		good[i] = newRec("good", "node-1")
		goodRes[i] = async(func() error { return s.CreateFile(ctx, good[i]) })
	}
	sameID := newRec("same id", "node-1")
	sameID.ID = existing.ID
	sameKey := newRec("same idempotency key", "node-1")
	sameKey.IdempotencyKey = existing.IdempotencyKey
	// Its file row is inserted before its copy on an unknown node fails:
	// the savepoint must take the row back out.
	unknownNode := newRec("copy on unknown node", "node-1", "node-9")
	missingID := uuid.NewString()
	staleBefore := stale
	staleBefore.Replicas = append([]meta.Replica(nil), stale.Replicas...)
	failing := []struct {
		name string
		kind errs.Kind
		res  <-chan error
	}{
		{"duplicate id", errs.Conflict, async(func() error { return s.CreateFile(ctx, sameID) })},
		{"duplicate idempotency key", errs.Conflict, async(func() error { return s.CreateFile(ctx, sameKey) })},
		{"unknown node", errs.Invalid, async(func() error { return s.CreateFile(ctx, unknownNode) })},
		{"stale version", errs.Conflict, async(func() error { return s.UpdateFile(ctx, &stale) })},
		{"touch missing file", errs.NotFound, async(func() error { return s.TouchFile(ctx, missingID) })},
	}
	waitQueued(t, s, len(good)+len(failing))
	release()
	require.NoError(t, <-held)

	for _, f := range failing {
		err := <-f.res
		require.Error(t, err, f.name)
		require.Equal(t, f.kind, errs.KindOf(err), "%s: %v", f.name, err)
	}
	for i, res := range goodRes {
		require.NoError(t, <-res, "good write %d", i)
		requireStored(t, s, good[i])
	}
	got := countsOf(s).since(before)
	require.Equal(t, int64(1+len(good)+len(failing)), got.ran)
	require.Equal(t, int64(2), got.commits, "the failures shared the good writes' batch")

	requireAbsent(t, s, sameKey.ID, "the write with a duplicate idempotency key")
	requireAbsent(t, s, unknownNode.ID, "the file row of the write whose copy failed")
	requireStored(t, s, existing)
	require.Equal(t, staleBefore, stale, "a failed update leaves the caller's record as it was")
	require.Zero(t, unknownNode.Version, "a failed create leaves the caller's record as it was")
}

// TestCanceledWhileQueued cancels one caller whose write waits in the queue:
// it returns at once with its context's error, its write never runs, and
// the rest of the queue commits.
func TestCanceledWhileQueued(t *testing.T) {
	s := storeWithNode(t)
	before := countsOf(s)
	release, held := hold(t, s)

	others := make([]*meta.FileRecord, 3)
	otherRes := make([]<-chan error, len(others))
	for i := range others {
		others[i] = newRec("other", "node-1")
		otherRes[i] = async(func() error { return s.CreateFile(context.Background(), others[i]) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := false
	canceled := async(func() error {
		return s.writeTx(ctx, "canceled", func(context.Context, *sql.Tx) error {
			ran = true
			return nil
		})
	})
	waitQueued(t, s, len(others)+1)
	cancel()
	err := <-canceled // while the committer is still held
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))

	release()
	require.NoError(t, <-held)
	for i, res := range otherRes {
		require.NoError(t, <-res, "other write %d", i)
		requireStored(t, s, others[i])
	}
	require.False(t, ran, "a write whose caller left the queue never runs")
	require.Equal(t, counts{ran: 1 + int64(len(others)), commits: 2}, countsOf(s).since(before))
}

// TestCanceledWhileRunning cancels a caller's context while its write runs
// inside a batch: the write's statements are not interrupted (that would
// make SQLite roll back the whole batch), and the caller gets the outcome.
func TestCanceledWhileRunning(t *testing.T) {
	s := storeWithNode(t)
	release, held := hold(t, s)

	others := make([]*meta.FileRecord, 3)
	otherRes := make([]<-chan error, len(others))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	canceled := async(func() error {
		return s.writeTx(ctx, "canceled", func(ctx context.Context, tx *sql.Tx) error {
			cancel()
			_, err := tx.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES ('canceled', 'test', 0)`)
			return err
		})
	})
	waitQueued(t, s, 1) // first in its batch
	for i := range others {
		others[i] = newRec("other", "node-1")
		otherRes[i] = async(func() error { return s.CreateFile(context.Background(), others[i]) })
	}
	waitQueued(t, s, 1+len(others))
	release()
	require.NoError(t, <-held)
	require.NoError(t, <-canceled, "the write had started: it commits and says so")
	for i, res := range otherRes {
		require.NoError(t, <-res, "other write %d", i)
		requireStored(t, s, others[i])
	}
	var owner string
	require.NoError(t, s.read.QueryRow(`SELECT owner FROM leases WHERE name = 'canceled'`).Scan(&owner))
}

// TestCommitFailureReachesEveryMember makes a batch's COMMIT fail: one member
// defers its foreign-key checks to the commit and breaks one. Every member
// whose statements succeeded gets the COMMIT's error, none of their writes
// is stored or reflected in their records, and the store keeps working.
func TestCommitFailureReachesEveryMember(t *testing.T) {
	s := storeWithNode(t)
	ctx := context.Background()
	before := countsOf(s)
	release, held := hold(t, s)

	recs := make([]*meta.FileRecord, 4)
	results := make([]<-chan error, len(recs))
	for i := range recs {
		recs[i] = newRec("f", "node-1")
		results[i] = async(func() error { return s.CreateFile(ctx, recs[i]) })
	}
	poisonID := uuid.NewString()
	poison := async(func() error {
		return s.writeTx(ctx, "poison", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO files (id, file_name, content_type, size_bytes, status,
					primary_node_id, replication_factor, ring_position, created_at, updated_at)
				VALUES (?, 'poison', '', 0, 'PENDING', 'no-such-node', 1, 0, 0, 0)`, poisonID)
			return err
		})
	})
	waitQueued(t, s, len(recs)+1)
	release()
	require.NoError(t, <-held)

	err := <-poison
	require.Equal(t, errs.Invalid, errs.KindOf(err), "%v", err)
	for i, res := range results {
		err := <-res
		require.Error(t, err, "write %d was in the batch whose COMMIT failed", i)
		require.Equal(t, errs.Invalid, errs.KindOf(err), "write %d: %v", i, err)
		require.Zero(t, recs[i].Version, "write %d: the caller's record is untouched", i)
		require.Zero(t, recs[i].Replicas[0].ID, "write %d: the caller's record is untouched", i)
		requireAbsent(t, s, recs[i].ID, "a write of the failed batch")
	}
	requireAbsent(t, s, poisonID, "the poison write")
	require.Equal(t, counts{ran: 1 + int64(len(recs)) + 1, commits: 2}, countsOf(s).since(before), "the held write's commit, then the failed one")

	after := newRec("after", "node-1")
	require.NoError(t, s.CreateFile(ctx, after), "the failed COMMIT left no transaction open")
	requireStored(t, s, after)
	require.Equal(t, "0", pragma(t, s.write, "defer_foreign_keys"))
}

// TestRolledBackTransactionFailsTheBatch makes SQLite roll back the shared
// transaction on its own in the middle of a batch: a full database (here
// max_page_count) does that for a one-row INSERT. The members before and
// after the failing one must not be reported committed, nor be committed.
func TestRolledBackTransactionFailsTheBatch(t *testing.T) {
	s := storeWithNode(t)
	ctx := context.Background()
	before := countsOf(s)
	release, held := hold(t, s)

	first := newRec("first", "node-1")
	firstRes := async(func() error { return s.CreateFile(ctx, first) })
	waitQueued(t, s, 1)
	full := async(func() error {
		return s.writeTx(ctx, "fill", func(ctx context.Context, tx *sql.Tx) error {
			var pages int64
			if err := tx.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.FormatInt(pages, 10)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES ('big', ?, 0)`,
				strings.Repeat("x", 1<<20))
			return err
		})
	})
	waitQueued(t, s, 2)
	lastRan := false
	last := async(func() error {
		return s.writeTx(ctx, "last", func(context.Context, *sql.Tx) error {
			lastRan = true
			return nil
		})
	})
	waitQueued(t, s, 3)
	release()
	require.NoError(t, <-held)

	err := <-full
	require.Equal(t, errs.Unavailable, errs.KindOf(err), "a full database: %v", err)
	for name, res := range map[string]<-chan error{"first": firstRes, "last": last} {
		err := <-res
		require.Error(t, err, "%s shared a transaction that SQLite rolled back", name)
		require.Equal(t, errs.Unavailable, errs.KindOf(err), "%s: %v", name, err)
	}
	require.False(t, lastRan)
	requireAbsent(t, s, first.ID, "the write before the one that failed")
	require.Zero(t, first.Version)
	require.Equal(t, int64(1), countsOf(s).since(before).commits, "the held write's commit alone")

	_, err = s.write.Exec(`PRAGMA max_page_count = 4294967294`)
	require.NoError(t, err)
	after := newRec("after", "node-1")
	require.NoError(t, s.CreateFile(ctx, after))
	requireStored(t, s, after)
}

// TestCloseFailsQueuedWrites closes the store while writes wait behind a
// running one: the queued writes fail at once with a closed-store error,
// the running one finishes and commits, Close returns, later writes fail,
// and no goroutine is left behind.
func TestCloseFailsQueuedWrites(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "metadata.db")
	s := withNode(t, openAt(t, path))
	ctx := context.Background()
	release, held := hold(t, s)

	recs := make([]*meta.FileRecord, 5)
	results := make([]<-chan error, len(recs))
	for i := range recs {
		recs[i] = newRec("queued", "node-1")
		results[i] = async(func() error { return s.CreateFile(ctx, recs[i]) })
	}
	waitQueued(t, s, len(recs))
	closed := async(s.Close)
	for i, res := range results {
		err := <-res // while the held write still runs
		require.ErrorIs(t, err, errClosed, "queued write %d", i)
		require.Equal(t, errs.Other, errs.KindOf(err), "queued write %d: the kind a write to a closed database had", i)
	}
	release()
	require.NoError(t, <-held, "the write under way when Close began commits")
	require.NoError(t, <-closed)
	require.ErrorIs(t, s.CreateFile(ctx, newRec("late", "node-1")), errClosed)

	reopened := openAt(t, path)
	var owner string
	require.NoError(t, reopened.read.QueryRow(`SELECT owner FROM leases WHERE name = 'hold'`).Scan(&owner))
	for _, rec := range recs {
		requireAbsent(t, reopened, rec.ID, "a write that Close failed")
	}
	require.NoError(t, reopened.Close())
}

// TestConcurrentWritersAndClose races many writers against Close: every
// write either succeeds and is stored, or fails; none hangs.
func TestConcurrentWritersAndClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "metadata.db")
	s := withNode(t, openAt(t, path))
	ctx := context.Background()
	recs := make([]*meta.FileRecord, 64)
	results := make([]<-chan error, len(recs))
	for i := range recs {
		recs[i] = newRec("racing", "node-1")
		results[i] = async(func() error { return s.CreateFile(ctx, recs[i]) })
	}
	require.NoError(t, s.Close())
	var stored []*meta.FileRecord
	for i, res := range results {
		if err := <-res; err == nil {
			stored = append(stored, recs[i])
		} else if !errors.Is(err, errClosed) {
			require.NoError(t, err, "write %d failed for a reason other than Close", i)
		}
	}
	reopened := openAt(t, path)
	for _, rec := range stored {
		requireStored(t, reopened, rec)
	}
	require.NoError(t, reopened.Close())
}

// TestConcurrentReadersAndClose closes the store under readers that keep
// going, as a background task finishing late does: each read either succeeds
// or fails with an error, never with a data race (run with -race) or a panic.
func TestConcurrentReadersAndClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := withNode(t, openAt(t, filepath.Join(t.TempDir(), "metadata.db")))
	ctx := context.Background()
	rec := newRec("read-while-closing", "node-1")
	require.NoError(t, s.CreateFile(ctx, rec))
	results := make([]<-chan error, 8)
	for i := range results {
		results[i] = async(func() error {
			for range 200 {
				if _, err := s.GetFile(ctx, rec.ID); err != nil {
					return nil // closed under it: an error is the right answer
				}
			}
			return nil
		})
	}
	require.NoError(t, s.Close())
	for _, res := range results {
		require.NoError(t, <-res)
	}
	_, err := s.GetFile(ctx, rec.ID)
	require.Error(t, err, "a read after Close must fail")
	require.NoError(t, s.Close(), "closing twice is harmless")
}

// TestCanceledBeforeItsTurn cancels a queued caller from inside the write
// just ahead of it in the same batch. Whether the caller or the committer
// notices first, the write gets its context's error and never runs.
func TestCanceledBeforeItsTurn(t *testing.T) {
	s := storeWithNode(t)
	release, held := hold(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ahead := async(func() error {
		return s.writeTx(context.Background(), "ahead", func(context.Context, *sql.Tx) error {
			cancel()
			return nil
		})
	})
	waitQueued(t, s, 1)
	ran := false
	behind := async(func() error {
		return s.writeTx(ctx, "behind", func(context.Context, *sql.Tx) error {
			ran = true
			return nil
		})
	})
	waitQueued(t, s, 2)
	release()
	require.NoError(t, <-held)
	require.NoError(t, <-ahead)
	err := <-behind
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.False(t, ran)
}

// TestPanicInWriteReachesItsCaller: a write whose fn panics panics on its
// caller's goroutine, as it would without the committer, and the committer
// goes on: the rest of the batch commits and later writes work.
func TestPanicInWriteReachesItsCaller(t *testing.T) {
	s := storeWithNode(t)
	ctx := context.Background()
	release, held := hold(t, s)
	other := newRec("other", "node-1")
	otherRes := async(func() error { return s.CreateFile(ctx, other) })
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_ = s.writeTx(ctx, "panics", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO leases (name, owner, expires_at) VALUES ('panics', 'test', 0)`); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	waitQueued(t, s, 2)
	release()
	require.NoError(t, <-held)
	require.NoError(t, <-otherRes)
	requireStored(t, s, other)
	p, ok := (<-recovered).(*panicked)
	require.True(t, ok, "the caller panics with what its write panicked with")
	require.Equal(t, "boom", p.value)
	var n int
	require.NoError(t, s.read.QueryRow(`SELECT count(*) FROM leases WHERE name = 'panics'`).Scan(&n))
	require.Zero(t, n, "the panicking write was rolled back")

	after := newRec("after", "node-1")
	require.NoError(t, s.CreateFile(ctx, after))
	requireStored(t, s, after)
}
