package files

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files/contentcache"
	"github.com/dfs-project/dfs/internal/meta"
)

// cacheEvents records what the service reports about the content cache.
type cacheEvents struct {
	noEvents
	hits, misses int
	servedBy     []string
}

func (e *cacheEvents) ContentCache(hit bool) {
	if hit {
		e.hits++
	} else {
		e.misses++
	}
}

func (e *cacheEvents) Downloaded(servedBy string, _ int, _ int64) {
	e.servedBy = append(e.servedBy, servedBy)
}

// cachedService is a service over three in-memory nodes with a content
// cache of files up to maxFile bytes, holding small upload bodies in memory
// as the coordinator does by default; mod adjusts the options last.
func cachedService(t *testing.T, maxFile int64, mod func(*Options)) (*Service, *gateNodes, meta.Store, *contentcache.Cache) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	cache := contentcache.New(1<<20, maxFile)
	s, st := newService(t, nodes, ids, func(o *Options) {
		o.ContentCache = cache
		o.MemorySpoolMax, o.MemorySpoolLimit = 1<<10, 1<<20
		if mod != nil {
			mod(o)
		}
	})
	return s, nodes, st, cache
}

func readAll(t *testing.T, d *Download) string {
	t.Helper()
	defer d.Body.Close()
	b, err := io.ReadAll(d.Body)
	require.NoError(t, err)
	return string(b)
}

func TestContentCacheAnswersRepeatedDownloadsWithoutANode(t *testing.T) {
	ev := &cacheEvents{}
	s, nodes, _, cache := cachedService(t, 512, func(o *Options) { o.Events = ev })
	ctx := context.Background()
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: strings.NewReader("hot bytes")})
	require.NoError(t, err)
	got, ok := cache.Get(res.FileID, res.Checksum)
	require.True(t, ok, "an upload held in memory fills the cache")
	require.Equal(t, "hot bytes", string(got))

	// Evicted: the next read asks a node and fills the cache again.
	cache.Remove(res.FileID)
	d, err := s.Open(ctx, res.FileID, byterange.Request{})
	require.NoError(t, err)
	require.False(t, d.FromCache, "a read of a file not in the cache comes from a node")
	require.NotEmpty(t, d.ServedBy)
	require.Equal(t, "hot bytes", readAll(t, d))
	require.EqualValues(t, 1, nodes.gets.Load())

	// Every copy gone from every node: the cache still answers, and no node is asked.
	for _, store := range nodes.stores {
		require.NoError(t, store.Remove(ctx, res.FileID))
	}
	d, err = s.Open(ctx, res.FileID, byterange.Request{})
	require.NoError(t, err)
	require.True(t, d.FromCache)
	require.Empty(t, d.ServedBy)
	require.Equal(t, "hot bytes", readAll(t, d))
	d, err = s.Open(ctx, res.FileID, byterange.Request{Range: "bytes=4-"})
	require.NoError(t, err)
	require.True(t, d.FromCache)
	require.Equal(t, &byterange.Range{Start: 4, Length: 5}, d.Range)
	require.Equal(t, "bytes", readAll(t, d))
	require.EqualValues(t, 1, nodes.gets.Load(), "no node was asked after the first read")
	require.Equal(t, 2, ev.hits)
	require.Equal(t, 1, ev.misses)
	require.Len(t, ev.servedBy, 3)
	require.NotEmpty(t, ev.servedBy[0])
	require.Equal(t, []string{"", ""}, ev.servedBy[1:], "cache hits are reported with no node")

	// A delete frees the entry, and the deleted file is refused before the cache is asked.
	_, err = s.Delete(ctx, res.FileID)
	require.NoError(t, err)
	n, _ := cache.Usage()
	require.Zero(t, n)
	_, err = s.Open(ctx, res.FileID, byterange.Request{})
	require.True(t, errs.Is(err, errs.NotFound), "%v", err)
}

func TestContentCacheKeepsOnlyVerifiedSmallFiles(t *testing.T) {
	s, nodes, st, cache := cachedService(t, 64, nil)
	ctx := context.Background()

	// Larger than the cache's per-file limit: read from a node every time.
	big, err := s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(bytes.Repeat([]byte("x"), 100))})
	require.NoError(t, err)
	for range 2 {
		d, err := s.Open(ctx, big.FileID, byterange.Request{})
		require.NoError(t, err)
		require.False(t, d.FromCache)
		readAll(t, d)
	}
	require.EqualValues(t, 2, nodes.gets.Load())

	// A range read of a small file is not verified whole, so it fills nothing.
	small, err := s.Upload(ctx, UploadRequest{FileName: "small", Body: strings.NewReader("0123456789")})
	require.NoError(t, err)
	_, cached := cache.Get(small.FileID, small.Checksum)
	require.True(t, cached, "the upload put it there")
	cache.Remove(small.FileID)
	d, err := s.Open(ctx, small.FileID, byterange.Request{Range: "bytes=0-3"})
	require.NoError(t, err)
	require.False(t, d.FromCache)
	readAll(t, d) // the fake nodes ignore ranges; what matters is that nothing was kept
	n, _ := cache.Usage()
	require.Zero(t, n, "a range read must not fill the cache")

	// Every copy corrupt: the download fails and nothing is cached.
	rec, err := st.GetFile(ctx, small.FileID)
	require.NoError(t, err)
	for _, r := range rec.Replicas {
		require.True(t, nodes.stores[r.NodeID].Corrupt(small.FileID))
	}
	_, err = s.Open(ctx, small.FileID, byterange.Request{})
	require.Error(t, err)
	n, _ = cache.Usage()
	require.Zero(t, n, "bytes that failed verification must never be cached")
}

func TestContentCacheNeedsVerification(t *testing.T) {
	s, _, _, cache := cachedService(t, 512, func(o *Options) { o.VerifyOnDownload = false })
	ctx := context.Background()
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: strings.NewReader("unverified")})
	require.NoError(t, err)
	for range 2 {
		d, err := s.Open(ctx, res.FileID, byterange.Request{})
		require.NoError(t, err)
		require.False(t, d.FromCache)
		require.Equal(t, "unverified", readAll(t, d))
	}
	n, _ := cache.Usage()
	require.Zero(t, n, "neither the upload nor the downloads fill a cache that would go unchecked")
}

func TestContentCacheIsNotFilledBySpoolFilesOrFailedUploads(t *testing.T) {
	s, _, _, cache := cachedService(t, 512, func(o *Options) { o.MemorySpoolMax = 0 })
	ctx := context.Background()
	_, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: strings.NewReader("spooled to disk")})
	require.NoError(t, err)
	n, _ := cache.Usage()
	require.Zero(t, n, "only a body held in memory is put in the cache by its upload")

	s, nodes, _, cache := cachedService(t, 512, nil)
	for _, id := range []string{"A", "B", "C"} {
		nodes.fail[id] = errs.E(errs.Unavailable, "connection refused")
	}
	_, err = s.Upload(ctx, UploadRequest{FileName: "f", Body: strings.NewReader("nobody took it")})
	require.Error(t, err)
	n, _ = cache.Usage()
	require.Zero(t, n, "a failed upload caches nothing")
}

var _ Events = (*cacheEvents)(nil)

// byteEvents records the bytes each download reports at its close.
type byteEvents struct {
	noEvents
	bytes []int64
}

func (e *byteEvents) Downloaded(_ string, _ int, n int64) { e.bytes = append(e.bytes, n) }

// TestInMemoryHandsOverAVerifiedBody: a small file verified whole, from a
// node or from the content cache, hands its bytes over once and reports them
// as sent at the close; a range, streamed from the node, does not.
func TestInMemoryHandsOverAVerifiedBody(t *testing.T) {
	ev := &byteEvents{}
	s, _, _, cache := cachedService(t, 512, func(o *Options) { o.Events = ev })
	ctx := context.Background()
	res, err := s.Upload(ctx, UploadRequest{FileName: "f", Body: strings.NewReader("held in memory")})
	require.NoError(t, err)

	for _, fromCache := range []bool{false, true} {
		if !fromCache {
			cache.Remove(res.FileID)
		}
		d, err := s.Open(ctx, res.FileID, byterange.Request{})
		require.NoError(t, err)
		require.Equal(t, fromCache, d.FromCache)
		b, ok := d.InMemory()
		require.True(t, ok)
		require.Equal(t, "held in memory", string(b))
		rest, ok := d.InMemory()
		require.True(t, ok)
		require.Empty(t, rest, "the bytes are handed over once")
		n, err := d.Body.Read(make([]byte, 8))
		require.Equal(t, 0, n)
		require.ErrorIs(t, err, io.EOF)
		require.NoError(t, d.Body.Close())
		require.Equal(t, []int64{int64(len(b))}, ev.bytes)
		ev.bytes = nil
	}

	cache.Remove(res.FileID)
	d, err := s.Open(ctx, res.FileID, byterange.Request{Range: "bytes=0-3"})
	require.NoError(t, err)
	require.NotNil(t, d.Range)
	b, ok := d.InMemory()
	require.True(t, ok, "a range of a copy without block sums is read whole and checked before it is sent")
	require.Equal(t, "held", string(b))
	require.NoError(t, d.Body.Close())
}
