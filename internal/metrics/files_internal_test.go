package metrics

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
)

// fakeCounter answers counts from a script and records how often it was asked.
type fakeCounter struct {
	calls  atomic.Int32
	counts map[meta.FileStatus]int
	err    error
}

func (f *fakeCounter) count(context.Context) (map[meta.FileStatus]int, error) {
	f.calls.Add(1)
	return f.counts, f.err
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newFilesByStatus(t *testing.T, count CountFunc, o FilesByStatusOptions) (*FilesByStatus, *prometheus.Registry, *fakeClock) {
	t.Helper()
	f := NewFilesByStatus(count, o)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.counts.now = clock.now
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(f))
	return f, reg, clock
}

const filesHeader = `
# HELP dfs_files Files in the metadata store by status, counted at scrape time (cached briefly).
# TYPE dfs_files gauge
`

func TestFilesByStatusExposesEveryStatus(t *testing.T) {
	fc := &fakeCounter{counts: map[meta.FileStatus]int{meta.FileActive: 12, meta.FileDegraded: 3, meta.FileDeleted: 1}}
	_, reg, _ := newFilesByStatus(t, fc.count, FilesByStatusOptions{})
	want := filesHeader + `
dfs_files{status="ACTIVE"} 12
dfs_files{status="DEGRADED"} 3
dfs_files{status="DELETED"} 1
dfs_files{status="FAILED"} 0
dfs_files{status="PENDING"} 0
dfs_files{status="REBALANCING"} 0
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(want), "dfs_files"))
}

func TestFilesByStatusCachesAnswers(t *testing.T) {
	fc := &fakeCounter{counts: map[meta.FileStatus]int{meta.FileActive: 1}}
	_, reg, clock := newFilesByStatus(t, fc.count, FilesByStatusOptions{CacheFor: 5 * time.Second})

	scrape := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "dfs_files" && m.GetLabel()[0].GetValue() == string(meta.FileActive) {
					return m.GetGauge().GetValue()
				}
			}
		}
		require.Fail(t, "no ACTIVE sample")
		return 0
	}

	require.Equal(t, 1.0, scrape())
	fc.counts = map[meta.FileStatus]int{meta.FileActive: 2}
	clock.advance(4 * time.Second)
	require.Equal(t, 1.0, scrape(), "a fresh answer is reused")
	require.Equal(t, int32(1), fc.calls.Load())

	clock.advance(time.Second)
	require.Equal(t, 2.0, scrape(), "an answer CacheFor old is not")
	require.Equal(t, int32(2), fc.calls.Load())
}

func TestFilesByStatusOnFailure(t *testing.T) {
	fc := &fakeCounter{err: errors.New("metadata store down")}
	f, reg, clock := newFilesByStatus(t, fc.count, FilesByStatusOptions{CacheFor: 5 * time.Second})

	// The scrape itself succeeds: the other series must still be collected.
	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_files"))
	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_files"))
	require.Equal(t, int32(1), fc.calls.Load(), "a failure is cached too, so a down store is not hammered")
	require.Equal(t, 1.0, testutil.ToFloat64(f.errors))

	fc.err = nil
	fc.counts = map[meta.FileStatus]int{meta.FileFailed: 4}
	clock.advance(5 * time.Second)
	require.Equal(t, 6, testutil.CollectAndCount(reg, "dfs_files"))
	require.Equal(t, 1.0, testutil.ToFloat64(f.errors))
}

func TestFilesByStatusBoundsACount(t *testing.T) {
	var sawDeadline atomic.Bool
	slow := func(ctx context.Context) (map[meta.FileStatus]int, error) {
		_, ok := ctx.Deadline()
		sawDeadline.Store(ok)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	f, reg, _ := newFilesByStatus(t, slow, FilesByStatusOptions{Timeout: time.Millisecond})
	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_files"))
	require.True(t, sawDeadline.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(f.errors))
}
