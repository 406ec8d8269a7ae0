package blob

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

func batchItem(id string, data []byte) BatchItem {
	return BatchItem{ID: id, Checksum: sum(data), Data: data}
}

// ReceiveBatch answers every item as Receive would, in order: new small
// blobs are appended, a repeat of an id in the same batch is a no-op or a
// conflict, a held blob is a no-op, a large one becomes a file, a body that
// does not hash to its checksum and one that does not fit are refused and
// leave nothing behind.
func TestVolumesReceiveBatchAnswersAsReceive(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{InlineMax: 1 << 10, CapacityBytes: 8 << 10})
	putV(t, v, vid(0), payload(0))

	large := bytes.Repeat([]byte("L"), 2<<10)
	tooBig := bytes.Repeat([]byte("B"), 1000)
	items := []BatchItem{
		batchItem(vid(1), payload(1)),
		batchItem(vid(0), payload(0)), // held: no-op
		batchItem(vid(1), payload(1)), // repeat, same bytes: no-op
		batchItem(vid(1), payload(2)), // repeat, other bytes: conflict
		{ID: vid(3), Checksum: sum([]byte("declared")), Data: []byte("sent")},
		batchItem(vid(4), large), // over InlineMax: a file
		batchItem(vid(5), payload(5)),
		{ID: "../x", Checksum: sum([]byte("x")), Data: []byte("x")},
		batchItem(vid(6), payload(6)),
	}
	res := v.ReceiveBatch(context.Background(), items)
	require.Len(t, res, len(items))

	created := func(i int, data []byte) {
		t.Helper()
		require.NoError(t, res[i].Err, "item %d", i)
		require.True(t, res[i].Created, "item %d", i)
		require.Equal(t, Info{ID: items[i].ID, Size: int64(len(data)), Checksum: sum(data)}, res[i].Info, "item %d", i)
	}
	created(0, payload(1))
	require.NoError(t, res[1].Err)
	require.False(t, res[1].Created)
	require.NoError(t, res[2].Err)
	require.False(t, res[2].Created, "the second of two same writes is the no-op")
	require.Equal(t, errs.Conflict, errs.KindOf(res[3].Err), "%v", res[3].Err)
	require.Equal(t, errs.Corrupt, errs.KindOf(res[4].Err), "%v", res[4].Err)
	created(5, large)
	created(6, payload(5))
	require.Equal(t, errs.Invalid, errs.KindOf(res[7].Err), "%v", res[7].Err)
	created(8, payload(6))

	// A second batch, alone so that no write of the first races it for
	// the capacity: the capacity takes some of these, not all.
	items = nil
	for i := 7; i < 12; i++ {
		items = append(items, batchItem(vid(i), tooBig))
	}
	res = v.ReceiveBatch(context.Background(), items)
	require.Len(t, res, len(items))
	var fitted, refused int
	for i := range items {
		switch {
		case res[i].Err == nil:
			created(i, tooBig)
			fitted++
		default:
			require.Equal(t, errs.NoSpace, errs.KindOf(res[i].Err), "%v", res[i].Err)
			requireGone(t, v, items[i].ID)
			refused++
		}
	}
	require.NotZero(t, fitted)
	require.NotZero(t, refused)
	require.Zero(t, v.acct.inflight, "refused writes hold no capacity")
	requireGone(t, v, vid(3))

	_, err := os.Stat(blobPath(v.disk.root, vid(4)))
	require.NoError(t, err, "the large blob is a file")
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{InlineMax: 1 << 10, CapacityBytes: 8 << 10})
	for id, data := range map[string][]byte{vid(0): payload(0), vid(1): payload(1), vid(4): large, vid(5): payload(5), vid(6): payload(6)} {
		requireHeld(t, v, id, data)
	}
}

// The new small blobs of a batch are handed to the appender together and
// share its syncs; a failed sync fails every one it covered, cuts the
// volume back and releases their capacity.
func TestVolumesReceiveBatchSharesSyncsAndFailsTogether(t *testing.T) {
	dir := t.TempDir()
	v := openVolumes(t, dir, Options{})
	putV(t, v, vid(0), payload(0))
	synced := v.length(v.active)

	const n = 20
	batch := func(from int) []BatchItem {
		var items []BatchItem
		for i := from; i < from+n; i++ {
			items = append(items, batchItem(vid(i), payload(i)))
		}
		return items
	}
	orig := syncVolume
	t.Cleanup(func() { syncVolume = orig })
	var fail atomic.Bool
	fail.Store(true)
	syncVolume = func(f *os.File) error {
		if fail.Load() {
			return syscall.EIO
		}
		return orig(f)
	}
	for i, r := range v.ReceiveBatch(context.Background(), batch(1)) {
		require.ErrorIs(t, r.Err, syscall.EIO, "item %d", i)
		requireGone(t, v, vid(1+i))
	}
	require.Equal(t, synced, v.length(v.active), "cut back to the last synced length")
	require.Zero(t, v.acct.inflight)

	// Working again: the first sync is held until the whole batch is
	// queued, so the batch takes at most two syncs (the first record's and
	// the rest's).
	fail.Store(false)
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release)
	var first atomic.Bool
	syncVolume = func(f *os.File) error {
		if first.CompareAndSwap(false, true) {
			<-gate
		}
		return orig(f)
	}
	var queued atomic.Int64
	v.submitted = func() { queued.Add(1) }
	before := v.GroupCommits()
	done := make(chan []BatchResult)
	go func() { done <- v.ReceiveBatch(context.Background(), batch(1)) }()
	require.Eventually(t, func() bool { return queued.Load() == n }, 10*time.Second, time.Millisecond)
	release()
	for i, r := range <-done {
		require.NoError(t, r.Err, "item %d", i)
		require.True(t, r.Created)
	}
	after := v.GroupCommits()
	require.Equal(t, int64(n), after.Waits-before.Waits)
	require.LessOrEqual(t, after.Syncs-before.Syncs, int64(2))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, Options{})
	for i := 0; i <= n; i++ {
		requireHeld(t, v, vid(i), payload(i))
	}
}

// An item whose id another write holds waits for that write, as a PUT
// would; the other items are written meanwhile, and the batch answers once
// every item has its outcome.
func TestVolumesReceiveBatchWaitsForAnotherWriteOfAnID(t *testing.T) {
	v := openVolumes(t, t.TempDir(), Options{})
	unlock, err := v.locks.lock(context.Background(), vid(1))
	require.NoError(t, err)
	done := make(chan []BatchResult, 1)
	go func() {
		done <- v.ReceiveBatch(context.Background(), []BatchItem{batchItem(vid(1), payload(1)), batchItem(vid(2), payload(2))})
	}()
	require.Eventually(t, func() bool {
		_, err := v.Stat(context.Background(), vid(2))
		return err == nil
	}, 10*time.Second, time.Millisecond, "the free id is written")
	select {
	case <-done:
		t.Fatal("the batch answered while another write held one of its ids")
	case <-time.After(50 * time.Millisecond):
	}
	requireGone(t, v, vid(1))
	unlock()
	res := <-done
	for i, r := range res {
		require.NoError(t, r.Err, "item %d", i)
		require.True(t, r.Created, "item %d", i)
	}
	requireHeld(t, v, vid(1), payload(1))
}

// A closed store refuses every item as Receive does.
func TestVolumesReceiveBatchOnAClosedStore(t *testing.T) {
	v := openVolumes(t, t.TempDir(), Options{})
	require.NoError(t, v.Close())
	for _, r := range v.ReceiveBatch(context.Background(), []BatchItem{batchItem(vid(1), payload(1))}) {
		require.Equal(t, errs.Unavailable, errs.KindOf(r.Err), "%v", r.Err)
		require.True(t, strings.Contains(r.Err.Error(), "closed"), "%v", r.Err)
	}
}
