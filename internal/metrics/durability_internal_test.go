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

// fakeDurability answers from a script and counts how often it was asked.
type fakeDurability struct {
	calls    atomic.Int32
	d        meta.Durability
	headroom int
	err      error
}

func (f *fakeDurability) sample(context.Context) (meta.Durability, int, error) {
	f.calls.Add(1)
	return f.d, f.headroom, f.err
}

func newDurability(t *testing.T, f DurabilityFunc, o DurabilityOptions) (*Durability, *prometheus.Registry, *fakeClock) {
	t.Helper()
	c := NewDurability(f, o)
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.report.now = clock.now
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	return c, reg, clock
}

func TestDurabilityGauges(t *testing.T) {
	fd := &fakeDurability{headroom: 0, d: meta.Durability{
		// Four copies (one being moved) fall into the top bucket with three.
		FilesByCopies: map[int]int{4: 1, 3: 7, 1: 2, 0: 1},
		BytesAtRisk:   4096,
		Nodes: []meta.NodeDurability{
			{NodeID: "node-1", FilesLeftWithOneCopy: 0, FilesLeftWithNoCopy: 2},
			{NodeID: "node-2", FilesLeftWithOneCopy: 3, FilesLeftWithNoCopy: 0},
		},
	}}
	_, reg, _ := newDurability(t, fd.sample, DurabilityOptions{ReplicationFactor: 3})
	want := `
# HELP dfs_durability_files Readable files by healthy copies (ACTIVE copies on HEALTHY nodes); the top bucket is the replication factor and more.
# TYPE dfs_durability_files gauge
dfs_durability_files{copies="0"} 1
dfs_durability_files{copies="1"} 2
dfs_durability_files{copies="2"} 0
dfs_durability_files{copies="3+"} 8
# HELP dfs_durability_bytes_at_risk Bytes of readable files with fewer healthy copies than their replication factor.
# TYPE dfs_durability_bytes_at_risk gauge
dfs_durability_bytes_at_risk 4096
# HELP dfs_durability_failure_headroom Arbitrary node failures survivable now without any file losing its last healthy copy.
# TYPE dfs_durability_failure_headroom gauge
dfs_durability_failure_headroom 0
# HELP dfs_durability_node_files_left Files that would be left with this many healthy copies (1 or 0) if this node failed now.
# TYPE dfs_durability_node_files_left gauge
dfs_durability_node_files_left{copies="0",node="node-1"} 2
dfs_durability_node_files_left{copies="0",node="node-2"} 0
dfs_durability_node_files_left{copies="1",node="node-1"} 0
dfs_durability_node_files_left{copies="1",node="node-2"} 3
`
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(want),
		"dfs_durability_files", "dfs_durability_bytes_at_risk", "dfs_durability_failure_headroom", "dfs_durability_node_files_left"))
}

func TestDurabilityCachesAndFails(t *testing.T) {
	fd := &fakeDurability{err: errors.New("metadata store down")}
	c, reg, clock := newDurability(t, fd.sample, DurabilityOptions{CacheFor: 10 * time.Second})

	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_durability_files", "dfs_durability_failure_headroom"))
	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_durability_files"))
	require.Equal(t, int32(1), fd.calls.Load(), "a failure is cached too")
	require.Equal(t, 1.0, testutil.ToFloat64(c.errors))

	fd.err, fd.headroom = nil, 2
	fd.d = meta.Durability{FilesByCopies: map[int]int{3: 5}}
	clock.advance(10 * time.Second)
	headroom := func() float64 {
		return testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
			collectOnly(c, "dfs_durability_failure_headroom", ch)
		}))
	}
	require.Equal(t, 2.0, headroom())
	fd.headroom = 1
	clock.advance(9 * time.Second)
	require.Equal(t, 2.0, headroom(), "a fresh answer is reused")
	require.Equal(t, 4, testutil.CollectAndCount(reg, "dfs_durability_files"), "every bucket is exposed")
	require.Equal(t, int32(2), fd.calls.Load())
	clock.advance(time.Second)
	require.Equal(t, 1.0, headroom(), "an answer CacheFor old is not")
}

// collectOnly passes on c's samples of one family.
func collectOnly(c prometheus.Collector, name string, out chan<- prometheus.Metric) {
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		if strings.Contains(m.Desc().String(), `"`+name+`"`) {
			out <- m
		}
	}
}

func TestDurabilityBoundsACount(t *testing.T) {
	var sawDeadline atomic.Bool
	slow := func(ctx context.Context) (meta.Durability, int, error) {
		_, ok := ctx.Deadline()
		sawDeadline.Store(ok)
		<-ctx.Done()
		return meta.Durability{}, 0, ctx.Err()
	}
	c, reg, _ := newDurability(t, slow, DurabilityOptions{Timeout: time.Millisecond})
	require.Equal(t, 0, testutil.CollectAndCount(reg, "dfs_durability_files"))
	require.True(t, sawDeadline.Load())
	require.Equal(t, 1.0, testutil.ToFloat64(c.errors))
}

func TestZoneDurabilityGauges(t *testing.T) {
	var calls atomic.Int32
	var fail atomic.Bool
	c := NewZoneDurability(func(context.Context) (meta.ZoneDurability, int, error) {
		calls.Add(1)
		if fail.Load() {
			return meta.ZoneDurability{}, 0, errors.New("metadata store down")
		}
		return meta.ZoneDurability{Files: 9, MinZones: 2, Collapsed: 4, Zones: []meta.ZoneRisk{
			{Zone: "a", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: 4},
			{Zone: "b", Nodes: []string{"node-3"}, FilesLeftWithNoCopy: 1},
			{Nodes: []string{"node-4"}},
		}}, 1, nil
	}, ZoneDurabilityOptions{CacheFor: 10 * time.Second})
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.report.now = clock.now
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	want := `
# HELP dfs_durability_zone_failure_headroom Whole zones that can fail now, whichever they are, without any file losing its last healthy copy.
# TYPE dfs_durability_zone_failure_headroom gauge
dfs_durability_zone_failure_headroom 1
# HELP dfs_durability_zone_files_left Files that would be left with this many healthy copies (1 or 0) if every node of this zone failed now; a node without a zone is its own zone, named by its ID in brackets.
# TYPE dfs_durability_zone_files_left gauge
dfs_durability_zone_files_left{copies="0",zone="[node-4]"} 0
dfs_durability_zone_files_left{copies="0",zone="a"} 0
dfs_durability_zone_files_left{copies="0",zone="b"} 1
dfs_durability_zone_files_left{copies="1",zone="[node-4]"} 0
dfs_durability_zone_files_left{copies="1",zone="a"} 4
dfs_durability_zone_files_left{copies="1",zone="b"} 0
# HELP dfs_files_zone_collapsed Readable files with two healthy copies in one zone while a zone they are not in has a healthy node.
# TYPE dfs_files_zone_collapsed gauge
dfs_files_zone_collapsed 4
`
	names := []string{"dfs_durability_zone_failure_headroom", "dfs_durability_zone_files_left", "dfs_files_zone_collapsed"}
	require.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(want), names...))
	require.Equal(t, int32(1), calls.Load(), "one count serves the scrapes within CacheFor")

	fail.Store(true)
	clock.advance(11 * time.Second)
	require.Zero(t, testutil.CollectAndCount(reg, names...), "a failed count leaves the gauges out")
	require.Equal(t, 1.0, testutil.ToFloat64(c.errors))
}
