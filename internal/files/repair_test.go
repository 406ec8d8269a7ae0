package files

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// TestStreamingMismatchIsRepairedByRunNotByRead: a copy found corrupt at the
// end of a stream fails the read, and the read does nothing else; the
// quarantine and the rebuild happen in Run.
func TestStreamingMismatchIsRepairedByRunNotByRead(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := newService(t, nodes, ids, nil)
	ctx := context.Background()
	data := strings.Repeat("streamed ", 1000)
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: strings.NewReader(data)})
	require.NoError(t, err)
	// Read buffers smaller than the blob, which the memory nodes keep
	// without block sums: its copies are hashed as they stream, as those
	// of a file stored whole before chunking existed are.
	s.readBufs = newChunkBuffers(1<<12, 1, 1).unbudgeted()
	require.True(t, nodes.stores[res.PrimaryNode].Corrupt(res.FileID))

	d, err := s.Open(ctx, res.FileID, byterange.Request{})
	require.NoError(t, err)
	require.Equal(t, res.PrimaryNode, d.ServedBy)
	_, err = io.ReadAll(d.Body)
	require.Equal(t, errs.Corrupt, errs.KindOf(err))
	require.NoError(t, d.Body.Close())
	rec, err := st.GetFile(ctx, res.FileID)
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, rec.Status, "the read changed no metadata")
	_, err = nodes.stores[res.PrimaryNode].Stat(ctx, res.FileID)
	require.NoError(t, err, "the read deleted nothing")

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(runCtx) }()
	defer func() { stop(); <-done }()
	require.Eventually(t, func() bool {
		rec, err := st.GetFile(ctx, res.FileID)
		require.NoError(t, err)
		r, _ := rec.Replica(res.PrimaryNode)
		c, err := nodes.stores[res.PrimaryNode].Rehash(ctx, res.FileID)
		return err == nil && c.Actual == rec.Checksum && rec.Status == meta.FileActive && r.Status == meta.ReplicaActive
	}, 10*time.Second, 10*time.Millisecond, "quarantined, rebuilt and whole again")
}
