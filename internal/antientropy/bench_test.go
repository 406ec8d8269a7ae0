package antientropy

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// staticNodes lists fixed, sorted inventories at the cost of a binary
// search, so that the benchmark measures the sweep, not a fake node.
type staticNodes struct {
	mu   sync.Mutex
	held map[string][]wire.BlobInfo
}

func (s *staticNodes) add(node string, in wire.BlobInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[node] = append(s.held[node], in)
}

func (s *staticNodes) sort() {
	for _, l := range s.held {
		slices.SortFunc(l, func(a, b wire.BlobInfo) int { return strings.Compare(a.ID, b.ID) })
	}
}

func (s *staticNodes) List(_ context.Context, base, after string, limit int) (wire.BlobList, error) {
	l := s.held[base]
	i, _ := slices.BinarySearchFunc(l, after, func(in wire.BlobInfo, id string) int { return strings.Compare(in.ID, id) })
	for i < len(l) && l[i].ID <= after {
		i++
	}
	out := wire.BlobList{Blobs: l[i:min(i+limit, len(l))]}
	if i+limit < len(l) {
		out.Next = out.Blobs[len(out.Blobs)-1].ID
	}
	return out, nil
}

func (s *staticNodes) Delete(context.Context, string, string) error {
	return errs.E(errs.Invalid, "the benchmark removes nothing")
}

var benchFiles = flag.Int("sweep.files", 20_000, "files in the store BenchmarkPass sweeps")

// BenchmarkPass measures one full pass over -sweep.files files that are all
// where they belong, with nothing to fix: the steady state, in which a pass
// costs one metadata page read per 500 files, a preference list per file,
// and the nodes' listings (here in-memory, so what is measured is the
// coordinator's side; BenchmarkDiskEnumerate in internal/blob measures a
// node's). The rate limit is off.
func BenchmarkPass(b *testing.B) {
	nodes := []string{"node-1", "node-2", "node-3"}
	f := newFixture(b, Options{Rate: 1_000_000_000}, nodes...)
	ctx := context.Background()
	rg := ring.New(100, nodes...)
	lister := &staticNodes{held: map[string][]wire.BlobInfo{}}
	ids := make(chan string)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for id := range ids {
				pref := rg.Preference(id, 3)
				rec := meta.FileRecord{File: meta.File{ID: id, Name: "f", ContentType: "application/octet-stream",
					SizeBytes: 1, Checksum: hexSum("x"), Status: meta.FileActive, PrimaryNodeID: pref[0],
					ReplicationFactor: 3, RingPosition: ring.Position(id)}}
				for _, n := range pref {
					rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: meta.ReplicaActive})
					lister.add(n, wire.BlobInfo{ID: id, Size: 1, Checksum: rec.Checksum})
				}
				if err := f.store.CreateFile(ctx, &rec); err != nil {
					panic(err)
				}
			}
		})
	}
	start := time.Now()
	for range *benchFiles {
		ids <- uuid.NewString()
	}
	close(ids)
	wg.Wait()
	b.Logf("stored %d files in %v", *benchFiles, time.Since(start).Round(time.Millisecond))
	lister.sort()
	o := f.sw.o
	o.Nodes = lister
	sw, err := New(o)
	require.NoError(b, err)
	for b.Loop() {
		require.NoError(b, sw.saveState(ctx, State{}))
		rep, err := sw.Pass(ctx)
		require.NoError(b, err)
		require.Equal(b, *benchFiles, rep.Checked)
		require.Zero(b, rep.Found[Misplaced]+rep.Found[Missing]+rep.Found[Corrupt]+rep.Found[Orphan], fmt.Sprint(rep.Found))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N**benchFiles), "ns/file")
}
