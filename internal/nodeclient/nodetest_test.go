package nodeclient_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
)

// TestInMemoryNode serves a blob.Memory whose blobs the test corrupts
// directly, the way coordinator tests inject bit rot.
func TestInMemoryNode(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Memory: true})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()
	data := []byte("held in memory")
	_, created, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, n.Memory.Corrupt(id))

	check, err := c.Rehash(ctx, n.URL, id)
	require.NoError(t, err)
	require.False(t, check.Intact)
	_, err = c.Get(ctx, n.URL, id, nil)
	requireKind(t, errs.Corrupt, err)

	disk, err := c.Ready(ctx, n.URL)
	require.NoError(t, err)
	require.Equal(t, n.Memory.Identity(), disk)
	n.Memory.SetCheckError(io.ErrUnexpectedEOF)
	_, err = c.Ready(ctx, n.URL)
	requireKind(t, errs.Unavailable, err)
}

// TestNodeComesBack stops a node and starts it again at the same address
// over the same data directory: what it held is still there.
func TestNodeComesBack(t *testing.T) {
	first := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()
	data := []byte("survives a restart")
	_, _, err := c.Put(ctx, first.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, first.Stop())
	_, err = c.Head(ctx, first.URL, id)
	requireKind(t, errs.Unavailable, err)

	again := nodetest.Start(t, nodetest.Options{Addr: first.Addr, Env: map[string]string{"STORAGE_DATA_DIRECTORY": first.DataDir}})
	require.Equal(t, first.URL, again.URL)
	info, err := c.Head(ctx, again.URL, id)
	require.NoError(t, err)
	require.Equal(t, checksum(data), info.Checksum)
}
