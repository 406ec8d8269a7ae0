package ops_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/ops"
)

func TestARunningOperationShowsRateAndETA(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tr := ops.New(ops.Options{Now: func() time.Time { return now }})
	op := tr.Start(ops.Drain, "DEREGISTERED", "node-3", 10)

	got := tr.List().Running
	require.Len(t, got, 1)
	require.Nil(t, got[0].EtaSeconds, "no estimate before the first file")
	require.Equal(t, ops.Running, got[0].State)
	require.Nil(t, got[0].FinishedAt)

	now = now.Add(2 * time.Second)
	op.Add(4, 8000)
	got = tr.List().Running
	require.EqualValues(t, 4, got[0].Done)
	require.EqualValues(t, 10, got[0].Total)
	require.EqualValues(t, 8000, got[0].BytesDone)
	require.InDelta(t, 4000, got[0].BytesPerSecond, 1e-9)
	require.InDelta(t, 3.0, *got[0].EtaSeconds, 1e-9, "6 files left at 2 files a second")

	op.Grow(2)
	running, ok := tr.RunningOn(ops.Drain, "node-3")
	require.True(t, ok)
	require.EqualValues(t, 12, running.Total, "work found later is added")
	_, ok = tr.RunningOn(ops.Drain, "node-2")
	require.False(t, ok, "node-2 has no drain")
	_, ok = tr.RunningOn(ops.Rebalance, "node-3")
	require.False(t, ok, "node-3's operation is a drain")
}

func TestFinishedOperationsMoveToTheBoundedHistory(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tr := ops.New(ops.Options{Now: func() time.Time { return now }, History: 3})
	for i := range 5 {
		op := tr.Start(ops.Repair, "REPAIR", "", 1)
		op.Add(1, int64(i))
		now = now.Add(time.Second)
		op.Finish(i%2 == 0, map[string]int{"n": i})
	}
	failing := tr.Start(ops.Rebalance, "MANUAL", "", 0)
	failing.Fail(errors.New("metadata store down"))
	failing.Finish(true, nil) // a second end changes nothing

	snap := tr.List()
	require.Empty(t, snap.Running)
	require.Len(t, snap.Recent, 4, "the latest History repairs are kept, and the rebalance")
	require.Equal(t, ops.Rebalance, snap.Recent[0].Kind, "newest first")
	require.Equal(t, ops.Failed, snap.Recent[0].State)
	require.Equal(t, map[string]string{"error": "metadata store down"}, asMap(t, snap.Recent[0].Report))
	require.Equal(t, ops.Done, snap.Recent[1].State, "the fifth repair (i=4) succeeded")
	require.Equal(t, map[string]int{"n": 4}, snap.Recent[1].Report)
	require.Equal(t, ops.Failed, snap.Recent[2].State, "the fourth (i=3) did not")
	for _, o := range snap.Recent {
		require.NotNil(t, o.FinishedAt)
		require.Nil(t, o.EtaSeconds, "an ended operation has no ETA")
	}
	require.NotEqual(t, snap.Recent[1].ID, snap.Recent[2].ID)
	require.Equal(t, map[string]int{"n": 2}, snap.Recent[3].Report, "the two oldest repairs are gone")

	// Repairs do not push the rebalance out: the bound is per kind.
	for range 5 {
		tr.Start(ops.Repair, "REPAIR", "", 0).Finish(true, nil)
	}
	snap = tr.List()
	require.Len(t, snap.Recent, 4)
	require.Equal(t, ops.Rebalance, snap.Recent[3].Kind, "the rebalance is kept")
}

// asMap reads a failure report back through its JSON field names.
func asMap(t *testing.T, report any) map[string]string {
	t.Helper()
	raw, err := json.Marshal(report)
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

func TestTheNilTrackerRecordsNothing(t *testing.T) {
	var tr *ops.Tracker
	op := tr.Start(ops.Rebalance, "MANUAL", "", 3)
	op.Add(1, 1)
	op.Grow(1)
	op.Finish(true, nil)
	snap := tr.List()
	require.NotNil(t, snap.Running)
	require.NotNil(t, snap.Recent)
	require.Empty(t, snap.Running)
	_, ok := tr.RunningOn(ops.Rebalance, "")
	require.False(t, ok)
}

func TestConcurrentCountsAddUp(t *testing.T) {
	tr := ops.New(ops.Options{})
	op := tr.Start(ops.Rebalance, "JOINED", "node-4", 800)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				op.Add(1, 10)
				_ = tr.List()
			}
		})
	}
	wg.Wait()
	op.Finish(true, "ok")
	got := tr.List().Recent[0]
	require.EqualValues(t, 800, got.Done)
	require.EqualValues(t, 8000, got.BytesDone)
	require.EqualValues(t, 800, got.Total)
}
