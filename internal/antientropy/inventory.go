package antientropy

import (
	"context"
	"sync"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// inventories reads every ring node's blob listing in id order, in step with
// the metadata pages: upTo hands out what each node holds in one id range and
// keeps what it read beyond the range for the next one, so each blob is
// listed once per pass whatever the ratio of a node's blobs to all files.
type inventories struct {
	nodes   Nodes
	cluster Cluster
	limit   int
	mu      sync.Mutex
	byNode  map[string]*inventory
	// onRing is the ring of the previous range, so a node that left and
	// came back meanwhile lists afresh.
	onRing map[string]bool
}

// inventory is one node's listing, read ahead.
type inventory struct {
	buf   []wire.BlobInfo // listed, not yet handed out, in id order
	after string          // the listing's cursor: everything up to it was read
	done  bool            // the listing reached its end
}

func newInventories(nodes Nodes, cluster Cluster, limit int) *inventories {
	return &inventories{nodes: nodes, cluster: cluster, limit: limit, byNode: map[string]*inventory{}}
}

// upTo returns, for every ring node that answered, the blobs it holds with
// ids in (lo, hi]. A node that cannot be listed is left out, so nothing is
// judged missing on it; its listing starts again after hi next time.
func (iv *inventories) upTo(ctx context.Context, lo, hi string) map[string]map[string]wire.BlobInfo {
	out := map[string]map[string]wire.BlobInfo{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	nodes := iv.cluster.Ring().Nodes()
	ring := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		ring[node] = true
		base, ok := iv.cluster.BaseURL(node)
		if !ok {
			continue
		}
		iv.mu.Lock()
		inv := iv.byNode[node]
		if inv == nil || (iv.onRing != nil && !iv.onRing[node]) {
			// New to the ring since the pass started, or back on it: list
			// from this range.
			inv = &inventory{after: lo}
			iv.byNode[node] = inv
		}
		// A listing that reached its end may have grown since (copies
		// written during the pass): ask again from where it stopped, one
		// short call when nothing is new.
		inv.done = false
		iv.mu.Unlock()
		wg.Go(func() {
			held, err := iv.read(ctx, base, inv, lo, hi)
			iv.mu.Lock()
			defer iv.mu.Unlock()
			if err != nil {
				// Left out of this range; the next one lists afresh from hi.
				iv.byNode[node] = &inventory{after: hi}
				return
			}
			mu.Lock()
			out[node] = held
			mu.Unlock()
		})
	}
	wg.Wait()
	iv.mu.Lock()
	iv.onRing = ring
	iv.mu.Unlock()
	return out
}

// read hands out inv's blobs in (lo, hi], listing more from the node as
// needed.
func (iv *inventories) read(ctx context.Context, base string, inv *inventory, lo, hi string) (map[string]wire.BlobInfo, error) {
	held := map[string]wire.BlobInfo{}
	for {
		for len(inv.buf) > 0 && inv.buf[0].ID <= hi {
			if b := inv.buf[0]; b.ID > lo {
				held[b.ID] = b
			}
			inv.buf = inv.buf[1:]
		}
		if len(inv.buf) > 0 || inv.done {
			return held, nil
		}
		l, err := iv.nodes.List(ctx, base, inv.after, iv.limit)
		if err != nil {
			return nil, err
		}
		inv.buf = l.Blobs
		if len(l.Blobs) > 0 {
			inv.after = l.Blobs[len(l.Blobs)-1].ID
		}
		inv.done = l.Next == ""
	}
}
