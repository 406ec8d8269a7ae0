package localcache

import (
	"context"

	"github.com/dfs-project/dfs/internal/meta"
)

// DeleteObjectIf implements meta.Namespace, dropping the key's row as
// DeleteObject does, before and after the store's write.
func (c *Objects) DeleteObjectIf(ctx context.Context, bucket, key string, p meta.Precondition) (meta.Object, error) {
	k := objectKey{bucket, key}
	c.invalidateKey(k)
	defer c.invalidateKey(k)
	return c.Namespace.DeleteObjectIf(ctx, bucket, key, p)
}
