package storagenode_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

func TestPutGetHeadDelete(t *testing.T) {
	n := startNode(t, nil)
	id := uuid.NewString()
	data := []byte("the quick brown fox jumps over the lazy dog")
	want := wire.BlobInfo{ID: id, Size: int64(len(data)), Checksum: checksum(data)}

	resp, body := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	require.Equal(t, want, decode[wire.BlobInfo](t, body))

	resp, body = n.put(t, id, data)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a second write of the same bytes is 200")
	require.Equal(t, want, decode[wire.BlobInfo](t, body))

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		resp, body = n.request(t, method, "/internal/blobs/"+id, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
		require.Equal(t, fmt.Sprint(len(data)), resp.Header.Get("Content-Length"))
		require.Equal(t, checksum(data), resp.Header.Get("X-Checksum-Sha256"))
		require.Equal(t, fmt.Sprint(len(data)), resp.Header.Get("X-Blob-Size"))
		require.Equal(t, `"`+checksum(data)+`"`, resp.Header.Get("ETag"))
		if method == http.MethodGet {
			require.Equal(t, data, body)
		}
	}

	for range 2 {
		resp, body = n.request(t, http.MethodDelete, "/internal/blobs/"+id, nil, nil)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "delete is idempotent: %s", body)
	}
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
	requireError(t, resp, body, http.StatusNotFound, "BLOB_NOT_FOUND")
	resp, body = n.request(t, http.MethodHead, "/internal/blobs/"+id, nil, nil)
	requireError(t, resp, body, http.StatusNotFound, "BLOB_NOT_FOUND")
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/"+id+"/checksum", nil, nil)
	requireError(t, resp, body, http.StatusNotFound, "BLOB_NOT_FOUND")
}

func TestPutRefusals(t *testing.T) {
	n := startNode(t, nil)
	id := uuid.NewString()
	data := []byte("original")
	resp, _ := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	other := []byte("different")
	for _, tc := range []struct {
		name   string
		id     string
		body   []byte
		header map[string]string
		status int
		code   string
	}{
		{"no checksum header", uuid.NewString(), data, nil, 400, "INVALID_REQUEST"},
		{"malformed checksum", uuid.NewString(), data, map[string]string{"X-Checksum-Sha256": "abc"}, 400, "INVALID_REQUEST"},
		{"body does not match", uuid.NewString(), data, map[string]string{"X-Checksum-Sha256": checksum(other)}, 422, "CHECKSUM_MISMATCH"},
		{"other checksum over an intact copy", id, other, map[string]string{"X-Checksum-Sha256": checksum(other)}, 409, "CONFLICT"},
		{"invalid id", "NOT-AN-ID", data, map[string]string{"X-Checksum-Sha256": checksum(data)}, 400, "INVALID_REQUEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := n.request(t, http.MethodPut, "/internal/blobs/"+tc.id, tc.body, tc.header)
			requireError(t, resp, body, tc.status, tc.code)
		})
	}
	resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, data, body, "refused writes leave the blob alone")
}

func TestRanges(t *testing.T) {
	n := startNode(t, nil)
	id := uuid.NewString()
	data := []byte("0123456789abcdefghij") // 20 bytes
	resp, _ := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	etag := `"` + checksum(data) + `"`

	for _, tc := range []struct {
		name, rng, ifRange string
		status             int
		body               string
		contentRange       string
	}{
		{"none", "", "", 200, string(data), ""},
		{"closed", "bytes=2-5", "", 206, "2345", "bytes 2-5/20"},
		{"open", "bytes=15-", "", 206, "fghij", "bytes 15-19/20"},
		{"suffix", "bytes=-3", "", 206, "hij", "bytes 17-19/20"},
		{"suffix longer than the blob", "bytes=-100", "", 206, string(data), "bytes 0-19/20"},
		{"end past the blob", "bytes=18-99", "", 206, "ij", "bytes 18-19/20"},
		{"one byte", "bytes=0-0", "", 206, "0", "bytes 0-0/20"},
		{"multiple ranges are served whole", "bytes=0-1,4-5", "", 200, string(data), ""},
		{"malformed is ignored", "bytes=x-y", "", 200, string(data), ""},
		{"reversed is ignored", "bytes=5-2", "", 200, string(data), ""},
		{"other unit is ignored", "items=0-1", "", 200, string(data), ""},
		{"matching If-Range", "bytes=0-1", etag, 206, "01", "bytes 0-1/20"},
		{"stale If-Range serves all", "bytes=0-1", `"old"`, 200, string(data), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.rng != "" {
				h["Range"] = tc.rng
			}
			if tc.ifRange != "" {
				h["If-Range"] = tc.ifRange
			}
			resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, h)
			require.Equal(t, tc.status, resp.StatusCode)
			require.Equal(t, tc.body, string(body))
			require.Equal(t, tc.contentRange, resp.Header.Get("Content-Range"))
			require.Equal(t, fmt.Sprint(len(tc.body)), resp.Header.Get("Content-Length"))
			require.Equal(t, "20", resp.Header.Get("X-Blob-Size"), "the full size travels with a range")
		})
	}
	for _, rng := range []string{"bytes=20-", "bytes=100-200", "bytes=-0"} {
		t.Run("unsatisfiable "+rng, func(t *testing.T) {
			resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, map[string]string{"Range": rng})
			requireError(t, resp, body, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE")
			require.Equal(t, "bytes */20", resp.Header.Get("Content-Range"))
		})
	}

	empty := uuid.NewString()
	resp, _ = n.put(t, empty, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+empty, nil, map[string]string{"Range": "bytes=-1"})
	requireError(t, resp, body, http.StatusRequestedRangeNotSatisfiable, "RANGE_NOT_SATISFIABLE")
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/"+empty, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)
}

func TestChecksumEndpoint(t *testing.T) {
	n := startNode(t, nil)
	id := uuid.NewString()
	data := []byte("bytes that will rot")
	resp, _ := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+id+"/checksum", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, wire.ChecksumReport{ID: id, Size: int64(len(data)), StoredChecksum: checksum(data), ActualChecksum: checksum(data), Intact: true},
		decode[wire.ChecksumReport](t, body))

	blobfault.FlipByte(t, n.DataDir, id)
	rotten, held := blobfault.Read(t, n.DataDir, id)
	require.True(t, held)
	require.NotEqual(t, data, rotten)
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/"+id+"/checksum", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, wire.ChecksumReport{ID: id, Size: int64(len(data)), StoredChecksum: checksum(data), ActualChecksum: checksum(rotten), Intact: false},
		decode[wire.ChecksumReport](t, body))
}

func TestList(t *testing.T) {
	n := startNode(t, nil)
	var ids []string
	for i := range 7 {
		id := fmt.Sprintf("%04d-blob", i)
		ids = append(ids, id)
		resp, _ := n.put(t, id, []byte(id))
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}

	var got []string
	after := ""
	for {
		resp, body := n.request(t, http.MethodGet, "/internal/blobs?limit=3&after="+after, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		page := decode[wire.BlobList](t, body)
		for _, b := range page.Blobs {
			got = append(got, b.ID)
			require.Equal(t, wire.BlobInfo{ID: b.ID, Size: int64(len(b.ID)), Checksum: checksum([]byte(b.ID))}, b)
		}
		if page.Next == "" {
			break
		}
		require.Len(t, page.Blobs, 3)
		after = page.Next
	}
	require.Equal(t, ids, got)

	resp, body := n.request(t, http.MethodGet, "/internal/blobs", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	all := decode[wire.BlobList](t, body)
	require.Len(t, all.Blobs, 7, "the default limit covers a small node")
	require.Empty(t, all.Next)

	resp, body = n.request(t, http.MethodGet, "/internal/blobs?after=zzzz", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"blobs":[],"next":""}`, string(body), "an empty page is an empty array")

	for _, q := range []string{"limit=0", "limit=10001", "limit=-1", "limit=ten", "after=..%2Fx", "after=ABC"} {
		resp, body := n.request(t, http.MethodGet, "/internal/blobs?"+q, nil, nil)
		requireError(t, resp, body, http.StatusBadRequest, "INVALID_REQUEST")
	}
	resp, _ = n.request(t, http.MethodGet, "/internal/blobs?limit=10000", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestStatsShowsNodeIDAndCounts(t *testing.T) {
	n := startNode(t, map[string]string{"STORAGE_NODE_ID": "node-42", "STORAGE_CAPACITY_BYTES": "1MiB"})
	for _, data := range [][]byte{[]byte("one"), []byte("three")} {
		resp, _ := n.put(t, uuid.NewString(), data)
		require.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	resp, body := n.request(t, http.MethodGet, "/internal/stats", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	st := decode[wire.Stats](t, body)
	require.Equal(t, "node-42", st.NodeID)
	require.Equal(t, n.DiskID, st.DiskID)
	require.Equal(t, int64(2), st.BlobCount)
	require.Equal(t, int64(8), st.BytesUsed)
	require.Equal(t, int64(1<<20), st.CapacityBytes)
	require.LessOrEqual(t, st.FreeBytes, int64(1<<20-8))
	require.Positive(t, st.TotalBytes)
}

func TestCapacityAnswers507(t *testing.T) {
	n := startNode(t, map[string]string{"STORAGE_CAPACITY_BYTES": "100"})
	held := uuid.NewString()
	resp, _ := n.put(t, held, make([]byte, 80))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, body := n.put(t, uuid.NewString(), make([]byte, 30))
	requireError(t, resp, body, http.StatusInsufficientStorage, "INSUFFICIENT_STORAGE")

	resp, _ = n.request(t, http.MethodGet, "/internal/blobs/"+held, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a full node serves reads")
	resp, _ = n.put(t, held, make([]byte, 80))
	require.Equal(t, http.StatusOK, resp.StatusCode, "a full node confirms what it holds")
	resp, body = n.request(t, http.MethodGet, "/health/ready", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a full node is ready")
	require.JSONEq(t, `{"status":"UP","diskId":"`+n.DiskID+`"}`, string(body))
}

func TestClusterToken(t *testing.T) {
	n := startNode(t, map[string]string{"CLUSTER_TOKEN": "s3cret"})
	id := uuid.NewString()
	for _, path := range []string{"/internal/blobs/" + id, "/internal/blobs", "/internal/stats", "/internal/blobs/" + id + "/checksum"} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret-and-more", "Basic czNjcmV0", "Bearer ", "s3cret"} {
			resp, body := n.request(t, http.MethodGet, path, nil, map[string]string{"Authorization": auth})
			requireError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
			require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
		}
	}
	resp, body := n.request(t, http.MethodPut, "/internal/blobs/"+id, []byte("x"),
		map[string]string{"X-Checksum-Sha256": checksum([]byte("x")), "Authorization": "Bearer nope"})
	requireError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")

	resp, _ = n.put(t, id, []byte("x"))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the right token is accepted")
	resp, _ = n.request(t, http.MethodGet, "/internal/stats", nil, map[string]string{"Authorization": "bearer s3cret"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "the scheme is case-insensitive")

	for _, open := range []string{"/health/live", "/health/ready", "/metrics"} {
		resp, _ := n.request(t, http.MethodGet, open, nil, map[string]string{"Authorization": ""})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s needs no token", open)
	}
}

func TestRouterErrorsUseTheCommonShape(t *testing.T) {
	n := startNode(t, nil)
	resp, body := n.request(t, http.MethodGet, "/nope", nil, nil)
	requireError(t, resp, body, http.StatusNotFound, "NOT_FOUND")
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/abcd/nope", nil, nil)
	requireError(t, resp, body, http.StatusNotFound, "NOT_FOUND")
	resp, body = n.request(t, http.MethodPost, "/internal/blobs/abcd", nil, nil)
	requireError(t, resp, body, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	resp, body = n.request(t, http.MethodDelete, "/internal/stats", nil, nil)
	requireError(t, resp, body, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
}

func TestHealth(t *testing.T) {
	n := startNode(t, nil)
	require.NotEmpty(t, n.DiskID)
	up := `{"status":"UP","diskId":"` + n.DiskID + `"}`
	resp, body := n.request(t, http.MethodGet, "/health/live", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"status":"UP","diskId":"`+n.DiskID+`","version":"`+buildinfo.Version()+`"}`, string(body),
		"liveness names the build the node runs")
	resp, body = n.request(t, http.MethodGet, "/health/ready", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, up, string(body))

	require.NoError(t, os.RemoveAll(n.DataDir))
	resp, body = n.request(t, http.MethodGet, "/health/ready", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	h := decode[wire.Health](t, body)
	require.Equal(t, "DOWN", h.Status)
	require.Contains(t, h.Reason, "data directory")
	require.Equal(t, n.DiskID, h.DiskID, "a node not ready still names the disk it opened")
	resp, _ = n.request(t, http.MethodGet, "/health/live", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "liveness does not depend on the disk")
}

func TestRequestIDAndAccessLog(t *testing.T) {
	n := startNode(t, nil)
	id := uuid.NewString()
	resp, _ := n.request(t, http.MethodPut, "/internal/blobs/"+id, []byte("abc"),
		map[string]string{"X-Checksum-Sha256": checksum([]byte("abc")), "X-Request-Id": "req-123"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "req-123", resp.Header.Get("X-Request-Id"), "the caller's request id is kept")

	resp, _ = n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
	generated := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, generated, "a request id is made when none is given")
	resp, _ = n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, map[string]string{"X-Request-Id": "has spaces in it"})
	require.NotEqual(t, "has spaces in it", resp.Header.Get("X-Request-Id"), "an unsafe request id is replaced")

	var put, get map[string]any
	for _, rec := range n.Logs("http request") {
		switch rec["request_id"] {
		case "req-123":
			put = rec
		case generated:
			get = rec
		}
	}
	require.NotNil(t, put, "the PUT is logged with its request id")
	require.Equal(t, "PUT", put["method"])
	require.Equal(t, "/internal/blobs/{id}", put["route"])
	require.EqualValues(t, 201, put["status"])
	require.EqualValues(t, 3, put["bytes_in"])
	require.Contains(t, put, "duration")
	require.Equal(t, "INFO", put["level"])
	require.NotNil(t, get)
	require.EqualValues(t, 3, get["bytes_out"])
}

func TestMetrics(t *testing.T) {
	n := startNode(t, map[string]string{"STORAGE_NODE_ID": "node-9"})
	id := uuid.NewString()
	resp, _ := n.put(t, id, []byte("12345"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = n.put(t, id, []byte("12345"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	n.request(t, http.MethodPut, "/internal/blobs/"+uuid.NewString(), []byte("x"), map[string]string{"X-Checksum-Sha256": checksum([]byte("y"))})
	n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
	n.request(t, http.MethodGet, "/internal/blobs/"+uuid.NewString(), nil, nil)
	n.request(t, http.MethodDelete, "/internal/blobs/"+uuid.NewString(), nil, nil)

	resp, body := n.request(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text := string(body)
	for _, line := range []string{
		`dfs_node_blobs 1`,
		`dfs_node_stored_bytes 5`,
		`dfs_node_capacity_bytes 0`,
		fmt.Sprintf(`dfs_node_info{node_id="node-9",sync_mode=%q} 1`, blob.DefaultSyncMode()),
		fmt.Sprintf(`dfs_build_info{goversion=%q,version=%q} 1`, runtime.Version(), buildinfo.Version()),
		`dfs_node_blob_writes_total{outcome="created"} 1`,
		`dfs_node_blob_writes_total{outcome="exists"} 1`,
		`dfs_node_blob_writes_total{outcome="checksum_mismatch"} 1`,
		`dfs_node_blob_writes_total{outcome="no_space"} 0`,
		`dfs_node_blob_reads_total{outcome="ok"} 1`,
		`dfs_node_blob_reads_total{outcome="not_found"} 1`,
		`dfs_node_blob_deletes_total{outcome="ok"} 1`,
		`dfs_node_blob_received_bytes_total 5`,
		`dfs_node_blob_sent_bytes_total 5`,
		`dfs_node_http_requests_total{method="PUT",route="/internal/blobs/{id}",status="201"} 1`,
		`dfs_node_http_requests_total{method="GET",route="/internal/blobs/{id}",status="404"} 1`,
		`dfs_node_http_request_duration_seconds_count{method="PUT",route="/internal/blobs/{id}"} 3`,
	} {
		require.Contains(t, text, line+"\n")
	}
	require.NotContains(t, text, id, "no label carries a raw path")
	require.Positive(t, gaugeValue(t, n, "dfs_node_free_bytes"))
	require.Positive(t, gaugeValue(t, n, "dfs_node_disk_total_bytes"))
}

// TestSyncModeVariable shows STORAGE_SYNC_MODE taking effect: the node logs
// and labels its mode, and only batch mode counts shared syncs, two for a
// write and one for a delete. These are the syncs of blobs kept in files of
// their own, every blob in the files layout (the volumes layout's records
// share group commits instead, TestLayoutVariables).
func TestSyncModeVariable(t *testing.T) {
	for _, tc := range []struct {
		mode         blob.SyncMode
		syncs, waits float64
	}{
		{blob.SyncFile, 0, 0},
		{blob.SyncBatch, 3, 3},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			if tc.mode == blob.SyncBatch && blob.BatchSyncSupported() != nil {
				t.Skipf("batch sync mode: %v", blob.BatchSyncSupported())
			}
			n := startNode(t, map[string]string{"STORAGE_SYNC_MODE": string(tc.mode), "STORAGE_LAYOUT": "files"})
			opened := n.Logs("data directory opened")
			require.Len(t, opened, 1)
			require.Equal(t, string(tc.mode), opened[0]["sync_mode"])

			id := uuid.NewString()
			resp, _ := n.put(t, id, []byte("durable bytes"))
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			resp, _ = n.request(t, http.MethodDelete, "/internal/blobs/"+id, nil, nil)
			require.Equal(t, http.StatusNoContent, resp.StatusCode)

			_, body := n.request(t, http.MethodGet, "/metrics", nil, nil)
			require.Contains(t, string(body), fmt.Sprintf(`dfs_node_info{node_id="node-1",sync_mode=%q} 1`, tc.mode)+"\n")
			require.Equal(t, tc.syncs, counterValue(t, n, "dfs_node_sync_batches_total"))
			require.Equal(t, tc.waits, counterValue(t, n, "dfs_node_sync_batch_waits_total"))
		})
	}
}

// TestSyncBatchMaxVariable shows STORAGE_SYNC_BATCH_MAX taking effect: in
// batch mode a copy over it shares no sync, one within it waits for two (in
// files of their own: the files layout, as TestSyncModeVariable says).
func TestSyncBatchMaxVariable(t *testing.T) {
	if err := blob.BatchSyncSupported(); err != nil {
		t.Fatalf("batch sync mode is needed here: %v", err)
	}
	n := startNode(t, map[string]string{"STORAGE_SYNC_MODE": "batch", "STORAGE_SYNC_BATCH_MAX": "16", "STORAGE_LAYOUT": "files"})
	resp, _ := n.put(t, uuid.NewString(), []byte("seventeen bytes!!"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Zero(t, counterValue(t, n, "dfs_node_sync_batch_waits_total"), "a copy over the limit syncs alone")
	resp, _ = n.put(t, uuid.NewString(), []byte("sixteen bytes!!!"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, 2.0, counterValue(t, n, "dfs_node_sync_batch_waits_total"))
}

// counterValue reads a counter without labels from the node's registry.
func counterValue(t *testing.T, n *node, name string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s is not registered", name)
	return 0
}

// gaugeValue reads a gauge from the node's registry.
func gaugeValue(t *testing.T, n *node, name string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s is not registered", name)
	return 0
}

func TestUnsafeIDsNeverReachTheDisk(t *testing.T) {
	n := startNode(t, nil)
	outside := filepath.Join(filepath.Dir(n.DataDir), "outside")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o640))
	for _, raw := range []string{"..%2Foutside", "..%2F..%2Fetc%2Fpasswd", "%2e%2e", "%2E%2E%2Foutside", "ABCD", "a%00bcd", "abcd%2Fefgh", "abcd.sha256", "%2etmp-abcd"} {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodHead} {
			req, err := http.NewRequest(method, n.URL+"/", strings.NewReader("x"))
			require.NoError(t, err)
			req.URL.Opaque = "/internal/blobs/" + raw
			req.Header.Set("X-Checksum-Sha256", checksum([]byte("x")))
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s", method, raw)
		}
	}
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "secret", string(b))
}

func TestPprofAddrServesProfilesOnItsOwnListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	n := startNode(t, map[string]string{"PPROF_ADDR": addr})
	require.Eventually(t, func() bool { // Serve opens it as it starts
		resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	resp, _ := n.request(t, http.MethodGet, "/debug/pprof/", nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "never on the node's own port")
}

// TestLayoutVariables shows STORAGE_LAYOUT, STORAGE_INLINE_MAX and
// STORAGE_VOLUME_SIZE taking effect: small blobs go to volume files, a blob
// over the inline limit to a file of its own, a volume is sealed at its size,
// and the directory then refuses the other layout at start, naming the
// variable.
func TestLayoutVariables(t *testing.T) {
	env := map[string]string{"STORAGE_LAYOUT": "volumes", "STORAGE_INLINE_MAX": "1KiB", "STORAGE_VOLUME_SIZE": "8KiB"}
	n := startNode(t, env)
	opened := n.Logs("data directory opened")
	require.Len(t, opened, 1)
	require.Equal(t, "volumes", opened[0]["layout"])
	small := bytes.Repeat([]byte("s"), 1000)
	var ids []string
	for range 12 {
		id := uuid.NewString()
		ids = append(ids, id)
		resp, body := n.put(t, id, small)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "body: %s", body)
	}
	large := bytes.Repeat([]byte("L"), 1025)
	big := uuid.NewString()
	resp, _ := n.put(t, big, large)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.FileExists(t, filepath.Join(n.DataDir, big[0:2], big[2:4], big), "a blob over STORAGE_INLINE_MAX is a file")
	require.FileExists(t, filepath.Join(n.DataDir, "volumes", "00000002.vol"), "12 records of 1 KiB fill more than one 8 KiB volume")
	for _, id := range ids {
		resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, map[string]string{"Range": "bytes=10-19"})
		require.Equal(t, http.StatusPartialContent, resp.StatusCode)
		require.Equal(t, small[10:20], body)
	}
	_, body := n.request(t, http.MethodGet, "/internal/stats", nil, nil)
	st := decode[wire.Stats](t, body)
	require.Equal(t, int64(13), st.BlobCount, "stats count the blobs of both kinds")
	require.Equal(t, int64(12*1000+1025), st.BytesUsed)
	_, body = n.request(t, http.MethodGet, "/internal/blobs?limit=100", nil, nil)
	require.Contains(t, string(body), big, "listing merges files and volumes")
	require.Contains(t, string(body), ids[0])
	require.Equal(t, 12.0, counterValue(t, n, "dfs_node_volume_group_records_total"))
	require.Positive(t, counterValue(t, n, "dfs_node_volume_group_commits_total"))

	// STORAGE_COMPACT_THRESHOLD (30% by default): removing half of the
	// first, sealed, volume's blobs gets it compacted in the background.
	for _, id := range ids[:4] {
		resp, _ := n.request(t, http.MethodDelete, "/internal/blobs/"+id, nil, nil)
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	require.Eventually(t, func() bool { return counterValue(t, n, "dfs_node_volume_compactions_total") >= 1 }, 20*time.Second, 10*time.Millisecond)
	require.Positive(t, counterValue(t, n, "dfs_node_volume_compaction_reclaimed_bytes_total"))
	require.NotEmpty(t, n.Logs("volume compacted"))
	for _, id := range ids[4:] {
		resp, body := n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, small, body)
	}
	require.NoError(t, n.Stop())

	cfg := n.Config
	cfg.Layout = blob.LayoutFiles
	_, err := newServer(t, cfg)
	require.ErrorContains(t, err, "STORAGE_LAYOUT=files")
	require.ErrorContains(t, err, `holds the "volumes" layout`)
}

// TestDefaultLayout shows STORAGE_LAYOUT unset: a new data directory gets
// the volumes layout, and an existing one keeps its own, including one
// written by the files layout before layouts were recorded, which opens as
// files with its blobs served (upgrading a node changes nothing on disk but
// the record); naming the other layout over it is still refused.
func TestDefaultLayout(t *testing.T) {
	small := []byte("a small blob")
	n := startNode(t, nil)
	opened := n.Logs("data directory opened")
	require.Len(t, opened, 1)
	require.Equal(t, "volumes", opened[0]["layout"])
	require.Equal(t, "the default for a new data directory", opened[0]["layout_from"])
	id := uuid.NewString()
	resp, _ := n.put(t, id, small)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.FileExists(t, filepath.Join(n.DataDir, "volumes", "00000001.vol"))
	require.NoError(t, n.Stop())
	again := startNode(t, map[string]string{"STORAGE_DATA_DIRECTORY": n.DataDir})
	opened = again.Logs("data directory opened")
	require.Equal(t, "volumes", opened[0]["layout"])
	require.Equal(t, "the data directory", opened[0]["layout_from"])
	_, body := again.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
	require.Equal(t, small, body)
	require.NoError(t, again.Stop())

	// A directory of the files layout from before the record: blobs, their
	// sidecars and an identity, no layout file.
	old := startNode(t, map[string]string{"STORAGE_LAYOUT": "files"})
	oldID := uuid.NewString()
	resp, _ = old.put(t, oldID, small)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, old.Stop())
	require.NoError(t, os.Remove(filepath.Join(old.DataDir, "layout")))
	l, err := blob.DirectoryLayout(old.DataDir)
	require.NoError(t, err)
	require.Equal(t, blob.LayoutFiles, l, "a directory without a record but with an identity is the files layout's")

	upgraded := startNode(t, map[string]string{"STORAGE_DATA_DIRECTORY": old.DataDir})
	opened = upgraded.Logs("data directory opened")
	require.Equal(t, "files", opened[0]["layout"])
	require.Equal(t, "the data directory", opened[0]["layout_from"])
	require.Equal(t, 1.0, opened[0]["blobs"], "the old blob was found")
	_, body = upgraded.request(t, http.MethodGet, "/internal/blobs/"+oldID, nil, nil)
	require.Equal(t, small, body)
	newID := uuid.NewString()
	resp, _ = upgraded.put(t, newID, small)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.FileExists(t, filepath.Join(old.DataDir, newID[0:2], newID[2:4], newID), "new blobs go on in the directory's layout")
	require.NoDirExists(t, filepath.Join(old.DataDir, "volumes"), "no mixing")
	require.NoError(t, upgraded.Stop())
	b, err := os.ReadFile(filepath.Join(old.DataDir, "layout"))
	require.NoError(t, err)
	require.Equal(t, "files\n", string(b), "the layout is recorded now")

	cfg := upgraded.Config
	cfg.Layout = blob.LayoutVolumes
	_, err = newServer(t, cfg)
	require.ErrorContains(t, err, "STORAGE_LAYOUT=volumes")
	require.ErrorContains(t, err, `holds the "files" layout`)
}
