package nodeclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/dirlock"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func requireKind(t *testing.T, want errs.Kind, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, errs.KindOf(err), "error %q", err)
}

// filesUnder lists the files in a node's data directory but its identity
// (disk-id) and its lock, which are there from the first start.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel := strings.TrimPrefix(p, dir+"/"); !e.IsDir() && rel != "disk-id" && rel != "layout" && rel != dirlock.Name {
			files = append(files, rel)
		}
		return nil
	}))
	return files
}

func TestRoundTrip(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_NODE_ID": "node-3"}})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()
	data := []byte("round and round")
	want := wire.BlobInfo{ID: id, Size: int64(len(data)), Checksum: checksum(data)}

	info, created, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, want, info)
	info, created, err = c.Put(ctx, n.URL, id, checksum(data), -1, bytes.NewReader(data))
	require.NoError(t, err)
	require.False(t, created, "the node already holds an intact copy")
	require.Equal(t, want, info)

	head, err := c.Head(ctx, n.URL, id)
	require.NoError(t, err)
	require.Equal(t, want, head)

	obj, err := c.Get(ctx, n.URL, id, nil)
	require.NoError(t, err)
	got, err := io.ReadAll(obj.Body)
	require.NoError(t, err)
	require.NoError(t, obj.Body.Close())
	require.Equal(t, data, got)
	require.Equal(t, want, obj.Info)
	require.Equal(t, int64(len(data)), obj.ContentLength)

	check, err := c.Rehash(ctx, n.URL, id)
	require.NoError(t, err)
	require.True(t, check.Intact)
	require.Equal(t, wire.ChecksumReport{ID: id, Size: int64(len(data)), StoredChecksum: checksum(data), ActualChecksum: checksum(data), Intact: true}, check)

	st, err := c.Stats(ctx, n.URL)
	require.NoError(t, err)
	require.Equal(t, "node-3", st.NodeID)
	require.Equal(t, int64(1), st.BlobCount)
	require.Equal(t, int64(len(data)), st.BytesUsed)

	list, err := c.List(ctx, n.URL, "", 0)
	require.NoError(t, err)
	require.Equal(t, wire.BlobList{Blobs: []wire.BlobInfo{want}}, list)

	disk, err := c.Ready(ctx, n.URL)
	require.NoError(t, err)
	require.Equal(t, n.DiskID, disk, "the probe sees which disk the node serves")
	require.NoError(t, c.Delete(ctx, n.URL, id))
	require.NoError(t, c.Delete(ctx, n.URL, id), "deleting an absent blob succeeds")

	_, err = c.Get(ctx, n.URL, id, nil)
	requireKind(t, errs.NotFound, err)
	var se *nodeclient.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusNotFound, se.Status)
	require.Equal(t, "BLOB_NOT_FOUND", se.Code)
	require.Contains(t, err.Error(), n.URL, "the error names the node")
	require.Contains(t, err.Error(), "get "+id, "the error names the operation")
	_, err = c.Head(ctx, n.URL, id)
	requireKind(t, errs.NotFound, err)
	_, err = c.Rehash(ctx, n.URL, id)
	requireKind(t, errs.NotFound, err)
}

func TestListPages(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("blob-%d", i)
		want = append(want, id)
		_, _, err := c.Put(ctx, n.URL, id, checksum([]byte(id)), int64(len(id)), strings.NewReader(id))
		require.NoError(t, err)
	}
	var got []string
	after := ""
	for {
		page, err := c.List(ctx, n.URL, after, 2)
		require.NoError(t, err)
		for _, b := range page.Blobs {
			got = append(got, b.ID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	require.Equal(t, want, got)
	_, err := c.List(ctx, n.URL, "../", 2)
	requireKind(t, errs.Invalid, err)
}

func TestWriteRefusals(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()
	data, other := []byte("first"), []byte("second")
	_, _, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)

	_, _, err = c.Put(ctx, n.URL, uuid.NewString(), checksum(other), int64(len(data)), bytes.NewReader(data))
	requireKind(t, errs.Corrupt, err)
	_, _, err = c.Put(ctx, n.URL, id, checksum(other), int64(len(other)), bytes.NewReader(other))
	requireKind(t, errs.Conflict, err)
	_, _, err = c.Put(ctx, n.URL, "../../etc/passwd", checksum(data), int64(len(data)), bytes.NewReader(data))
	requireKind(t, errs.Invalid, err)
	_, _, err = c.Put(ctx, n.URL, uuid.NewString(), "not-a-checksum", int64(len(data)), bytes.NewReader(data))
	requireKind(t, errs.Invalid, err)
	_, err = c.Get(ctx, n.URL, "..", nil)
	requireKind(t, errs.Invalid, err)
}

// TestCorruptionIsVisibleToTheReader flips a byte of a blob on disk: the
// node's rehash reports it, and a GET is refused as corrupt rather than
// sending the damaged bytes.
func TestCorruptionIsVisibleToTheReader(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()
	data := bytes.Repeat([]byte("good bytes "), 1000)
	_, _, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)

	blobfault.FlipByte(t, n.DataDir, id)

	check, err := c.Rehash(ctx, n.URL, id)
	require.NoError(t, err)
	require.False(t, check.Intact)
	require.Equal(t, checksum(data), check.StoredChecksum)

	_, err = c.Get(ctx, n.URL, id, nil)
	requireKind(t, errs.Corrupt, err)
	var se *nodeclient.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "BLOB_CORRUPT", se.Code)

	_, created, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.True(t, created, "writing the blob again repairs the corrupt copy")
	check, err = c.Rehash(ctx, n.URL, id)
	require.NoError(t, err)
	require.True(t, check.Intact)
}

// TestTraversalOverHTTP sends raw paths that try to leave the data
// directory: each is refused before the node touches its disk.
func TestTraversalOverHTTP(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	secret := filepath.Join(filepath.Dir(n.DataDir), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("do not serve"), 0o600))
	for _, path := range []string{
		"/internal/blobs/..%2F..%2Fetc%2Fpasswd",
		"/internal/blobs/..%2Fsecret",
		"/internal/blobs/%2e%2e",
		"/internal/blobs/%2e%2e%2fsecret",
		"/internal/blobs/..",
		"/internal/blobs/../secret",
		"/internal/blobs/../../etc/passwd",
		"/internal/blobs/%2E%2E%5Csecret",
		"/internal/blobs/ab%00cd",
		"/internal/blobs/%2Fetc%2Fpasswd",
		"/internal/blobs/..%2Fsecret/checksum",
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
			req, err := http.NewRequest(method, n.URL, strings.NewReader("x"))
			require.NoError(t, err)
			req.URL.Opaque = path
			req.Header.Set("X-Checksum-Sha256", checksum([]byte("x")))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed}, resp.StatusCode, "%s %s", method, path)
			require.NotContains(t, string(body), "do not serve")
			require.NotContains(t, string(body), "root:")
		}
	}
	b, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "do not serve", string(b), "nothing outside the data directory was touched")
	require.Empty(t, filesUnder(t, n.DataDir), "nothing was written")
}

func TestConcurrentPutsOfOneID(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	id := uuid.NewString()
	data := bytes.Repeat([]byte("concurrent "), 200_000) // past the Expect: 100-continue threshold
	var (
		wg      sync.WaitGroup
		created atomic.Int32
	)
	for range 8 {
		wg.Go(func() {
			_, c, err := c.Put(context.Background(), n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
			assert.NoError(t, err)
			if c {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), created.Load(), "exactly one writer creates the blob")
	st, err := c.Stats(context.Background(), n.URL)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.BlobCount)
	p := id[:2] + "/" + id[2:4] + "/" + id
	require.Equal(t, []string{p, p + ".blk", p + ".sha256"}, filesUnder(t, n.DataDir), "the blob, its block sums and its checksum")
}

func TestStaleFilesAreRemovedAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := nodeclient.New(nodeclient.Options{})
	first := nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_DATA_DIRECTORY": dir}})
	id := uuid.NewString()
	_, _, err := c.Put(context.Background(), first.URL, id, checksum([]byte("kept")), 4, strings.NewReader("kept"))
	require.NoError(t, err)
	require.NoError(t, first.Stop())

	// The shard directory exists only in the files layout for so small a
	// blob; a crash in the volumes layout may leave such files too (of a
	// large blob being written), and the node removes them alike.
	shard := filepath.Join(dir, id[:2], id[2:4])
	require.NoError(t, os.MkdirAll(shard, 0o750))
	stale := []string{".tmp-" + id + "-12345", ".tmp-" + id + "-67890", id[:4] + "-orphan.sha256"}
	for _, name := range stale {
		require.NoError(t, os.WriteFile(filepath.Join(shard, name), []byte("left by a crash"), 0o600))
	}
	second := nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_DATA_DIRECTORY": dir}})
	files := filesUnder(t, dir)
	for _, name := range stale {
		require.NotContains(t, files, id[:2]+"/"+id[2:4]+"/"+name)
	}
	st, err := c.Stats(context.Background(), second.URL)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.BlobCount, "the blob written before the restart is counted")
	require.Len(t, second.Logs("data directory opened"), 1)
	require.EqualValues(t, 2, second.Logs("data directory opened")[0]["temp_files_removed"])
}

func TestRanges(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()
	data := []byte("0123456789abcdefghij")
	_, _, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)

	for _, tc := range []struct {
		rng          byterange.Range
		header, want string
	}{
		{byterange.Range{Start: 2, Length: 4}, "bytes=2-5", "2345"},
		{byterange.Range{Start: 15, Length: 5}, "bytes=15-19", "fghij"},
		{byterange.Range{Start: 0, Length: 1}, "bytes=0-0", "0"},
		{byterange.Range{Start: 18, Length: 983}, "bytes=18-1000", "ij"},
	} {
		require.Equal(t, tc.header, tc.rng.Header())
		obj, err := c.Get(ctx, n.URL, id, &tc.rng)
		require.NoError(t, err)
		got, err := io.ReadAll(obj.Body)
		require.NoError(t, err)
		require.NoError(t, obj.Body.Close())
		require.Equal(t, tc.want, string(got), tc.header)
		require.Equal(t, int64(len(tc.want)), obj.ContentLength)
		require.Equal(t, wire.BlobInfo{ID: id, Size: 20, Checksum: checksum(data)}, obj.Info, "Info describes the whole blob")
	}
	_, err = c.Get(ctx, n.URL, id, &byterange.Range{Start: 20, Length: 1})
	requireKind(t, errs.Unsatisfiable, err)
}

func TestClusterToken(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Env: map[string]string{"CLUSTER_TOKEN": "s3cret"}})
	ctx := context.Background()
	for _, token := range []string{"", "wrong"} {
		c := nodeclient.New(nodeclient.Options{Token: token})
		_, err := c.Stats(ctx, n.URL)
		requireKind(t, errs.Unauthorized, err)
		_, _, err = c.Put(ctx, n.URL, uuid.NewString(), checksum(nil), 0, bytes.NewReader(nil))
		requireKind(t, errs.Unauthorized, err)
		_, err = c.Ready(ctx, n.URL)
		require.NoError(t, err, "health needs no token")
	}
	c := nodeclient.New(nodeclient.Options{Token: "s3cret"})
	_, created, err := c.Put(ctx, n.URL, uuid.NewString(), checksum(nil), 0, bytes.NewReader(nil))
	require.NoError(t, err)
	require.True(t, created)
	_, err = c.Stats(ctx, n.URL)
	require.NoError(t, err)
}

// TestFullDisk fills a node's capacity: writes answer NoSpace (a large one
// without its body crossing the network), while reads and readiness go on.
func TestFullDisk(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_CAPACITY_BYTES": "1MiB"}})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	held := uuid.NewString()
	data := bytes.Repeat([]byte{1}, 600<<10)
	_, _, err := c.Put(ctx, n.URL, held, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)

	more := bytes.Repeat([]byte{2}, 600<<10)
	_, _, err = c.Put(ctx, n.URL, uuid.NewString(), checksum(more), int64(len(more)), bytes.NewReader(more))
	requireKind(t, errs.NoSpace, err)
	_, _, err = c.Put(ctx, n.URL, uuid.NewString(), checksum(more), -1, bytes.NewReader(more))
	requireKind(t, errs.NoSpace, err) // an unknown length is refused once the bytes exceed the capacity

	big := bytes.Repeat([]byte{3}, 8<<20)
	bigID := uuid.NewString()
	_, _, err = c.Put(ctx, n.URL, bigID, checksum(big), int64(len(big)), bytes.NewReader(big))
	requireKind(t, errs.NoSpace, err)
	var logged []map[string]any
	for _, rec := range n.Logs("http request") {
		if rec["path"] == "/internal/blobs/"+bigID {
			logged = append(logged, rec)
		}
	}
	require.Len(t, logged, 1)
	require.EqualValues(t, 507, logged[0]["status"])
	require.EqualValues(t, 0, logged[0]["bytes_in"], "the node refused before the body was sent")

	obj, err := c.Get(ctx, n.URL, held, nil)
	require.NoError(t, err, "a full node serves reads")
	got, err := io.ReadAll(obj.Body)
	require.NoError(t, err)
	obj.Body.Close()
	require.Equal(t, data, got)
	_, err = c.Ready(ctx, n.URL)
	require.NoError(t, err, "a full node is ready")
	_, created, err := c.Put(ctx, n.URL, held, checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	require.False(t, created)
	st, err := c.Stats(ctx, n.URL)
	require.NoError(t, err)
	require.LessOrEqual(t, st.FreeBytes, int64(1<<20-600<<10))
	require.Equal(t, int64(1<<20), st.CapacityBytes)
}

func TestReadyFailsWhenTheDataDirectoryGoes(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	_, err := c.Ready(context.Background(), n.URL)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(n.DataDir))
	disk, err := c.Ready(context.Background(), n.URL)
	requireKind(t, errs.Unavailable, err)
	require.Empty(t, disk, "a node that is not ready vouches for no disk")
	require.Contains(t, err.Error(), "data directory")
}

// stallingReader yields data and then either fails with err or, when err
// is nil, stalls until ctx ends, like an upstream body tied to the same
// request.
type stallingReader struct {
	data []byte
	err  error
	ctx  context.Context
}

func (s *stallingReader) Read(p []byte) (int, error) {
	if len(s.data) > 0 {
		n := copy(p, s.data)
		s.data = s.data[n:]
		return n, nil
	}
	if s.err != nil {
		return 0, s.err
	}
	<-s.ctx.Done()
	return 0, s.ctx.Err()
}

// TestBodyStopsMidStream breaks uploads halfway: the node keeps neither a
// temp file nor a blob.
func TestBodyStopsMidStream(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	data := bytes.Repeat([]byte("half "), 400_000) // 2 MB

	t.Run("reader fails", func(t *testing.T) {
		cause := errors.New("upstream went away")
		id := uuid.NewString()
		_, _, err := c.Put(context.Background(), n.URL, id, checksum(data), int64(len(data)), &stallingReader{data: data[:1<<20], err: cause})
		requireKind(t, errs.Unavailable, err)
		require.ErrorIs(t, err, cause)
		requireNothingStored(t, n, c, id)
	})
	t.Run("caller cancels", func(t *testing.T) {
		id := uuid.NewString()
		ctx, cancel := context.WithCancel(context.Background())
		r := &stallingReader{data: data[:1<<20], ctx: ctx}
		done := make(chan error, 1)
		go func() {
			_, _, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), r)
			done <- err
		}()
		require.Eventually(t, func() bool {
			m, _ := filepath.Glob(filepath.Join(n.DataDir, "*", "*", ".tmp-*"))
			return len(m) > 0
		}, 10*time.Second, time.Millisecond, "the upload has started")
		cancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled)
		requireNothingStored(t, n, c, id)
	})
}

func requireNothingStored(t *testing.T, n *nodetest.Node, c *nodeclient.Client, id string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(filesUnder(t, n.DataDir)) == 0 }, 10*time.Second, time.Millisecond,
		"no temp file or blob is left: %v", filesUnder(t, n.DataDir))
	_, err := c.Head(context.Background(), n.URL, id)
	requireKind(t, errs.NotFound, err)
}

func TestNodeDownIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()

	_, _, err = c.Put(ctx, base, id, checksum([]byte("x")), 1, strings.NewReader("x"))
	requireKind(t, errs.Unavailable, err)
	require.Contains(t, err.Error(), base)
	require.Contains(t, err.Error(), "put "+id)
	_, err = c.Get(ctx, base, id, nil)
	requireKind(t, errs.Unavailable, err)
	_, err = c.Head(ctx, base, id)
	requireKind(t, errs.Unavailable, err)
	requireKind(t, errs.Unavailable, c.Delete(ctx, base, id))
	_, err = c.Stats(ctx, base)
	requireKind(t, errs.Unavailable, err)
	_, err = c.Ready(ctx, base)
	requireKind(t, errs.Unavailable, err)
}

func TestRequestIDReachesTheNode(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := nodeclient.WithRequestID(context.Background(), "upload-42")
	require.Equal(t, "upload-42", nodeclient.RequestIDFrom(ctx))
	require.Empty(t, nodeclient.RequestIDFrom(context.Background()))
	id := uuid.NewString()
	_, _, err := c.Put(ctx, n.URL, id, checksum([]byte("x")), 1, strings.NewReader("x"))
	require.NoError(t, err)
	_, err = c.Head(ctx, n.URL, id)
	require.NoError(t, err)
	var seen int
	// The small Put went in a batch, which the node logs blob by blob.
	for _, msg := range []string{"http request", "batched blob write"} {
		for _, rec := range n.Logs(msg) {
			if rec["request_id"] == "upload-42" {
				seen++
			}
		}
	}
	require.Equal(t, 2, seen, "both calls are logged under the caller's request id")
}

// TestConnectionsAreReused makes many calls and counts the dials.
func TestConnectionsAreReused(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	tr := nodeclient.NewTransport()
	var dials atomic.Int32
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	c := nodeclient.New(nodeclient.Options{Transport: tr})
	ctx := context.Background()
	id := uuid.NewString()
	data := []byte("reuse me")
	for range 10 {
		_, _, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)), bytes.NewReader(data))
		require.NoError(t, err)
		obj, err := c.Get(ctx, n.URL, id, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, obj.Body)
		require.NoError(t, err)
		require.NoError(t, obj.Body.Close())
		_, err = c.Head(ctx, n.URL, id)
		require.NoError(t, err)
		_, err = c.Stats(ctx, n.URL)
		require.NoError(t, err)
		_, err = c.Get(ctx, n.URL, uuid.NewString(), nil)
		requireKind(t, errs.NotFound, err)
	}
	require.Equal(t, int32(1), dials.Load(), "sequential calls share one kept-alive connection")
}

// TestReadyAnswers reads the readiness answers a node may give, including
// one from a node older than disk identities.
func TestReadyAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		disk   string
		kind   errs.Kind // errs.Other: no error
	}{
		{"up with an identity", http.StatusOK, `{"status":"UP","diskId":"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}`, "6ba7b810-9dad-11d1-80b4-00c04fd430c8", errs.Other},
		{"up from an older node", http.StatusOK, `{"status":"UP"}`, "", errs.Other},
		{"down names its disk", http.StatusServiceUnavailable, `{"status":"DOWN","reason":"disk gone","diskId":"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}`, "", errs.Unavailable},
		{"malformed", http.StatusOK, `{"status":`, "", errs.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			})}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })

			disk, err := nodeclient.New(nodeclient.Options{}).Ready(context.Background(), "http://"+ln.Addr().String())
			if tc.kind == errs.Other {
				require.NoError(t, err)
			} else {
				requireKind(t, tc.kind, err)
			}
			require.Equal(t, tc.disk, disk)
		})
	}
}

// TestBlocksVerifiedFollowsTheHeader: a GET answer's BlocksVerified is the
// node's word that it checked the bytes, and only that.
func TestBlocksVerifiedFollowsTheHeader(t *testing.T) {
	data := []byte("verified bytes")
	for _, verified := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set(wire.HeaderChecksum, checksum(data))
			w.Header().Set(wire.HeaderBlobSize, fmt.Sprint(len(data)))
			if verified {
				w.Header().Set(wire.HeaderBlocksVerified, wire.BlocksVerifiedCRC32C)
			}
			_, _ = w.Write(data)
		}))
		obj, err := nodeclient.New(nodeclient.Options{}).Get(context.Background(), srv.URL, uuid.NewString(), nil)
		require.NoError(t, err)
		got, err := io.ReadAll(obj.Body)
		require.NoError(t, err)
		require.NoError(t, obj.Body.Close())
		require.Equal(t, data, got)
		require.Equal(t, verified, obj.BlocksVerified)
		srv.Close()
	}
}

// TestFramedAnswersAreCheckedFrameByFrame: a node's framed answer reaches
// the reader as plain bytes, each frame checked first; a frame damaged on
// the way ends the body after the good ones.
func TestFramedAnswersAreCheckedFrameByFrame(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 20000) // 200,000 bytes: four frames of 64 KiB blocks
	var body []byte
	for off := 0; off < len(data); off += 65536 {
		body = wire.AppendFrame(body, data[off:min(off+65536, len(data))])
	}
	for _, damaged := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Contains(t, r.Header.Get("Accept"), wire.ContentTypeFrames)
			w.Header().Set("Content-Type", wire.ContentTypeFrames)
			w.Header().Set(wire.HeaderChecksum, checksum(data))
			w.Header().Set(wire.HeaderBlobSize, fmt.Sprint(len(data)))
			w.Header().Set(wire.HeaderBlocksVerified, wire.BlocksVerifiedCRC32C)
			b := bytes.Clone(body)
			if damaged {
				b[2*(65536+wire.FrameHeaderLen)+wire.FrameHeaderLen+7] ^= 0x20 // in the third frame
			}
			_, _ = w.Write(b)
		}))
		obj, err := nodeclient.New(nodeclient.Options{}).Get(context.Background(), srv.URL, uuid.NewString(), nil)
		require.NoError(t, err)
		require.True(t, obj.Framed)
		require.Equal(t, int64(len(data)), obj.ContentLength)
		got, err := io.ReadAll(obj.Body)
		require.NoError(t, obj.Body.Close())
		if damaged {
			require.ErrorIs(t, err, wire.ErrFrameMismatch)
			require.Equal(t, data[:2*65536], got, "the two good frames, nothing of the damaged one")
		} else {
			require.NoError(t, err)
			require.Equal(t, data, got)
		}
		srv.Close()
	}
}
