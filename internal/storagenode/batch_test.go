package storagenode_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// batchBody frames items for POST /internal/blob-batch.
func batchBody(t *testing.T, items ...wire.BatchItem) []byte {
	t.Helper()
	var body []byte
	for _, it := range items {
		var err error
		body, err = wire.AppendBatchFrame(body, it)
		require.NoError(t, err)
	}
	return body
}

func item(id string, data []byte) wire.BatchItem {
	return wire.BatchItem{ID: id, Checksum: checksum(data), Data: data}
}

// A batch answers each blob as its PUT would have, in order, and counts
// each in the write metrics; a capacity limit refuses only the blobs that
// do not fit.
func TestBlobBatch(t *testing.T) {
	for _, layout := range []string{"volumes", "files"} {
		t.Run(layout, func(t *testing.T) {
			n := startNode(t, map[string]string{"STORAGE_LAYOUT": layout, "STORAGE_CAPACITY_BYTES": "100"})
			held := uuid.NewString()
			resp, _ := n.put(t, held, []byte("held"))
			require.Equal(t, http.StatusCreated, resp.StatusCode)

			a, b := uuid.NewString(), uuid.NewString()
			body := batchBody(t,
				item(a, []byte("first")),
				item(held, []byte("held")),
				item(held, []byte("other")),
				wire.BatchItem{ID: uuid.NewString(), Checksum: checksum([]byte("declared")), Data: []byte("sent")},
				wire.BatchItem{ID: "../up", Checksum: checksum([]byte("x")), Data: []byte("x")},
				wire.BatchItem{ID: uuid.NewString(), Checksum: "not-hex-" + checksum(nil)[8:], Data: []byte("x")},
				item(uuid.NewString(), make([]byte, 200)),
				item(b, []byte("second")),
			)
			resp, out := n.request(t, http.MethodPost, wire.PathBlobBatch, body, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)
			res := decode[wire.BatchAnswer](t, out).Results
			require.Len(t, res, 8)
			require.Equal(t, wire.BatchResult{ID: a, Status: http.StatusCreated, Size: 5, Checksum: checksum([]byte("first"))}, res[0])
			require.Equal(t, http.StatusOK, res[1].Status)
			for i, want := range []struct {
				status int
				code   string
			}{
				{http.StatusConflict, "CONFLICT"},
				{http.StatusUnprocessableEntity, "CHECKSUM_MISMATCH"},
				{http.StatusBadRequest, "INVALID_REQUEST"},
				{http.StatusBadRequest, "INVALID_REQUEST"},
				{http.StatusInsufficientStorage, "INSUFFICIENT_STORAGE"},
			} {
				r := res[2+i]
				require.Equal(t, want.status, r.Status, "result %d: %+v", 2+i, r)
				require.NotEmpty(t, r.Message, "result %d", 2+i)
				require.Zero(t, r.Size)
			}
			require.Equal(t, http.StatusCreated, res[7].Status)

			for id, data := range map[string]string{a: "first", b: "second", held: "held"} {
				resp, got := n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, data, string(got))
			}
			_, metrics := n.request(t, http.MethodGet, "/metrics", nil, nil)
			for _, line := range []string{
				`dfs_node_blob_writes_total{outcome="created"} 3`,
				`dfs_node_blob_writes_total{outcome="exists"} 1`,
				`dfs_node_blob_writes_total{outcome="conflict"} 1`,
				`dfs_node_blob_writes_total{outcome="checksum_mismatch"} 1`,
				`dfs_node_blob_writes_total{outcome="invalid"} 2`,
				`dfs_node_blob_writes_total{outcome="no_space"} 1`,
				`dfs_node_blob_batch_items_count 1`,
				`dfs_node_blob_batch_items_sum 8`,
				`dfs_node_http_requests_total{method="POST",route="/internal/blob-batch",status="200"} 1`,
			} {
				require.Contains(t, string(metrics), line+"\n")
			}
		})
	}
}

// A batch that cannot be parsed, or is too large, is refused whole and
// stores nothing; without the cluster token it is refused like any call.
func TestBlobBatchRefusals(t *testing.T) {
	n := startNode(t, map[string]string{"CLUSTER_TOKEN": "s3cret"})
	id := uuid.NewString()
	body := batchBody(t, item(id, []byte("stored?")), item(uuid.NewString(), []byte("x")))

	resp, out := n.request(t, http.MethodPost, wire.PathBlobBatch, body[:len(body)-1], nil)
	requireError(t, resp, out, http.StatusBadRequest, "INVALID_REQUEST")
	require.Contains(t, string(out), "malformed batch")

	resp, out = n.request(t, http.MethodPost, wire.PathBlobBatch, body, map[string]string{"Authorization": "Bearer wrong"})
	requireError(t, resp, out, http.StatusUnauthorized, "UNAUTHORIZED")

	resp, out = n.request(t, http.MethodPost, wire.PathBlobBatch, make([]byte, wire.MaxBatchBytes+1), nil)
	requireError(t, resp, out, http.StatusRequestEntityTooLarge, "FILE_TOO_LARGE")

	resp, _ = n.request(t, http.MethodHead, "/internal/blobs/"+id, nil, nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "a refused batch stores none of its blobs")

	resp, out = n.request(t, http.MethodPost, wire.PathBlobBatch, body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", out)
	resp, _ = n.request(t, http.MethodHead, "/internal/blobs/"+id, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
