package s3

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

func TestBucketCacheUsesEntriesOnlyWhileTrusted(t *testing.T) {
	ctx := context.Background()
	reads := 0
	owner := "alice"
	read := func(context.Context, string) (meta.Bucket, error) {
		reads++
		if owner == "" {
			return meta.Bucket{}, errs.E(errs.NotFound, "no bucket")
		}
		return meta.Bucket{Name: "b", Owner: owner}, nil
	}
	live := true
	var c bucketCache
	c.trusted = func() bool { return live }

	for range 3 {
		b, err := c.get(ctx, "b", read)
		require.NoError(t, err)
		require.Equal(t, "alice", b.Owner)
	}
	require.Equal(t, 1, reads, "trusted: one read")

	// Deleted and created again by another owner through another
	// coordinator: its notice drops the entry.
	owner = "bob"
	c.forget("b")
	b, err := c.get(ctx, "b", read)
	require.NoError(t, err)
	require.Equal(t, "bob", b.Owner)

	// Notices cannot arrive: every get reads.
	live, reads = false, 0
	for range 2 {
		_, err := c.get(ctx, "b", read)
		require.NoError(t, err)
	}
	require.Equal(t, 2, reads)

	// Subscribed again: what was held is dropped.
	live = true
	owner = "carol"
	c.forgetAll()
	b, err = c.get(ctx, "b", read)
	require.NoError(t, err)
	require.Equal(t, "carol", b.Owner)
}
