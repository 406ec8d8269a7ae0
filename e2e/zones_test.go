//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/ring"
)

// zoneOfNode maps every node the coordinator knows to the zone placement
// uses for it ("" for none), from GET /api/nodes.
func (c *cluster) zoneOfNode() map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for id, n := range c.nodes() {
		out[id] = n.Zone
	}
	return out
}

// zoneSpread checks that a file is ACTIVE with replication-factor ACTIVE
// copies, each in a zone of its own.
func zoneSpread(f client.File, zones map[string]string) (bool, string) {
	copies := activeCopies(f)
	seen := map[string]bool{}
	for _, n := range copies {
		if z := zones[n]; z != "" {
			seen[z] = true
		}
	}
	if f.Status != client.FileActive || len(copies) != f.ReplicationFactor || len(seen) != len(copies) {
		where := make([]string, len(copies))
		for i, n := range copies {
			where[i] = n + "@" + zones[n]
		}
		return false, fmt.Sprintf("%s is %s with ACTIVE copies %v", f.FileID, f.Status, where)
	}
	return true, ""
}

// allZoneSpread is zoneSpread over every file of ids, with the first that
// fails.
func (c *cluster) allZoneSpread(ids []string) (bool, string) {
	zones := c.zoneOfNode()
	for _, id := range ids {
		if ok, why := zoneSpread(c.metadata(id), zones); !ok {
			return false, why
		}
	}
	return true, ""
}

// uploadMixed stores n files of sizes between minSize and maxSize bytes,
// from workers goroutines at once.
func (c *cluster) uploadMixed(prefix string, n, minSize, maxSize, workers int) []stored {
	c.t.Helper()
	out := make([]stored, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				data := randomBytes(minSize + mrand.IntN(maxSize-minSize+1))
				name := fmt.Sprintf("%s-%03d.bin", prefix, i)
				res, err := c.upload(name, data)
				out[i], errs[i] = stored{name: name, data: data, res: res}, err
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(c.t, err, "upload %s", out[i].name)
	}
	return out
}

// loader uploads and downloads in a loop until stopped: every upload the
// coordinator acknowledged is kept, and every download of one is compared
// byte for byte with what was uploaded.
type loader struct {
	stop chan struct{}
	done sync.WaitGroup

	mu         sync.Mutex
	acked      []stored
	uploadErrs []string
	readErrs   []string
	mismatches []string
	reads      int
}

func (c *cluster) startLoader(seed []stored) *loader {
	l := &loader{stop: make(chan struct{}), acked: slices.Clone(seed)}
	l.done.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			data := randomBytes((8 + mrand.IntN(56)) << 10)
			name := fmt.Sprintf("load-%04d.bin", i)
			res, err := c.upload(name, data)
			l.mu.Lock()
			if err == nil {
				l.acked = append(l.acked, stored{name: name, data: data, res: res})
			} else {
				l.uploadErrs = append(l.uploadErrs, name+": "+err.Error())
			}
			f := l.acked[mrand.IntN(len(l.acked))]
			l.mu.Unlock()

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			got, _, err := c.download(ctx, f.res.FileID)
			cancel()
			l.mu.Lock()
			l.reads++
			switch {
			case err != nil:
				l.readErrs = append(l.readErrs, f.res.FileID+": "+err.Error())
			case !bytes.Equal(got, f.data):
				l.mismatches = append(l.mismatches, f.res.FileID)
			}
			l.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	return l
}

// count is the number of acknowledged uploads so far, the seed included.
func (l *loader) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// finish stops the loader and returns every acknowledged upload.
func (l *loader) finish(t *testing.T) []stored {
	t.Helper()
	close(l.stop)
	l.done.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("load: %d uploads acknowledged (%d refused), %d reads (%d failed)",
		len(l.acked), len(l.uploadErrs), l.reads, len(l.readErrs))
	if len(l.readErrs) > 0 {
		t.Logf("failed reads during the load: %s", strings.Join(l.readErrs[:min(5, len(l.readErrs))], "; "))
	}
	require.Empty(t, l.mismatches, "downloads that returned other bytes than were uploaded")
	return slices.Clone(l.acked)
}

func TestZonesKeepCopiesApartAndSurviveAWholeZoneKilled(t *testing.T) {
	t.Parallel()
	zoneOf := map[string]string{}
	nodeEnvs := map[string][]string{}
	for i := 1; i <= 6; i++ {
		z := fmt.Sprintf("z%d", (i+1)/2) // node-1,2 → z1; node-3,4 → z2; node-5,6 → z3
		zoneOf[localcluster.NodeName(i)] = z
		nodeEnvs[localcluster.NodeName(i)] = []string{"STORAGE_ZONE=" + z}
	}
	c := startCluster(t, options{nodes: 6, nodeEnvs: nodeEnvs})
	require.Equal(t, zoneOf, c.zoneOfNode(), "the coordinator's zones are not the ones the nodes declared")
	r := c.ring()
	require.Len(t, r.Zones, 3, "%+v", r)

	files := c.uploadMixed("zoned", 60, 10<<10, 200<<10, 4)
	eventually(t, settleTimeout, "every file ACTIVE with its copies in three distinct zones", func() (bool, string) {
		return c.allZoneSpread(ids(files))
	})

	// The whole of z1 dies at once, under load.
	victims := []string{localcluster.NodeName(1), localcluster.NodeName(2)}
	load := c.startLoader(files)
	time.Sleep(2 * time.Second)
	killErrs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, v := range victims {
		wg.Go(func() { killErrs[i] = c.lc.KillNode(v) })
	}
	wg.Wait()
	for _, err := range killErrs {
		require.NoError(t, err)
	}
	for _, v := range victims {
		c.waitEvicted(v)
	}
	// Keep the load on a little after the eviction, on a ring of two zones:
	// what is written now cannot have three zones and must be spread later.
	evicted := load.count()
	time.Sleep(3 * time.Second)
	acked := load.finish(t)
	require.Greater(t, len(acked), evicted, "no upload was acknowledged while z1 was away")

	// Not one acknowledged upload may be lost, from before or during the kill.
	for _, f := range acked {
		c.mustRead(f)
	}

	// The zone comes back with its data; the repair loop alone spreads every
	// file over three zones again, those written while z1 was away included.
	for _, v := range victims {
		require.NoError(t, c.lc.StartNode(context.Background(), v))
	}
	c.waitOnRing(victims...)
	eventually(t, settleTimeout*2, "every acknowledged file again ACTIVE in three distinct zones", func() (bool, string) {
		return c.allZoneSpread(ids(acked))
	})
	for _, f := range acked {
		c.mustRead(f)
	}
	// The durability view agrees: any one zone can go, none is collapsed.
	d := c.durability()
	require.GreaterOrEqual(t, d.Files, len(acked))
	require.Zero(t, d.FilesZoneCollapsed)
	require.Equal(t, 2, d.ZoneFailureHeadroom, "three copies in three zones: any two whole zones can fail")
	require.Len(t, d.Zones, 3)
	for _, z := range d.Zones {
		require.Len(t, z.Nodes, 2, "zone %s", z.Zone)
		require.Zero(t, z.FilesLeftWithNoCopy, "zone %s", z.Zone)
		require.Zero(t, z.FilesLeftWithOneCopy, "zone %s: each zone holds one copy of each file", z.Zone)
	}
}

func TestAWeightTwoNodeTakesTwiceTheShare(t *testing.T) {
	t.Parallel()
	// One copy per file, so that "files with a copy on a node" is that
	// node's share of the keyspace. With the default three copies on four
	// nodes every file lacks exactly one node, so a weight-2 node could hold
	// at most 1.5× the others' mean and holds about 1.29× of it on this ring:
	// a count that says little about its share.
	const rf = 1
	heavy := localcluster.NodeName(4)
	c := startCluster(t, options{nodes: 3,
		coordEnv: []string{fmt.Sprintf("REPLICATION_FACTOR=%d", rf)},
		nodeEnvs: map[string][]string{heavy: {"STORAGE_WEIGHT=2"}}})
	files := c.uploadMixed("weighted", 360, 1<<10, 4<<10, 4)

	name, err := c.lc.AddNode(context.Background())
	require.NoError(t, err)
	require.Equal(t, heavy, name)
	c.waitOnRing(heavy)

	r := c.ring()
	var others []float64
	var share float64
	for _, n := range r.Nodes {
		if n.NodeID == heavy {
			require.Equal(t, 2.0, n.Weight, "%+v", n)
			require.Equal(t, 2*r.VirtualNodesPerNode, n.Points, "%+v", n)
			share = n.KeyspaceSharePercent
			continue
		}
		require.Equal(t, 1.0, n.Weight, "%+v", n)
		require.Equal(t, r.VirtualNodesPerNode, n.Points, "%+v", n)
		others = append(others, n.KeyspaceSharePercent)
	}
	require.Len(t, others, 3, "%+v", r)
	mean := (others[0] + others[1] + others[2]) / 3
	require.GreaterOrEqual(t, share, 1.5*mean, "keyspace share of %s: %.2f%%, the others' mean %.2f%%", heavy, share, mean)
	require.LessOrEqual(t, share, 2.5*mean, "keyspace share of %s: %.2f%%, the others' mean %.2f%%", heavy, share, mean)
	require.Empty(t, r.Zones, "no node has a zone")

	// The rebalance has settled once every file's copy is where the ring
	// says.
	ctx, cancel := callCtx()
	nodes, err := c.api.Nodes(ctx)
	cancel()
	require.NoError(t, err)
	members := make([]ring.Member, 0, len(nodes))
	for _, n := range nodes {
		members = append(members, ring.Member{Node: n.NodeID, Zone: n.Zone, Weight: n.Weight})
	}
	rg := ring.New(r.VirtualNodesPerNode).WithMembers(members...)
	for _, n := range r.Nodes {
		require.Equal(t, n.Points, rg.PointsOf(n.NodeID), "the ring worked out here differs from the coordinator's")
	}
	held := map[string]int{}
	eventually(t, settleTimeout*2, "every file's copy where the weighted ring puts it", func() (bool, string) {
		clear(held)
		for _, f := range files {
			md := c.metadata(f.res.FileID)
			want := rg.Preference(f.res.FileID, rf)
			slices.Sort(want)
			got := activeCopies(md)
			if md.Status != client.FileActive || !slices.Equal(want, got) {
				return false, fmt.Sprintf("%s is %s on %v, its preference list is %v", f.res.FileID, md.Status, got, want)
			}
			for _, n := range got {
				held[n]++
			}
		}
		return true, ""
	})

	// Files are few, so the count is noisy: on this ring the heavy node owns
	// about 40% of the keyspace and the others about 20% on average, so it
	// should hold about 2× their mean. 1.3× is generous (a weight-1 node
	// would hold 1×), and with 360 files it is about 3.8 standard deviations
	// below what to expect.
	otherMean := float64(len(files)-held[heavy]) / 3
	t.Logf("files per node: %v (share of %s %.2f%%, others' mean %.2f%%)", held, heavy, share, mean)
	require.GreaterOrEqual(t, float64(held[heavy]), 1.3*otherMean,
		"%s holds %d files, the others %.1f on average: %v", heavy, held[heavy], otherMean, held)
	for _, f := range files[:20] {
		c.mustRead(f)
	}
}

func TestAZonelessClusterMovesNothingOnRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	files := c.uploadMixed("plain", 30, 4<<10, 32<<10, 4)
	c.waitStatus(client.FileActive, ids(files)...)

	placementOf := func() map[string][]string {
		out := map[string][]string{}
		for _, f := range files {
			out[f.res.FileID] = activeCopies(c.metadata(f.res.FileID))
		}
		return out
	}
	writesOf := func() map[string]map[string]string {
		out := map[string]map[string]string{}
		for _, n := range c.lc.Nodes() {
			out[n] = c.writes(n)
		}
		return out
	}
	ringPoints := func() client.RingInfo {
		var r client.RingInfo
		require.Equal(t, 200, c.getJSON("/api/nodes/ring?points=true", &r))
		return r
	}
	beforePlacement, beforeWrites, beforeRing := placementOf(), writesOf(), ringPoints()
	require.Empty(t, beforeRing.Zones)
	require.Len(t, beforeRing.Points, 3*beforeRing.VirtualNodesPerNode)
	for _, n := range beforeRing.Nodes {
		require.Empty(t, n.Zone)
		require.Equal(t, 1.0, n.Weight)
	}

	// The whole cluster restarts on the same data, still without zones.
	require.NoError(t, c.lc.StopCoordinator())
	for _, n := range c.lc.Nodes() {
		require.NoError(t, c.lc.StopNode(n))
	}
	require.NoError(t, c.lc.StartCoordinator(context.Background()))
	for _, n := range c.lc.Nodes() {
		require.NoError(t, c.lc.StartNode(context.Background(), n))
	}
	c.waitOnRing(c.lc.Nodes()...)
	// A few repair intervals (REPAIR_INTERVAL=1s), for the repair loop and
	// the RECOVERED rebalances to do whatever they would do.
	time.Sleep(4 * time.Second)
	c.waitStatus(client.FileActive, ids(files)...)

	afterRing := ringPoints()
	require.Equal(t, beforeRing.Points, afterRing.Points, "the ring's points moved")
	require.Equal(t, beforeRing.Nodes, afterRing.Nodes)
	require.Equal(t, beforePlacement, placementOf(), "copies moved")
	require.Equal(t, beforeWrites, writesOf(), "copies were written again")
	for _, f := range files {
		c.mustRead(f)
	}
}
