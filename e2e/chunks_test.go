//go:build linux

package e2e

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/client"
)

// chunkCopies lists a chunk's ACTIVE copies.
func chunkCopies(c client.Chunk) []string {
	var out []string
	for _, r := range c.Replicas {
		if r.Status == client.CopyActive {
			out = append(out, r.NodeID)
		}
	}
	return out
}

// slowBody yields data through a pipe, calling at(n) once n bytes have
// gone, so a test can strike in the middle of an upload's body. Closing
// the reader ends the writer.
func slowBody(data []byte, n int, at func()) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		const piece = 256 << 10
		for off := 0; off < len(data); off += piece {
			if off == n {
				at()
			}
			if _, err := pw.Write(data[off:min(off+piece, len(data))]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	return pr
}

func TestNodeKilledMidChunkedUploadStillSucceeds(t *testing.T) {
	t.Parallel()
	// The dead node stays on the ring (no eviction), so chunks planned on it
	// after the kill must fail over down their own preference lists.
	c := startCluster(t, options{nodes: 4, coordEnv: []string{"CHUNK_SIZE=1MiB", "HEALTH_FAILURE_THRESHOLD=1000"}})
	victim := c.lc.Nodes()[2]
	data := randomBytes(32 << 20)
	const killAt = 8 << 20
	ctx, cancel := callCtx()
	defer cancel()
	body := slowBody(data, killAt, func() {
		require.NoError(t, c.lc.KillNode(victim))
	})
	defer body.Close()
	res, err := c.api.Upload(ctx, "big.bin", body, int64(len(data)), client.UploadOptions{})
	require.NoError(t, err, "the upload survives a node killed under it")
	f := c.metadata(res.FileID)
	require.Len(t, f.Chunks, 32)
	rg := ringOf(c.lc.Nodes()...)
	moved := 0
	for _, ch := range f.Chunks {
		// What the coordinator had not yet received when the node died: up
		// to CHUNK_UPLOAD_CONCURRENCY+1 chunks and the sockets' buffers.
		if ch.Offset < killAt+8<<20 {
			continue
		}
		on := chunkCopies(ch)
		require.NotContains(t, on, victim, "chunk %d", ch.Index)
		want := slices.DeleteFunc(rg.Preference(ch.ChunkID, 4), func(n string) bool { return n == victim })
		require.ElementsMatch(t, want, on, "chunk %d: the dead node's copy went to the next node of its list", ch.Index)
		if slices.Contains(rg.Preference(ch.ChunkID, 3), victim) {
			moved++
		}
	}
	require.Positive(t, moved, "some late chunk had the dead node in its plan")
	got, _, err := c.download(ctx, res.FileID)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
}

func TestFlippedByteInOneChunkCopyIsRebuiltAloneByVerify(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"CHUNK_SIZE=1MiB"}})
	f := c.mustUpload("four.bin", randomBytes(7<<19)) // 3.5 MiB: four chunks
	md := c.metadata(f.res.FileID)
	require.Len(t, md.Chunks, 4)
	bad := md.Chunks[1]
	holder := chunkCopies(bad)[1]
	before := map[string]map[string]string{}
	for _, n := range c.lc.Nodes() {
		before[n] = c.writes(n)
	}
	blobfault.FlipByte(t, c.lc.DataDir(holder), bad.ChunkID)

	ctx, cancel := callCtx()
	defer cancel()
	v, err := c.api.Verify(ctx, f.res.FileID)
	require.NoError(t, err)
	require.Equal(t, client.FileActive, v.Status)
	require.Len(t, v.Chunks, 4)
	for _, ch := range v.Chunks {
		for _, cp := range ch.Copies {
			if ch.FileID == bad.ChunkID && cp.NodeID == holder {
				require.Equal(t, client.CheckCorrupt, cp.Result)
				require.True(t, cp.Rebuilt)
				continue
			}
			require.Equal(t, client.CheckOK, cp.Result, "chunk %d on %s", ch.Index, cp.NodeID)
			require.False(t, cp.Rebuilt)
		}
	}
	// Only that chunk's copy was rewritten; every other blob is untouched.
	for _, n := range c.lc.Nodes() {
		after := c.writes(n)
		for id, at := range before[n] {
			if id == bad.ChunkID && n == holder {
				continue
			}
			require.Equal(t, at, after[id], "%s on %s was rewritten", id, n)
		}
	}
	b, held := blobfault.Read(t, c.lc.DataDir(holder), bad.ChunkID)
	require.True(t, held, "the rebuilt copy is on %s", holder)
	require.True(t, bytes.Equal(f.data[bad.Offset:bad.Offset+bad.SizeBytes], b), "the rebuilt copy holds the chunk's bytes")
	c.mustRead(f)
}

func TestCoordinatorKilledMidSessionResumesOnAFreshOne(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"CHUNK_SIZE=1MiB"}})
	ctx, cancel := callCtx()
	defer cancel()
	p1, p2 := randomBytes(3<<20), randomBytes(5<<20)
	sess, err := c.api.CreateUpload(ctx, "resumed.bin", "", "")
	require.NoError(t, err)
	_, err = c.api.PutPart(ctx, sess.UploadID, 1, bytes.NewReader(p1), int64(len(p1)))
	require.NoError(t, err)

	// SIGKILL the coordinator while part 2 streams in.
	body := slowBody(p2, 2<<20, func() {
		require.NoError(t, c.lc.KillCoordinator())
	})
	_, err = c.api.PutPart(ctx, sess.UploadID, 2, body, int64(len(p2)))
	require.Error(t, err, "the part in flight is lost with its coordinator")
	require.NoError(t, body.Close())
	require.NoError(t, c.lc.StartCoordinator(ctx))
	c.waitOnRing(c.lc.Nodes()...)

	d, err := c.api.GetUpload(ctx, sess.UploadID)
	require.NoError(t, err, "a fresh coordinator knows the session")
	require.Len(t, d.Parts, 1)
	require.Equal(t, 1, d.Parts[0].PartNumber)
	_, err = c.api.PutPart(ctx, sess.UploadID, 2, bytes.NewReader(p2), int64(len(p2)))
	require.NoError(t, err)
	res, err := c.api.CompleteUpload(ctx, sess.UploadID)
	require.NoError(t, err)
	whole := slices.Concat(p1, p2)
	got, _, err := c.download(ctx, res.FileID)
	require.NoError(t, err)
	require.True(t, bytes.Equal(whole, got))

	// The killed attempt leaves nothing: once its PENDING chunks are settled
	// and the completion's deletes are done, the nodes hold exactly the
	// file's chunks.
	md := c.metadata(res.FileID)
	want := map[string]bool{}
	for _, ch := range md.Chunks {
		want[ch.ChunkID] = true
	}
	eventually(t, settleTimeout, "only the file's chunks are left on the nodes", func() (bool, string) {
		for _, n := range c.lc.Nodes() {
			for id := range c.blobs(n) {
				if !want[id] {
					return false, fmt.Sprintf("%s holds %s, no chunk of the file", n, id)
				}
			}
		}
		return true, ""
	})
}
