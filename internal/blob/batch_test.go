package blob

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

// openGatedBatch opens a batch-mode store whose syncs go through s before
// the real syncfs, and reports each wait for a sync on the returned channel.
func openGatedBatch(t *testing.T, dir string, s *gatedSync) (*Disk, <-chan struct{}) {
	t.Helper()
	requireBatch(t)
	d := openDiskMode(t, dir, SyncBatch)
	d.syncer.fn = func() error {
		if err := s.sync(); err != nil {
			return err
		}
		return syncFS(d.rootDir)
	}
	return d, watchJoins(d.syncer)
}

// receiveAsync runs Receive in a goroutine and returns where its error arrives.
func receiveAsync(ctx context.Context, d *Disk, id string, data []byte) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, _, err := d.Receive(ctx, id, sum(data), int64(len(data)), bytes.NewReader(data))
		ch <- err
	}()
	return ch
}

func batchID(i int) string { return fmt.Sprintf("%04x-batch", i*257) }

func TestBatchWritesShareSyncs(t *testing.T) {
	const n = 24
	s := newGatedSync()
	d, joins := openGatedBatch(t, t.TempDir(), s)
	s.hold(1)
	results := make([]<-chan error, n)
	for i := range results {
		results[i] = receiveAsync(context.Background(), d, batchID(i), []byte(batchID(i)))
	}
	// Sync 1 holds until every writer waits for its first sync: some in it,
	// the rest gathered for the next.
	awaitJoins(joins, n)
	s.open(1)
	for _, r := range results {
		require.NoError(t, <-r)
	}
	st := d.SyncStats()
	require.Equal(t, int64(2*n), st.Waits, "each write waits twice")
	// The first waits took at most two syncs; the second waits at most one each.
	require.LessOrEqual(t, st.Syncs, int64(n+2))
	require.Less(t, st.Syncs, int64(2*n), "writes shared syncs")
	for i := range n {
		c, err := d.Rehash(context.Background(), batchID(i))
		require.NoError(t, err)
		require.True(t, c.Intact())
	}
}

func TestBatchSyncErrorFailsEveryWriterOfTheBatch(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	s := newGatedSync()
	d, joins := openGatedBatch(t, dir, s)
	s.hold(1)
	s.fail(1, syscall.EIO)
	results := make([]<-chan error, n)
	for i := range results {
		results[i] = receiveAsync(context.Background(), d, batchID(i), []byte(batchID(i)))
	}
	awaitJoins(joins, n)
	s.open(1)
	for _, r := range results {
		require.ErrorIs(t, <-r, syscall.EIO)
	}
	require.Empty(t, tree(t, dir), "nothing is published, no temp file is left")
	u, err := d.Usage(context.Background())
	require.NoError(t, err)
	require.Zero(t, u.Blobs)
	require.Zero(t, u.BytesUsed)
	require.Zero(t, d.acct.inflight)

	// A later sync could not vouch for the data the failed one lost, so the
	// store takes no more writes or removals, and says so.
	_, _, err = d.Receive(context.Background(), testID, sum(nil), 0, bytes.NewReader(nil))
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, d.Remove(context.Background(), testID), syscall.EIO)
	err = d.Check(context.Background())
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, int64(1), s.calls.Load())
}

func TestBatchSecondSyncErrorUnpublishes(t *testing.T) {
	dir := t.TempDir()
	s := newGatedSync()
	d, _ := openGatedBatch(t, dir, s)
	s.fail(2, syscall.EIO)
	_, _, err := d.Receive(context.Background(), testID, sum([]byte("x")), 1, bytes.NewReader([]byte("x")))
	require.ErrorIs(t, err, syscall.EIO)
	require.Empty(t, tree(t, dir), "the renamed blob and sidecar are taken back")
	_, err = d.Stat(context.Background(), testID)
	require.Equal(t, errs.NotFound, errs.KindOf(err))
	u, err := d.Usage(context.Background())
	require.NoError(t, err)
	require.Zero(t, u.Blobs)
	require.Zero(t, u.BytesUsed)
}

func TestBatchCancelledWriterLeavesNothing(t *testing.T) {
	for _, call := range []int{1, 2} {
		t.Run(fmt.Sprintf("waiting for sync %d", call), func(t *testing.T) {
			dir := t.TempDir()
			s := newGatedSync()
			d, _ := openGatedBatch(t, dir, s)
			s.hold(call)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res := receiveAsync(ctx, d, testID, []byte("some bytes"))
			for i := 1; i <= call; i++ {
				require.Equal(t, i, <-s.started)
			}
			cancel() // while the sync it waits for is still running
			err := <-res
			require.ErrorIs(t, err, context.Canceled)
			require.Equal(t, errs.Unavailable, errs.KindOf(err))
			require.Empty(t, tree(t, dir))
			_, err = d.Stat(context.Background(), testID)
			require.Equal(t, errs.NotFound, errs.KindOf(err))
			require.Zero(t, d.acct.inflight)

			s.open(call)
			receive(t, d, testID, []byte("some bytes")) // a writer leaving does not stop the store
		})
	}
}

func TestBatchRemoveWaitsForASync(t *testing.T) {
	s := newGatedSync()
	d, _ := openGatedBatch(t, t.TempDir(), s)
	receive(t, d, testID, []byte("to be removed"))
	before := s.calls.Load()
	require.NoError(t, d.Remove(context.Background(), testID))
	require.Equal(t, before+1, s.calls.Load())
	// Removing what is absent syncs too: an earlier removal that gave up
	// waiting may have left the unlinks not yet durable.
	require.NoError(t, d.Remove(context.Background(), testID))
	require.Equal(t, before+2, s.calls.Load())
}

// TestLargeCopiesAreSyncedAlone checks that in batch mode a copy over
// BatchSyncMax takes file mode's own fsyncs and no shared sync, that it makes
// the shard directories a batched write created durable itself (their sync
// may not have happened), and that a copy of unknown size shares syncs.
func TestLargeCopiesAreSyncedAlone(t *testing.T) {
	requireBatch(t)
	dir := t.TempDir()
	d := openDiskOpts(t, dir, Options{SyncMode: SyncBatch, BatchSyncMax: 16})
	ctx := context.Background()
	small, large := []byte("ten bytes!"), bytes.Repeat([]byte("L"), 100)
	const smallID, largeID = "abcd-small", "abcd-large" // the same shard

	receive(t, d, smallID, small)
	require.Equal(t, int64(2), d.SyncStats().Waits, "a small copy waits for two shared syncs")

	var synced []string
	orig := syncDir
	syncDir = func(dir string) error { synced = append(synced, dir); return orig(dir) }
	defer func() { syncDir = orig }()
	receive(t, d, largeID, large)
	require.Equal(t, int64(2), d.SyncStats().Waits, "a large copy shares no sync")
	shard := filepath.Join(dir, "ab", "cd")
	require.Subset(t, synced, []string{dir, filepath.Join(dir, "ab"), shard},
		"the root and the shard's parent are synced even though the batched write created the directories")
	c, err := d.Rehash(ctx, largeID)
	require.NoError(t, err)
	require.True(t, c.Intact())

	// Unknown size: shared syncs, whatever the body turns out to be.
	synced = nil
	_, _, err = d.Receive(ctx, "abcd-unknown", sum(large), -1, bytes.NewReader(large))
	require.NoError(t, err)
	require.Equal(t, int64(4), d.SyncStats().Waits)
	require.Empty(t, synced, "a batched copy fsyncs no directory")

	// Every copy survives reopening.
	require.NoError(t, d.Close())
	d2 := openDiskOpts(t, dir, Options{SyncMode: SyncBatch, BatchSyncMax: 16})
	require.Equal(t, int64(3), d2.Recovery().Blobs)
	require.Zero(t, d2.Recovery().TempFilesRemoved)
}
