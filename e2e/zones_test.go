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
}
