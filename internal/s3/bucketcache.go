package s3

import (
	"context"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/meta"
)

// bucketTTL is how long a bucket read stays cached. A bucket's owner never
// changes while it exists, and a deletion drops the entry on every
// coordinator that caches it (Options.Peers) before it answers; writes
// check the bucket again in their own transaction.
const bucketTTL = 2 * time.Second

// bucketCache keeps recent bucket reads, saving a metadata read on every
// object request.
type bucketCache struct {
	// trusted reports whether entries may be used now; nil means always.
	trusted func() bool

	mu      sync.Mutex
	entries map[string]cachedBucket
	// forgotten counts the deletions seen, so that a read begun before one
	// does not cache what it read.
	forgotten uint64
}

type cachedBucket struct {
	b       meta.Bucket
	expires time.Time
}

func (c *bucketCache) get(ctx context.Context, name string, read func(context.Context, string) (meta.Bucket, error)) (meta.Bucket, error) {
	if c.trusted != nil && !c.trusted() {
		return read(ctx, name)
	}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[name]
	forgotten := c.forgotten
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.b, nil
	}
	b, err := read(ctx, name)
	if err != nil {
		return meta.Bucket{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forgotten != forgotten || (c.trusted != nil && !c.trusted()) {
		return b, nil
	}
	if c.entries == nil || len(c.entries) > 10000 {
		c.entries = map[string]cachedBucket{}
	}
	c.entries[name] = cachedBucket{b: b, expires: now.Add(bucketTTL)}
	return b, nil
}

// forget drops a bucket at once, when a coordinator deletes it.
func (c *bucketCache) forget(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.forgotten++
	c.mu.Unlock()
}

// forgetAll drops every entry, when deletions may have been missed.
func (c *bucketCache) forgetAll() {
	c.mu.Lock()
	c.entries = nil
	c.forgotten++
	c.mu.Unlock()
}
