package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chunkedMetadata is the metadata of a chunked file as the API shows it.
type chunkedMetadata struct {
	uploadResult
	Chunks []struct {
		Index     int    `json:"index"`
		ChunkID   string `json:"chunkId"`
		Offset    int64  `json:"offset"`
		SizeBytes int64  `json:"sizeBytes"`
		Status    string `json:"status"`
		Replicas  []struct {
			NodeID string `json:"nodeId"`
			Status string `json:"status"`
		} `json:"replicas"`
	} `json:"chunks"`
}

func (h *harness) chunkedMetadata(id string) chunkedMetadata {
	h.t.Helper()
	resp := h.get("/api/files/" + id + "/metadata")
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
	var m chunkedMetadata
	resp.json(h.t, &m)
	return m
}

func (h *harness) put(path string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPut, h.url+path, bytes.NewReader(body))
	require.NoError(h.t, err)
	return h.do(req)
}

func TestChunkSizeSplitsLargeUploadsIntoChunksOnTheRing(t *testing.T) {
	h := newHarness(t, "sqlite", 4, map[string]string{"CHUNK_SIZE": "1MiB", "REBALANCE_ON_MEMBERSHIP_CHANGE": "false"})
	data := payload(5<<19+123, 7) // 2.5 MiB and a bit
	res := h.upload("big.bin", data)
	require.Equal(t, "ACTIVE", res.Status)
	m := h.chunkedMetadata(res.FileID)
	require.Len(t, m.Chunks, 3, "CHUNK_SIZE=1MiB cuts 2.5 MiB into three chunks")
	require.Empty(t, m.Replicas)
	rg := h.app.members.Ring()
	for i, c := range m.Chunks {
		require.Equal(t, int64(i)<<20, c.Offset)
		var on []string
		for _, r := range c.Replicas {
			if r.Status == "ACTIVE" {
				on = append(on, r.NodeID)
			}
		}
		require.ElementsMatch(t, rg.Preference(c.ChunkID, 3), on, "chunk %d is placed by its own id", i)
	}
	got := h.get("/api/files/" + res.FileID)
	require.Equal(t, http.StatusOK, got.StatusCode)
	require.Equal(t, data, got.body)
	part := h.get("/api/files/"+res.FileID, "Range", "bytes=1048570-1048585")
	require.Equal(t, http.StatusPartialContent, part.StatusCode)
	require.Equal(t, data[1048570:1048586], part.body)

	// A join moves chunks exactly as the ring predicts for their keys.
	h.addNode("node-5")
	h.admit()
	resp := h.post("/api/admin/rebalance", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	var rep struct {
		FilesAffected int `json:"filesAffected"`
		ChunksMoved   int `json:"chunksMoved"`
	}
	resp.json(t, &rep)
	rg = h.app.members.Ring()
	moved := 0
	for _, c := range m.Chunks {
		if slices.Contains(rg.Preference(c.ChunkID, 3), "node-5") {
			moved++
		}
	}
	require.Equal(t, moved, rep.ChunksMoved, "the report counts the chunks the ring moved to the newcomer: %s", resp.body)
	require.Equal(t, rep.FilesAffected, rep.ChunksMoved, "only chunks were stored")
	require.Contains(t, rg.Nodes(), "node-5")
	m = h.chunkedMetadata(res.FileID)
	for i, c := range m.Chunks {
		var on []string
		for _, r := range c.Replicas {
			if r.Status == "ACTIVE" {
				on = append(on, r.NodeID)
			}
		}
		require.ElementsMatch(t, rg.Preference(c.ChunkID, 3), on, "after the join, chunk %d sits where the ring says", i)
	}
	require.Equal(t, data, h.get("/api/files/"+res.FileID).body)

	// The file is listed once; its chunks are not files.
	var list struct {
		Total int `json:"total"`
	}
	h.get("/api/files").json(t, &list)
	require.Equal(t, 1, list.Total)

	del := h.delete("/api/files/" + res.FileID)
	require.Equal(t, http.StatusNoContent, del.StatusCode, string(del.body))
	for _, c := range m.Chunks {
		_, err := h.store().GetFile(context.Background(), c.ChunkID)
		require.Error(t, err, "chunk %d's row is gone", c.Index)
	}
}

func TestUploadSessionResumesOnAFreshCoordinator(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"CHUNK_SIZE": "1MiB"})
	p1, p2 := payload(3<<19, 1), payload(1000, 2)
	body, _ := json.Marshal(map[string]string{"fileName": "backup.tar", "contentType": "application/x-tar"})
	resp := h.post("/api/uploads", body)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(resp.body))
	var sess struct {
		UploadID  string    `json:"uploadId"`
		CreatedAt time.Time `json:"createdAt"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	resp.json(t, &sess)
	require.Equal(t, 24*time.Hour, sess.ExpiresAt.Sub(sess.CreatedAt), "UPLOAD_SESSION_TTL defaults to 24h")
	resp = h.put(fmt.Sprintf("/api/uploads/%s/parts/2", sess.UploadID), p2)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	var withMD5 map[string]any
	resp.json(t, &withMD5)
	require.Len(t, withMD5["md5"], 32, "a part's answer carries its MD5 unless asked not to")

	// The coordinator goes away mid-session; a fresh one knows the part.
	h.restartCoordinator()
	var got struct {
		Parts []struct {
			PartNumber int   `json:"partNumber"`
			SizeBytes  int64 `json:"sizeBytes"`
		} `json:"parts"`
	}
	resp = h.get("/api/uploads/" + sess.UploadID)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	resp.json(t, &got)
	require.Len(t, got.Parts, 1)
	require.Equal(t, 2, got.Parts[0].PartNumber)
	resp = h.put(fmt.Sprintf("/api/uploads/%s/parts/1?md5=maybe", sess.UploadID), p1)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(resp.body))
	resp = h.put(fmt.Sprintf("/api/uploads/%s/parts/1?md5=false", sess.UploadID), p1)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	var part map[string]any
	resp.json(t, &part)
	require.NotContains(t, part, "md5", "md5=false leaves the part's MD5 out")
	require.Len(t, part["checksum"], 64)

	resp = h.post("/api/uploads/"+sess.UploadID+"/complete", []byte(`{"parts":[2,1]}`))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "INVALID_PART_ORDER", resp.errorCode(t))
	resp = h.post("/api/uploads/"+sess.UploadID+"/complete", nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(resp.body))
	var res uploadResult
	resp.json(t, &res)
	whole := slices.Concat(p1, p2)
	require.Equal(t, int64(len(whole)), res.SizeBytes)
	require.Equal(t, whole, h.get("/api/files/"+res.FileID).body)
	require.Len(t, h.chunkedMetadata(res.FileID).Chunks, 3)
	resp = h.get("/api/uploads/" + sess.UploadID)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, "UPLOAD_NOT_FOUND", resp.errorCode(t))
}

func TestUploadSessionTTLExpiresSessionsInTheRepairLoop(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"UPLOAD_SESSION_TTL": "1s"})
	resp := h.post("/api/uploads", []byte(`{"fileName":"x"}`))
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(resp.body))
	var sess struct {
		UploadID string `json:"uploadId"`
	}
	resp.json(t, &sess)
	resp = h.put("/api/uploads/"+sess.UploadID+"/parts/1", payload(4096, 3))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
	time.Sleep(1100 * time.Millisecond)
	require.NoError(t, h.repairPass(context.Background()))
	list := h.get("/api/uploads")
	require.Equal(t, http.StatusOK, list.StatusCode)
	require.JSONEq(t, `{"items":[]}`, string(list.body))
	require.NoError(t, h.repairPass(context.Background()))
	// The part's chunk row is gone, which the reconciler drops only once
	// every copy of it has been removed from the nodes.
	ids, err := h.store().FilesAfter(context.Background(), "", 100)
	require.NoError(t, err)
	require.Empty(t, ids, "no chunk row is left")
}
