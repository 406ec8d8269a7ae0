package files

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // the parts' MD5 is what is checked
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

const testChunk = 1 << 10

func chunkedService(t *testing.T, nodes *gateNodes, ids []string, mod func(*Options)) (*Service, meta.Store) {
	t.Helper()
	s, st := newService(t, nodes, ids, func(o *Options) {
		o.ChunkSize, o.ChunkConcurrency = testChunk, 2
		if mod != nil {
			mod(o)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, st
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func sum256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func download(t *testing.T, s *Service, id string, q byterange.Request) []byte {
	t.Helper()
	d, err := s.Open(context.Background(), id, q)
	require.NoError(t, err)
	defer d.Body.Close()
	got, err := io.ReadAll(d.Body)
	require.NoError(t, err)
	require.Equal(t, d.Length(), int64(len(got)))
	return got
}

func TestLargeUploadIsStoredAsChunksPlacedByTheirOwnKeys(t *testing.T) {
	ids := []string{"A", "B", "C", "D", "E"}
	nodes := newGateNodes(ids...)
	s, st := chunkedService(t, nodes, ids, nil)
	data := randomBytes(t, 5*testChunk+17)
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "big.bin", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, res.Status)
	require.Equal(t, sum256(data), res.Checksum)
	require.Equal(t, int64(len(data)), res.SizeBytes)

	rec, err := s.Metadata(context.Background(), res.FileID)
	require.NoError(t, err)
	require.True(t, rec.Manifest())
	require.Empty(t, rec.Replicas, "a manifest has no copies of its own")
	require.Len(t, rec.Chunks, 6)
	rg := ring.New(100, ids...)
	var offset int64
	for i, c := range rec.Chunks {
		require.Equal(t, i, c.Chunk.Index)
		require.Equal(t, offset, c.Chunk.Offset)
		want := data[offset : offset+c.SizeBytes]
		require.Equal(t, sum256(want), c.Checksum)
		offset += c.SizeBytes
		// Each chunk sits where the ring puts its own id, on nodes that hold
		// exactly its bytes under that id.
		require.ElementsMatch(t, rg.Preference(c.ID, 3), activeOf(c))
		for _, n := range activeOf(c) {
			info, err := nodes.stores[n].Stat(context.Background(), c.ID)
			require.NoError(t, err)
			require.Equal(t, c.Checksum, info.Checksum)
		}
	}
	require.Equal(t, int64(len(data)), offset)
	require.Less(t, int(nodes.maxSeen.Load()), 2*3+1, "at most CHUNK_UPLOAD_CONCURRENCY chunks are written at once")

	// Only the file is listed; its chunks are not files.
	files, total, err := s.List(context.Background(), nil, 0, 10, "")
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, res.FileID, files[0].ID)
	counts, err := st.CountFilesByStatus(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, counts[meta.FileActive])

	require.Equal(t, data, download(t, s, res.FileID, byterange.Request{}))
	for _, r := range [][2]int{{0, 1}, {testChunk - 3, testChunk + 5}, {2*testChunk + 1, 4*testChunk + 2}, {len(data) - 10, len(data) - 1}} {
		q := byterange.Request{Range: "bytes=" + strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1])}
		require.Equal(t, data[r[0]:r[1]+1], download(t, s, res.FileID, q), "range %v", r)
	}

	// A file at or below CHUNK_SIZE stays one blob keyed by its own id.
	small := randomBytes(t, testChunk)
	sres, err := s.Upload(context.Background(), UploadRequest{FileName: "small", Body: bytes.NewReader(small)})
	require.NoError(t, err)
	srec, err := s.Metadata(context.Background(), sres.FileID)
	require.NoError(t, err)
	require.False(t, srec.Manifest())
	require.Len(t, activeOf(srec), 3)
}

func TestChunkCopiesFailOverPerChunk(t *testing.T) {
	ids := []string{"A", "B", "C", "D"}
	nodes := newGateNodes(ids...)
	s, _ := chunkedService(t, nodes, ids, nil)
	nodes.fail["B"] = errs.E(errs.Unavailable, "connection refused")
	data := randomBytes(t, 4*testChunk)
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, res.Status, "a dead node's chunk copies go to the next nodes")
	rec, err := s.Metadata(context.Background(), res.FileID)
	require.NoError(t, err)
	for _, c := range rec.Chunks {
		require.NotContains(t, activeOf(c), "B")
		require.Len(t, activeOf(c), 3)
	}

	// With only two nodes left, every chunk is short and the file says so.
	nodes.fail["C"] = errs.E(errs.Unavailable, "connection refused")
	res, err = s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, res.Status)
	require.Contains(t, res.Reason, "4 of 4 chunks are short of copies")
	require.Equal(t, data, download(t, s, res.FileID, byterange.Request{}))
}

func TestCorruptChunkCopyCostsARetryOfThatChunkAndVerifyRebuildsOnlyIt(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := chunkedService(t, nodes, ids, nil)
	data := randomBytes(t, 3*testChunk)
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	rec, err := s.Metadata(context.Background(), res.FileID)
	require.NoError(t, err)
	bad := rec.Chunks[1]
	holder := s.holders(bad)[0] // the copy a download reads first
	require.True(t, nodes.stores[holder].Corrupt(bad.ID))

	before := nodes.gets.Load()
	require.Equal(t, data, download(t, s, res.FileID, byterange.Request{}))
	require.Equal(t, int32(4), nodes.gets.Load()-before, "three chunks and one retry of the corrupt one")

	// Flip a byte in another chunk's copy and verify: only that chunk is
	// rebuilt, every chunk is reported.
	other := rec.Chunks[2]
	victim := activeOf(other)[1]
	require.True(t, nodes.stores[victim].Corrupt(other.ID))
	require.Eventually(t, func() bool { // the quarantined copy of chunk 1 is rebuilt in the background
		c, err := st.GetFile(context.Background(), bad.ID)
		return err == nil && c.Status == meta.FileActive && len(activeOf(c)) == 3
	}, 10*time.Second, 10*time.Millisecond)
	v, err := s.Verify(context.Background(), res.FileID)
	require.NoError(t, err)
	require.Len(t, v.Chunks, 3)
	require.Equal(t, meta.FileActive, v.Status)
	require.Equal(t, 3, v.HealthyCopies)
	for i, c := range v.Chunks {
		for _, cp := range c.Copies {
			if i == 2 && cp.NodeID == victim {
				require.Equal(t, "CORRUPT", cp.Result)
				require.True(t, cp.Rebuilt)
			} else {
				require.Equal(t, "OK", cp.Result, "chunk %d on %s", i, cp.NodeID)
				require.False(t, cp.Rebuilt)
			}
		}
	}
	require.Equal(t, data, download(t, s, res.FileID, byterange.Request{}))
}

func TestDeleteOfAChunkedFileRemovesEveryChunk(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := chunkedService(t, nodes, ids, nil)
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(randomBytes(t, 3*testChunk+1))})
	require.NoError(t, err)
	rec, err := s.Metadata(context.Background(), res.FileID)
	require.NoError(t, err)
	out, err := s.Delete(context.Background(), res.FileID)
	require.NoError(t, err)
	require.True(t, out.Complete)
	for _, c := range rec.Chunks {
		_, err := st.GetFile(context.Background(), c.ID)
		require.True(t, errs.Is(err, errs.NotFound), "chunk row %s is gone", c.ID)
		for _, n := range ids {
			_, err := nodes.stores[n].Stat(context.Background(), c.ID)
			require.Error(t, err, "chunk %s is gone from %s", c.ID, n)
		}
	}
	_, err = s.Open(context.Background(), res.FileID, byterange.Request{})
	require.True(t, errs.Is(err, errs.NotFound))
}

func TestUploadSessionPartsInAnyOrderReplacedAndCompleted(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := chunkedService(t, nodes, ids, nil)
	ctx := context.Background()
	parts := [][]byte{randomBytes(t, 2*testChunk+3), randomBytes(t, 5), randomBytes(t, testChunk)}
	whole := slices.Concat(parts...)
	sess, err := s.CreateSession(ctx, SessionSpec{FileName: "dir/movie.mkv", ContentType: "video/x-matroska", ExpectedSHA256: sum256(whole)})
	require.NoError(t, err)
	require.Equal(t, "movie.mkv", sess.FileName)
	require.Equal(t, int64(testChunk), sess.ChunkSize, "the answer names CHUNK_SIZE")

	// Parts arrive out of order; part 2 is sent twice, first with the wrong bytes.
	_, err = s.PutPart(ctx, sess.ID, 3, bytes.NewReader(parts[2]), int64(len(parts[2])))
	require.NoError(t, err)
	wrong, err := s.PutPart(ctx, sess.ID, 2, bytes.NewReader([]byte("wrong bytes")), -1)
	require.NoError(t, err)
	_, err = s.PutPart(ctx, sess.ID, 1, bytes.NewReader(parts[0]), -1)
	require.NoError(t, err)
	_, err = s.CompleteSession(ctx, sess.ID, nil, "")
	require.Equal(t, errs.CodeChecksumMismatch, errs.CodeOf(err), "%v", err)
	p2, err := s.PutPart(ctx, sess.ID, 2, bytes.NewReader(parts[1]), 5)
	require.NoError(t, err)
	sum := md5.Sum(parts[1]) //nolint:gosec // see the import
	require.Equal(t, hex.EncodeToString(sum[:]), p2.MD5)
	require.Equal(t, sum256(parts[1]), p2.SHA256)

	got, received, err := s.GetSession(ctx, sess.ID)
	require.NoError(t, err)
	require.Equal(t, sess.ID, got.ID)
	require.Len(t, received, 3)
	require.Equal(t, []int{1, 2, 3}, []int{received[0].Number, received[1].Number, received[2].Number})
	require.Equal(t, int64(5), received[1].SizeBytes)
	require.NotEqual(t, wrong.SHA256, received[1].SHA256)

	// Bad completions change nothing.
	_, err = s.CompleteSession(ctx, sess.ID, []int{2, 1}, "")
	require.Equal(t, errs.CodePartOrder, errs.CodeOf(err))
	_, err = s.CompleteSession(ctx, sess.ID, []int{1, 4}, "")
	require.Equal(t, errs.CodeMissingPart, errs.CodeOf(err))
	_, err = s.PutPart(ctx, sess.ID, 4, bytes.NewReader([]byte("abc")), 2)
	require.True(t, errs.Is(err, errs.Invalid), "a part shorter or longer than announced is refused")
	_, err = s.PutPart(ctx, sess.ID, 0, bytes.NewReader([]byte("abc")), -1)
	require.True(t, errs.Is(err, errs.Invalid))

	rec, err := s.CompleteSession(ctx, sess.ID, []int{1, 2, 3}, "")
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, rec.Status)
	require.Equal(t, sum256(whole), rec.Checksum)
	require.Equal(t, "video/x-matroska", rec.ContentType)
	require.Len(t, rec.Chunks, 5)
	require.Equal(t, whole, download(t, s, rec.ID, byterange.Request{}))
	_, _, err = s.GetSession(ctx, sess.ID)
	require.Equal(t, errs.CodeUploadNotFound, errs.CodeOf(err))

	// The replaced part's chunk was removed from the nodes.
	require.Eventually(t, func() bool {
		n := 0
		for _, id := range ids {
			inv, err := nodes.stores[id].Enumerate(ctx, "", 1000)
			require.NoError(t, err)
			n += len(inv)
		}
		return n == 3*5
	}, 10*time.Second, 10*time.Millisecond, "only the file's five chunks are left, three copies each")
}

func TestCompletingASubsetDropsTheOtherParts(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := chunkedService(t, nodes, ids, nil)
	ctx := context.Background()
	sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
	require.NoError(t, err)
	a, b := randomBytes(t, 100), randomBytes(t, 200)
	for i, p := range [][]byte{a, randomBytes(t, 50), b} {
		_, err := s.PutPart(ctx, sess.ID, i+1, bytes.NewReader(p), -1)
		require.NoError(t, err)
	}
	rec, err := s.CompleteSession(ctx, sess.ID, []int{1, 3}, sum256(slices.Concat(a, b)))
	require.NoError(t, err)
	require.Equal(t, int64(300), rec.SizeBytes)
	require.Equal(t, slices.Concat(a, b), download(t, s, rec.ID, byterange.Request{}))
	deleted, err := st.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileDeleted}, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, id := range deleted {
			if _, err := st.GetFile(ctx, id); err == nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the dropped part's chunk is removed")
}

func TestAbortAndExpiryRemoveASessionsChunks(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := chunkedService(t, nodes, ids, func(o *Options) { o.SessionTTL = time.Hour })
	ctx := context.Background()
	empty := func() bool {
		for _, id := range ids {
			inv, err := nodes.stores[id].Enumerate(ctx, "", 10)
			require.NoError(t, err)
			if len(inv) > 0 {
				return false
			}
		}
		return true
	}
	sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
	require.NoError(t, err)
	_, err = s.PutPart(ctx, sess.ID, 1, bytes.NewReader(randomBytes(t, 3*testChunk)), -1)
	require.NoError(t, err)
	require.NoError(t, s.AbortSession(ctx, sess.ID))
	require.Eventually(t, empty, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, errs.CodeUploadNotFound, errs.CodeOf(s.AbortSession(ctx, sess.ID)))

	// UPLOAD_SESSION_TTL: a session past it is refused and then removed. The
	// service's clock is the test's, so a slow part cannot expire it early.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	short, _ := chunkedService(t, nodes, ids, func(o *Options) {
		o.SessionTTL = 50 * time.Millisecond
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	sess, err = short.CreateSession(ctx, SessionSpec{FileName: "f"})
	require.NoError(t, err)
	require.Equal(t, sess.CreatedAt.Add(50*time.Millisecond), sess.ExpiresAt)
	_, err = short.PutPart(ctx, sess.ID, 1, bytes.NewReader(randomBytes(t, 10)), -1)
	require.NoError(t, err)
	n, err := short.ExpireSessions(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, n, "not expired yet")
	clock.Add(int64(60 * time.Millisecond))
	_, err = short.PutPart(ctx, sess.ID, 2, bytes.NewReader(randomBytes(t, 10)), -1)
	require.Equal(t, errs.CodeUploadNotFound, errs.CodeOf(err))
	n, err = short.ExpireSessions(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, empty, 10*time.Second, 10*time.Millisecond)
}

func TestAStreamOfAnyLengthReusesTheSameFewBuffers(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true                         // more writes than the started channel holds
	s, _ := chunkedService(t, nodes, ids, nil) // CHUNK_UPLOAD_CONCURRENCY 2
	for _, chunks := range []int{8, 64} {
		data := randomBytes(t, chunks*testChunk)
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
		require.NoError(t, err)
		require.Equal(t, data, download(t, s, res.FileID, byterange.Request{}))
	}
	// Two chunks in flight and one being received, then two for a
	// download's read-ahead: the same three buffers, however long the file.
	require.LessOrEqual(t, s.chunkBufs.made.Load(), int64(3), "memory stays flat: no buffer per chunk")
}

// refusingNodes refuses every write to the node named in down, as a node
// whose disk is gone does, so that a lost copy cannot be rebuilt there.
type refusingNodes struct {
	*gateNodes
	down atomic.Pointer[string]
}

func (r *refusingNodes) Put(ctx context.Context, base, id, checksum string, size int64, body io.Reader) (wire.BlobInfo, bool, error) {
	if d := r.down.Load(); d != nil && *d == base {
		return wire.BlobInfo{}, false, errs.E(errs.Unavailable, "node %s refuses writes", base)
	}
	return r.gateNodes.Put(ctx, base, id, checksum, size, body)
}

// TestListAndCountsFollowAChunksCopies: when one chunk loses a copy, the
// file list and the counts by status, which read the stored status, say
// DEGRADED, and ACTIVE again once the repair has put the copy back.
func TestListAndCountsFollowAChunksCopies(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := &refusingNodes{gateNodes: newGateNodes(ids...)}
	nodes.quiet = true
	var rc *reconcile.Reconciler
	s, st := chunkedService(t, nodes.gateNodes, ids, func(o *Options) {
		o.Nodes = nodes
		rc = reconcile.New(reconcile.Options{Store: o.Store, Nodes: nodes, Cluster: o.Cluster.(staticCluster), ReplicationFactor: 3})
		o.Reconciler = rc
	})
	ctx := context.Background()
	data := randomBytes(t, 3*testChunk)
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	listed := func(status meta.FileStatus) bool {
		t.Helper()
		files, _, err := s.List(ctx, []meta.FileStatus{status}, 0, 10, "")
		require.NoError(t, err)
		counts, err := st.CountFilesByStatus(ctx)
		require.NoError(t, err)
		in := len(files) == 1 && files[0].ID == res.FileID
		require.Equal(t, in, counts[status] == 1, "the counts agree with the list: %v", counts)
		return in
	}
	require.True(t, listed(meta.FileActive))

	// One copy of chunk 1 is gone and its node takes no new writes.
	rec, err := s.Metadata(ctx, res.FileID)
	require.NoError(t, err)
	chunk := rec.Chunks[1]
	victim := activeOf(chunk)[0]
	require.NoError(t, nodes.stores[victim].Remove(ctx, chunk.ID))
	nodes.down.Store(&victim)
	v, err := s.Verify(ctx, res.FileID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, v.Status)
	require.True(t, listed(meta.FileDegraded), "listed DEGRADED while a chunk is short of a copy")
	require.False(t, listed(meta.FileActive))
	back, err := st.GetFile(ctx, res.FileID)
	require.NoError(t, err)
	require.Contains(t, back.StatusReason, chunk.ID, "the stored reason names the chunk")

	// The node takes writes again; the repair loop's pass over the DEGRADED
	// chunk puts the copy back and the file is listed ACTIVE.
	nodes.down.Store(nil)
	todo, err := st.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileDegraded}, time.Now().Add(time.Minute), 10)
	require.NoError(t, err)
	require.Equal(t, []string{chunk.ID}, todo, "the chunk is repaired, not the manifest")
	_, err = rc.Reconcile(ctx, chunk.ID)
	require.NoError(t, err)
	require.True(t, listed(meta.FileActive))
	require.False(t, listed(meta.FileDegraded))
	require.Equal(t, data, download(t, s, res.FileID, byterange.Request{}))
}
