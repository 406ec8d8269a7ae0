package s3

import (
	"context"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/meta"
)

// bucketTTL is how long a bucket read stays cached. A bucket's owner never
// changes, and a bucket is deleted only when empty, so a stale entry can
// only make a read of a just-deleted bucket answer NoSuchKey instead of
// NoSuchBucket; writes check the bucket again in their own transaction.
const bucketTTL = 2 * time.Second

// bucketCache keeps recent bucket reads, saving a metadata read on every
// object request.
type bucketCache struct {
	mu      sync.Mutex
	entries map[string]cachedBucket
}

type cachedBucket struct {
	b       meta.Bucket
	expires time.Time
}

func (c *bucketCache) get(ctx context.Context, name string, read func(context.Context, string) (meta.Bucket, error)) (meta.Bucket, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.b, nil
	}
	b, err := read(ctx, name)
	if err != nil {
		return meta.Bucket{}, err
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) > 10000 {
		c.entries = map[string]cachedBucket{}
	}
	c.entries[name] = cachedBucket{b: b, expires: now.Add(bucketTTL)}
	c.mu.Unlock()
	return b, nil
}

// forget drops a bucket at once, when this coordinator deletes it.
func (c *bucketCache) forget(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}
