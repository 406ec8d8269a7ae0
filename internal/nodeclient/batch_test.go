package nodeclient_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// gate is a proxy in front of a node that counts the batch requests and
// holds the first one until opened.
type gate struct {
	URL     string
	batches atomic.Int32
	puts    atomic.Int32
	open    chan struct{}
	held    chan struct{}
	once    sync.Once
}

func newGate(t *testing.T, node string) *gate {
	u, err := url.Parse(node)
	require.NoError(t, err)
	g := &gate{open: make(chan struct{}), held: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == wire.PathBlobBatch:
			if g.batches.Add(1) == 1 {
				close(g.held)
				<-g.open
			}
		case r.Method == http.MethodPut:
			g.puts.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.release(); srv.Close() })
	g.URL = srv.URL
	return g
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

type putResult struct {
	created bool
	err     error
}

func putAsync(c *nodeclient.Client, ctx context.Context, node, id string, sum string, data []byte) <-chan putResult {
	ch := make(chan putResult, 1)
	go func() {
		_, created, err := c.Put(ctx, node, id, sum, int64(len(data)), bytes.NewReader(data))
		ch <- putResult{created, err}
	}()
	return ch
}

// Small Puts that arrive while a batch is in flight go together in the next
// one, and each gets the answer its own PUT would have had: written, already
// held, a checksum that does not match, an id held with other bytes, an id
// the node refuses.
func TestPutsWaitingForANodeShareTheNextBatch(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	g := newGate(t, n.URL)
	c := nodeclient.New(nodeclient.Options{BatchInflight: 1})
	ctx := context.Background()

	held := []byte("already held")
	_, _, err := nodeclient.New(nodeclient.Options{BatchMax: 1}).Put(ctx, n.URL, "held", checksum(held), int64(len(held)), bytes.NewReader(held))
	require.NoError(t, err)

	first := putAsync(c, ctx, g.URL, "first", checksum([]byte("first")), []byte("first"))
	<-g.held // the first batch, of one, is in flight

	const fresh = 12
	var results []<-chan putResult
	for i := range fresh {
		data := fmt.Appendf(nil, "blob %d", i)
		results = append(results, putAsync(c, ctx, g.URL, fmt.Sprintf("blob-%02d", i), checksum(data), data))
	}
	same := putAsync(c, ctx, g.URL, "held", checksum(held), held)
	other := putAsync(c, ctx, g.URL, "held", checksum([]byte("other bytes")), []byte("other bytes"))
	corrupt := putAsync(c, ctx, g.URL, "corrupt", checksum([]byte("declared")), []byte("sent"))
	badID := putAsync(c, ctx, g.URL, "../escape", checksum([]byte("x")), []byte("x"))
	require.Eventually(t, func() bool { return c.Queued(g.URL) == fresh+4 }, 10*time.Second, time.Millisecond)
	g.release()

	r := <-first
	require.NoError(t, r.err)
	require.True(t, r.created)
	for i, ch := range results {
		r := <-ch
		require.NoError(t, r.err, "blob %d", i)
		require.True(t, r.created, "blob %d", i)
	}
	r = <-same
	require.NoError(t, r.err)
	require.False(t, r.created, "an intact copy with the same checksum is already there")
	r = <-other
	requireKind(t, errs.Conflict, r.err)
	var se *nodeclient.StatusError
	require.ErrorAs(t, r.err, &se)
	require.Equal(t, http.StatusConflict, se.Status)
	require.Contains(t, r.err.Error(), "put held")
	require.Contains(t, r.err.Error(), g.URL)
	requireKind(t, errs.Corrupt, (<-corrupt).err)
	requireKind(t, errs.Invalid, (<-badID).err)

	require.EqualValues(t, 2, g.batches.Load(), "the sixteen waiting Puts went in one request")
	require.Zero(t, g.puts.Load())
	for i := range fresh {
		obj, err := c.Get(ctx, n.URL, fmt.Sprintf("blob-%02d", i), nil)
		require.NoError(t, err)
		got, err := io.ReadAll(obj.Body)
		require.NoError(t, err)
		obj.Body.Close()
		require.Equal(t, fmt.Sprintf("blob %d", i), string(got))
	}
	_, err = c.Head(ctx, n.URL, "corrupt")
	requireKind(t, errs.NotFound, err)
	obj, err := c.Get(ctx, n.URL, "held", nil)
	require.NoError(t, err)
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	require.Equal(t, held, got, "the conflicting write changed nothing")
}

// A Put whose caller gives up while it waits for a batch is not sent.
func TestAPutGivenUpInTheQueueIsNotSent(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	g := newGate(t, n.URL)
	c := nodeclient.New(nodeclient.Options{BatchInflight: 1})
	ctx := context.Background()
	first := putAsync(c, ctx, g.URL, "first", checksum([]byte("first")), []byte("first"))
	<-g.held

	gone, cancel := context.WithCancel(ctx)
	waiting := putAsync(c, gone, g.URL, "given-up", checksum([]byte("x")), []byte("x"))
	require.Eventually(t, func() bool { return c.Queued(g.URL) == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	requireKind(t, errs.Unavailable, (<-waiting).err)
	kept := putAsync(c, ctx, g.URL, "kept", checksum([]byte("y")), []byte("y"))
	g.release()
	require.NoError(t, (<-first).err)
	require.NoError(t, (<-kept).err)

	_, err := c.Head(ctx, n.URL, "given-up")
	requireKind(t, errs.NotFound, err)
	_, err = c.Head(ctx, n.URL, "kept")
	require.NoError(t, err)
}

// A node that does not know the batch route (an older node during an
// upgrade) gets its small blobs one PUT each, and is not asked again for a
// while.
func TestANodeWithoutBatchesGetsPuts(t *testing.T) {
	var posts, puts atomic.Int32
	var mu sync.Mutex
	stored := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			httpx.NotFoundHandler(w, r)
			return
		}
		puts.Add(1)
		b, _ := io.ReadAll(r.Body)
		id := strings.TrimPrefix(r.URL.Path, wire.PathBlobs+"/")
		mu.Lock()
		stored[id] = string(b)
		mu.Unlock()
		httpx.WriteJSON(w, http.StatusCreated, wire.BlobInfo{ID: id, Size: int64(len(b)), Checksum: r.Header.Get(wire.HeaderChecksum)})
	}))
	defer srv.Close()
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	for i := range 3 {
		data := fmt.Appendf(nil, "blob %d", i)
		info, created, err := c.Put(ctx, srv.URL, fmt.Sprintf("b%d", i), checksum(data), int64(len(data)), bytes.NewReader(data))
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, int64(len(data)), info.Size)
	}
	require.EqualValues(t, 1, posts.Load(), "one probe")
	require.EqualValues(t, 3, puts.Load())
	require.Equal(t, map[string]string{"b0": "blob 0", "b1": "blob 1", "b2": "blob 2"}, stored)
}

// A batch refused whole, or not answered, fails every blob in it as their
// PUTs would have failed.
func TestABatchFailedWholeFailsEachBlob(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		httpx.WriteErrorCode(w, r, http.StatusServiceUnavailable, "DRAINING", "not now")
	}))
	defer srv.Close()
	c := nodeclient.New(nodeclient.Options{})
	_, _, err := c.Put(context.Background(), srv.URL, "abcd", checksum([]byte("x")), 1, strings.NewReader("x"))
	requireKind(t, errs.Unavailable, err)
	var se *nodeclient.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, nodeclient.StatusError{Status: http.StatusServiceUnavailable, Code: "DRAINING", Message: "not now"}, *se)
	require.Contains(t, err.Error(), "put abcd")

	malformed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		httpx.WriteJSON(w, http.StatusOK, wire.BatchAnswer{})
	}))
	defer malformed.Close()
	_, _, err = c.Put(context.Background(), malformed.URL, "abcd", checksum([]byte("x")), 1, strings.NewReader("x"))
	requireKind(t, errs.Unavailable, err)
	require.Contains(t, err.Error(), "0 results for 1 blobs")
}

// A Put that waits in the queue behind a batch that never ends gives up at
// the deadline its own PUT would have had, not after the batch's.
func TestAQueuedPutKeepsItsOwnDeadline(t *testing.T) {
	arrived := make(chan struct{}, 2)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stop)
	c := nodeclient.New(nodeclient.Options{Timeout: 50 * time.Millisecond, VerifyTimeout: time.Hour, BatchInflight: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := putAsync(c, ctx, srv.URL, "first", checksum([]byte("a")), []byte("a"))
	<-arrived // the first batch hangs; the second Put waits behind it
	second := putAsync(c, ctx, srv.URL, "second", checksum([]byte("b")), []byte("b"))
	for _, ch := range []<-chan putResult{first, second} {
		err := (<-ch).err
		requireKind(t, errs.Unavailable, err)
		require.Contains(t, err.Error(), "did not answer in time")
	}
	require.NoError(t, ctx.Err(), "both gave up on their own, well before the caller's deadline")
}

// A Put given up while its batch is in flight, by the only caller of that
// batch, ends the request rather than leaving it to its deadline.
func TestABatchNobodyWaitsForIsEnded(t *testing.T) {
	arrived, ended := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		<-r.Context().Done()
		close(ended)
	}))
	defer srv.Close()
	c := nodeclient.New(nodeclient.Options{Timeout: time.Hour, VerifyTimeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	res := putAsync(c, ctx, srv.URL, "abandoned", checksum([]byte("x")), []byte("x"))
	<-arrived
	cancel()
	requireKind(t, errs.Unavailable, (<-res).err)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch request was left running after its only caller had gone")
	}
}
