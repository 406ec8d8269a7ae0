package coordinator

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

func TestUploadPlacesCopiesOnTheRingsNodesAndRoundTrips(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 4, nil)
		data := payload(300_000, 7)
		res := h.upload("report.pdf", data)
		require.Equal(t, "ACTIVE", res.Status)
		require.Equal(t, sha(data), res.Checksum)
		require.Equal(t, int64(len(data)), res.SizeBytes)
		require.Equal(t, 3, res.ReplicationFactor)

		// The copies are exactly where the ring says, primary first.
		want := ring.New(100, "node-1", "node-2", "node-3", "node-4").Preference(res.FileID, 3)
		require.Equal(t, want[0], res.PrimaryNode)
		require.ElementsMatch(t, want[1:], res.Replicas)
		require.ElementsMatch(t, want, h.holders(res.FileID), "blobs on disk")

		// The rows say the same.
		rec, err := h.store().GetFile(t.Context(), res.FileID)
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, rec.Status)
		require.Equal(t, ring.Position(res.FileID), rec.RingPosition)
		require.Equal(t, 3, rec.ActiveCopies())

		resp := h.get("/api/files/" + res.FileID)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, data, resp.body)
		require.Equal(t, want[0], resp.Header.Get("X-Served-By-Node"))
		require.Equal(t, `"`+sha(data)+`"`, resp.Header.Get("ETag"))
		require.Equal(t, fmt.Sprint(len(data)), resp.Header.Get("Content-Length"))
		require.Contains(t, resp.Header.Get("Content-Disposition"), `report.pdf`)

		d := h.delete("/api/files/" + res.FileID)
		require.Equal(t, http.StatusNoContent, d.StatusCode, string(d.body))
		require.Empty(t, h.holders(res.FileID))
		_, err = h.store().GetFile(t.Context(), res.FileID)
		require.Error(t, err)
		require.Equal(t, "FILE_NOT_FOUND", h.get("/api/files/"+res.FileID).errorCode(t))
	})
}

func TestEmptyFileIsAllowed(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	res := h.upload("empty", nil)
	require.Equal(t, "ACTIVE", res.Status)
	resp := h.get("/api/files/" + res.FileID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.body)
}

func TestPrimaryFailsOverDuringUpload(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		// Find a file id whose primary is node-1, by uploading until one lands there.
		h.stopNode("node-1") // down, but still on the ring: the detector has not run
		var res uploadResult
		for range 50 {
			res = h.upload("f", []byte("payload"))
			if ring.New(100, "node-1", "node-2", "node-3").Preference(res.FileID, 1)[0] == "node-1" {
				break
			}
		}
		pref := ring.New(100, "node-1", "node-2", "node-3").Preference(res.FileID, 3)
		require.Equal(t, "node-1", pref[0], "no upload chose node-1 as primary in 50 tries")
		require.Equal(t, pref[1], res.PrimaryNode, "the next node in ring order took the primary")
		require.Equal(t, "DEGRADED", res.Status)
		require.Contains(t, res.Reason, "node-1")
		require.Contains(t, res.Reason, "2 of 3 copies")
		require.ElementsMatch(t, []string{pref[1], pref[2]}, h.holders(res.FileID))
		m := h.metadata(res.FileID)
		require.Equal(t, []string{"node-1"}, m.copies("FAILED"))
	})
}

func TestTwoNodeClusterReportsDegraded(t *testing.T) {
	h := newHarness(t, "sqlite", 2, nil)
	res := h.upload("f", []byte("x"))
	require.Equal(t, "DEGRADED", res.Status)
	require.Contains(t, res.Reason, "only 2 node(s) on the ring for replication factor 3")
	require.Len(t, h.holders(res.FileID), 2)
}

func TestUploadWithNoNodeAcceptingLeavesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		for _, id := range []string{"node-1", "node-2", "node-3"} {
			h.stopNode(id)
		}
		resp := h.uploadRaw("f", []byte("lost?"))
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "STORAGE_UNAVAILABLE", resp.errorCode(t))
		counts, err := h.store().CountFilesByStatus(t.Context())
		require.NoError(t, err)
		for st, n := range counts {
			require.Zero(t, n, "files with status %s", st)
		}
	})
}

func TestNoNodeOnTheRingIsNoHealthyNodes(t *testing.T) {
	h := newHarness(t, "sqlite", 0, nil)
	resp := h.uploadRaw("f", []byte("x"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "NO_HEALTHY_NODES", resp.errorCode(t))
}

func TestDownloadFailsOverPastDeadMissingAndCorruptCopies(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		cases := []struct {
			name  string
			fault func(node, fid string)
		}{
			{"dead node", func(node, _ string) { h.stopNode(node) }},
			{"missing blob", func(node, fid string) { require.NoError(t, os.Remove(h.blobPath(node, fid))) }},
			{"corrupt blob", func(node, fid string) { h.corrupt(node, fid) }},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				data := payload(5000+i, byte(i))
				res := h.upload("f", data)
				c.fault(res.PrimaryNode, res.FileID)
				resp := h.get("/api/files/" + res.FileID)
				require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
				require.Equal(t, data, resp.body)
				require.NotEqual(t, res.PrimaryNode, resp.Header.Get("X-Served-By-Node"))
				if c.name == "dead node" {
					h.restartNode(res.PrimaryNode)
				}
			})
		}
	})
}

func TestCorruptCopyIsQuarantinedAndRebuilt(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	data := payload(4096, 3)
	res := h.upload("f", data)
	h.corrupt(res.PrimaryNode, res.FileID)
	resp := h.get("/api/files/" + res.FileID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, data, resp.body)
	// The bad copy is rebuilt in the background from a good one.
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(h.blobPath(res.PrimaryNode, res.FileID))
		return err == nil && bytes.Equal(b, data) && h.metadata(res.FileID).Status == "ACTIVE"
	}, 10*time.Second, 20*time.Millisecond)
	require.True(t, hasLog(h, "corrupt copy quarantined"))
}

func TestCorruptOnlyCopyIsRefusedBeforeTheFirstByte(t *testing.T) {
	// Above DOWNLOAD_BUFFER_SIZE, a lone copy damaged in its middle: its
	// node refuses it or ends its answer before the damaged block, so
	// nothing of it is delivered as a success, and the copy is quarantined.
	for _, size := range []int{200_000, 3 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			h := newHarness(t, "sqlite", 1, map[string]string{"DOWNLOAD_BUFFER_SIZE": "1KB", "REPLICATION_FACTOR": "1"})
			data := payload(size, 9)
			res := h.upload("big", data)
			h.corrupt("node-1", res.FileID)
			resp, err := http.Get(h.url + "/api/files/" + res.FileID)
			require.NoError(t, err)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if resp.StatusCode == http.StatusOK {
				require.Error(t, err, "a transfer that started must fail")
				require.Less(t, len(got), len(data))
				require.Equal(t, data[:len(got)], got, "every byte sent is good")
			} else {
				require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", got)
			}
			require.Eventually(t, func() bool { return h.metadata(res.FileID).Status == "FAILED" }, 5*time.Second, 20*time.Millisecond)
		})
	}
}

func TestVerificationCanBeTurnedOff(t *testing.T) {
	// The nodes check what they send whatever the setting; what it turns
	// off is the coordinator's own hashing, which only a large copy
	// without block sums (written before they existed) still needs.
	for _, verify := range []string{"false", "true"} {
		t.Run(verify, func(t *testing.T) {
			h := newHarness(t, "sqlite", 1, map[string]string{"VERIFY_CHECKSUM_ON_DOWNLOAD": verify, "REPLICATION_FACTOR": "1"})
			data := payload(2<<20, 1)
			res := h.upload("f", data)
			loc := blobfault.Locate(t, h.dirs["node-1"], res.FileID)
			require.NoError(t, os.Remove(loc.Path+".blk"))
			h.corrupt("node-1", res.FileID)
			resp, err := http.Get(h.url + "/api/files/" + res.FileID)
			require.NoError(t, err)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if verify == "false" {
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Len(t, got, len(data))
				require.NotEqual(t, data, got, "without verification the stored bytes are passed through")
				return
			}
			require.NotEqual(t, http.StatusOK, resp.StatusCode, "with it the copy is checked before the first byte")
		})
	}
}

func TestEveryHolderDownIsStorageUnavailableNotNotFound(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	res := h.upload("f", []byte("abc"))
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		h.stopNode(id)
	}
	resp := h.get("/api/files/" + res.FileID)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "STORAGE_UNAVAILABLE", resp.errorCode(t))
}

func TestPartialDeleteFinishesWhenTheHolderReturns(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		res := h.upload("f", []byte("delete me"))
		h.stopNode("node-2")
		d := h.delete("/api/files/" + res.FileID)
		require.Equal(t, http.StatusAccepted, d.StatusCode, string(d.body))
		var dr struct {
			Complete     bool     `json:"complete"`
			PendingNodes []string `json:"pendingNodes"`
		}
		d.json(t, &dr)
		require.False(t, dr.Complete)
		require.Equal(t, []string{"node-2"}, dr.PendingNodes)
		require.Equal(t, "FILE_NOT_FOUND", h.get("/api/files/"+res.FileID+"/metadata").errorCode(t))
		require.Equal(t, []string{"node-2"}, h.holders(res.FileID))

		h.restartNode("node-2")
		err := h.repairPass(t.Context())
		require.NoError(t, err)
		require.Empty(t, h.holders(res.FileID))
		_, err = h.store().GetFile(t.Context(), res.FileID)
		require.Error(t, err, "the row goes once no holder is left")
		// A second delete is a 404: the file is gone, never resurrected.
		require.Equal(t, http.StatusNotFound, h.delete("/api/files/"+res.FileID).StatusCode)
	})
}

func TestIdempotencyKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		first := h.uploadRaw("a.txt", []byte("same bytes"), "Idempotency-Key", "key-1")
		require.Equal(t, http.StatusCreated, first.StatusCode)
		var r1 uploadResult
		first.json(t, &r1)

		again := h.uploadRaw("a.txt", []byte("same bytes"), "Idempotency-Key", "key-1")
		require.Equal(t, http.StatusCreated, again.StatusCode)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		var r2 uploadResult
		again.json(t, &r2)
		require.Equal(t, r1.FileID, r2.FileID)

		other := h.uploadRaw("a.txt", []byte("other bytes"), "Idempotency-Key", "key-1")
		require.Equal(t, http.StatusConflict, other.StatusCode)
		require.Equal(t, "CONFLICT", other.errorCode(t))

		// The key lives in the metadata store: it holds across a restart.
		h.restartCoordinator()
		h.admit()
		after := h.uploadRaw("a.txt", []byte("same bytes"), "Idempotency-Key", "key-1")
		require.Equal(t, http.StatusCreated, after.StatusCode, string(after.body))
		var r3 uploadResult
		after.json(t, &r3)
		require.Equal(t, r1.FileID, r3.FileID)

		var list struct {
			Total int `json:"total"`
		}
		h.get("/api/files").json(t, &list)
		require.Equal(t, 1, list.Total, "repeats store nothing new")
	})
}

func TestRangeReads(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	data := payload(1000, 5)
	res := h.upload("f", data)
	cases := []struct {
		rng    string
		status int
		body   []byte
		cr     string
	}{
		{"bytes=0-99", 206, data[:100], "bytes 0-99/1000"},
		{"bytes=990-", 206, data[990:], "bytes 990-999/1000"},
		{"bytes=-10", 206, data[990:], "bytes 990-999/1000"},
		{"bytes=500-5000", 206, data[500:], "bytes 500-999/1000"},
		{"bytes=0-", 200, data, ""},
		{"bytes=0-1,5-6", 200, data, ""},
		{"bytes=1000-", 416, nil, "bytes */1000"},
		{"bytes=-0", 416, nil, "bytes */1000"},
		{"bytes=+5-", 200, data, ""},
	}
	for _, c := range cases {
		t.Run(c.rng, func(t *testing.T) {
			resp := h.get("/api/files/"+res.FileID, "Range", c.rng)
			require.Equal(t, c.status, resp.StatusCode, string(resp.body))
			require.Equal(t, c.cr, resp.Header.Get("Content-Range"))
			if c.status == 416 {
				require.Equal(t, "RANGE_NOT_SATISFIABLE", resp.errorCode(t))
				return
			}
			require.Equal(t, c.body, resp.body)
		})
	}

	// If-Range names the copy the client holds a part of: the ETag or the
	// Last-Modified of this answer continue it, anything else gets the whole file.
	whole := h.get("/api/files/" + res.FileID)
	for _, c := range []struct {
		name, ifRange string
		status        int
		body          []byte
	}{
		{"ETag", whole.Header.Get("ETag"), 206, data[:100]},
		{"Last-Modified", whole.Header.Get("Last-Modified"), 206, data[:100]},
		{"another ETag", `"` + strings.Repeat("0", 64) + `"`, 200, data},
		{"weak ETag", "W/" + whole.Header.Get("ETag"), 200, data},
		{"another date", "Mon, 02 Jan 2006 15:04:05 GMT", 200, data},
	} {
		t.Run("If-Range "+c.name, func(t *testing.T) {
			resp := h.get("/api/files/"+res.FileID, "Range", "bytes=0-99", "If-Range", c.ifRange)
			require.Equal(t, c.status, resp.StatusCode, string(resp.body))
			require.Equal(t, c.body, resp.body)
		})
	}
}

func TestValidationErrors(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"MAX_FILE_SIZE": "1KB", "CLUSTER_TOKEN": "s3cret"})
	known := h.upload("k", []byte("known"))
	raw := func(method, path, ct string, body io.Reader) response {
		req, err := http.NewRequest(method, h.url+path, body)
		require.NoError(t, err)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		return h.do(req)
	}
	noFile, noFileCT := multipartBody(t, "other", "x", []byte("x"))
	big, bigCT := multipartBody(t, "file", "big", payload(2048, 1))
	cases := []struct {
		name   string
		resp   func() response
		status int
		code   string
	}{
		{"not multipart", func() response { return raw("POST", "/api/files", "text/plain", strings.NewReader("hi")) }, 400, "INVALID_REQUEST"},
		{"no file part", func() response { return raw("POST", "/api/files", noFileCT, noFile) }, 400, "INVALID_REQUEST"},
		{"truncated multipart", func() response {
			body, ct := multipartBody(t, "file", "f", []byte("hello"))
			return raw("POST", "/api/files", ct, bytes.NewReader(body.Bytes()[:body.Len()-20]))
		}, 400, "INVALID_REQUEST"},
		{"file too large", func() response { return raw("POST", "/api/files", bigCT, big) }, 413, "FILE_TOO_LARGE"},
		{"declared length too large", func() response {
			req, _ := http.NewRequest("POST", h.url+"/api/files", strings.NewReader("x"))
			req.ContentLength = 10 << 20
			req.Header.Set("Content-Type", bigCT)
			resp, err := http.DefaultClient.Do(req)
			if err != nil { // the server may close before the client finishes; that is a refusal too
				return response{&http.Response{StatusCode: 413}, []byte(`{"status":413,"error":"FILE_TOO_LARGE","path":"/api/files"}`)}
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return response{resp, b}
		}, 413, "FILE_TOO_LARGE"},
		{"bad idempotency key", func() response { return h.uploadRaw("f", []byte("x"), "Idempotency-Key", "has space") }, 400, "INVALID_REQUEST"},
		{"invalid file id", func() response { return h.get("/api/files/not-a-uuid") }, 400, "INVALID_REQUEST"},
		{"upper-case id", func() response { return h.get("/api/files/" + strings.ToUpper(known.FileID)) }, 400, "INVALID_REQUEST"},
		{"traversal id", func() response { return h.get("/api/files/..%2F..%2Fetc%2Fpasswd/metadata") }, 400, "INVALID_REQUEST"},
		{"unknown file", func() response { return h.get("/api/files/00000000-0000-4000-8000-000000000000") }, 404, "FILE_NOT_FOUND"},
		{"unknown file metadata", func() response { return h.get("/api/files/00000000-0000-4000-8000-000000000000/metadata") }, 404, "FILE_NOT_FOUND"},
		{"unknown file delete", func() response { return h.delete("/api/files/00000000-0000-4000-8000-000000000000") }, 404, "FILE_NOT_FOUND"},
		{"unknown file verify", func() response { return h.post("/api/files/00000000-0000-4000-8000-000000000000/verify", nil) }, 404, "FILE_NOT_FOUND"},
		{"negative page", func() response { return h.get("/api/files?page=-1") }, 400, "INVALID_REQUEST"},
		{"page not a number", func() response { return h.get("/api/files?page=x") }, 400, "INVALID_REQUEST"},
		{"size zero", func() response { return h.get("/api/files?size=0") }, 400, "INVALID_REQUEST"},
		{"size too big", func() response { return h.get("/api/files?size=1001") }, 400, "INVALID_REQUEST"},
		{"huge page", func() response { return h.get("/api/files?page=99999999999&size=1000") }, 400, "INVALID_REQUEST"},
		{"unknown status", func() response { return h.get("/api/files?status=LOST") }, 400, "INVALID_REQUEST"},
		{"unknown node", func() response { return h.get("/api/nodes/node-9") }, 404, "NODE_NOT_FOUND"},
		{"deregister unknown node", func() response { return h.delete("/api/nodes/node-9") }, 404, "NODE_NOT_FOUND"},
		{"bad wait", func() response { return h.delete("/api/nodes/node-1?wait=maybe") }, 400, "INVALID_REQUEST"},
		{"register without token", func() response {
			return raw("POST", "/api/nodes/register", "application/json", strings.NewReader(`{"nodeId":"n","host":"h","port":1}`))
		}, 401, "UNAUTHORIZED"},
		{"router 404", func() response { return h.get("/api/nothing-here") }, 404, "NOT_FOUND"},
		{"router 405", func() response { return raw("PUT", "/api/files", "", nil) }, 405, "METHOD_NOT_ALLOWED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := c.resp()
			require.Equal(t, c.status, resp.StatusCode, string(resp.body))
			require.Equal(t, c.code, resp.errorCode(t))
		})
	}
	t.Run("register with token but bad body", func(t *testing.T) {
		req, _ := http.NewRequest("POST", h.url+"/api/nodes/register", strings.NewReader(`{"nodeId":"../x","host":"h","port":0}`))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp := h.do(req)
		require.Equal(t, 400, resp.StatusCode, string(resp.body))
		req, _ = http.NewRequest("POST", h.url+"/api/nodes/register", strings.NewReader(`{not json`))
		req.Header.Set("Authorization", "Bearer s3cret")
		require.Equal(t, 400, h.do(req).StatusCode)
	})
}

func TestListIsNewestFirstAndHidesPendingAndDeleted(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	var ids []string
	for i := range 5 {
		ids = append(ids, h.upload(fmt.Sprintf("f%d", i), []byte{byte(i)}).FileID)
		time.Sleep(2 * time.Millisecond) // distinct creation times for the order
	}
	require.Equal(t, http.StatusNoContent, h.delete("/api/files/"+ids[0]).StatusCode)
	var page struct {
		Items []struct {
			FileID string `json:"fileId"`
		} `json:"items"`
		Page, Size, Total int
	}
	h.get("/api/files?page=0&size=2").json(t, &page)
	require.Equal(t, 4, page.Total)
	require.Equal(t, 2, page.Size)
	require.Len(t, page.Items, 2)
	require.Equal(t, ids[4], page.Items[0].FileID)
	require.Equal(t, ids[3], page.Items[1].FileID)
	h.get("/api/files?page=1&size=2").json(t, &page)
	require.Equal(t, ids[2], page.Items[0].FileID)
	require.Equal(t, ids[1], page.Items[1].FileID)
	h.get("/api/files?page=5&size=2").json(t, &page)
	require.Empty(t, page.Items)
}

func TestVerifyRebuildsCorruptAndMissingCopies(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		data := payload(10_000, 4)
		res := h.upload("f", data)
		h.corrupt(res.Replicas[0], res.FileID)
		require.NoError(t, os.Remove(h.blobPath(res.Replicas[1], res.FileID)))

		resp := h.post("/api/files/"+res.FileID+"/verify", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		var v struct {
			Status        string `json:"status"`
			HealthyCopies int    `json:"healthyCopies"`
			Copies        []struct {
				NodeID, Result, ActualChecksum string
				Rebuilt                        bool
			} `json:"copies"`
		}
		resp.json(t, &v)
		require.Equal(t, "ACTIVE", v.Status)
		require.Equal(t, 3, v.HealthyCopies)
		results := map[string]string{}
		for _, c := range v.Copies {
			results[c.NodeID] = c.Result
			require.Equal(t, c.Result != "OK", c.Rebuilt, c.NodeID)
		}
		require.Equal(t, map[string]string{res.PrimaryNode: "OK", res.Replicas[0]: "CORRUPT", res.Replicas[1]: "MISSING"}, results)
		for _, n := range []string{res.PrimaryNode, res.Replicas[0], res.Replicas[1]} {
			b, err := os.ReadFile(h.blobPath(n, res.FileID))
			require.NoError(t, err)
			require.Equal(t, data, b, n)
		}
	})
}

func TestRequestIDReachesTheNodes(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	resp := h.uploadRaw("f", []byte("traced"), "X-Request-Id", "trace-abc-123")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "trace-abc-123", resp.Header.Get("X-Request-Id"))
	for id, n := range h.nodes {
		found := false
		// A small copy travels in a batch, whose blobs the node logs one by
		// one under their own request ids.
		for _, rec := range n.Logs("batched blob write") {
			if rec["request_id"] == "trace-abc-123" {
				found = true
			}
		}
		require.True(t, found, "%s logged the coordinator's request id on its write", id)
	}
}

// TestRepairPrunesLeasesLeftByDeadCoordinators leaves lease rows as a
// coordinator that died holding them would, and checks that a repair pass
// deletes those long expired and nothing else.
func TestRepairPrunesLeasesLeftByDeadCoordinators(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		h := newHarness(t, kind, 3, nil)
		ctx := t.Context()
		st := h.store()
		for _, name := range []string{"file:left-behind", "rebalance:JOINED:node-9"} {
			ok, err := st.AcquireLease(ctx, name, "dead-coordinator", time.Millisecond)
			require.NoError(t, err)
			require.True(t, ok)
		}
		ok, err := st.AcquireLease(ctx, "file:in-use", "live-coordinator", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		time.Sleep(20 * time.Millisecond)

		// With the product's age (an hour) the fresh rows stay.
		err = h.repairPass(ctx)
		require.NoError(t, err)
		require.False(t, hasLog(h, "pruned leases left by stopped coordinators"))
		n, err := st.PruneLeases(ctx, time.Hour)
		require.NoError(t, err)
		require.Zero(t, n)

		h.app.repair.leaseAge = 0
		err = h.repairPass(ctx)
		require.NoError(t, err)
		require.True(t, hasLog(h, `msg="pruned leases left by stopped coordinators" leases=2`), "the pass pruned the two stale rows")
		ok, err = st.AcquireLease(ctx, "file:in-use", "another-coordinator", time.Minute)
		require.NoError(t, err)
		require.False(t, ok, "a live lease is untouched")
	})
}

// A copy whose checksum sidecar is torn (empty), garbage or gone is a bad
// copy, however intact its bytes: the node would refuse it on every read.
// Verify reports it and the copy is rebuilt from a good one.
func TestVerifyCountsABadSidecarAsABadCopy(t *testing.T) {
	h := newHarness(t, "sqlite", 3, nil)
	type copyCheck struct {
		NodeID, Result string
		Rebuilt        bool
	}
	verify := func(id string) map[string]copyCheck {
		resp := h.post("/api/files/"+id+"/verify", nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(resp.body))
		var v struct {
			Status        string      `json:"status"`
			HealthyCopies int         `json:"healthyCopies"`
			Copies        []copyCheck `json:"copies"`
		}
		resp.json(t, &v)
		require.Equal(t, "ACTIVE", v.Status, string(resp.body))
		require.Equal(t, 3, v.HealthyCopies)
		out := map[string]copyCheck{}
		for _, c := range v.Copies {
			out[c.NodeID] = c
		}
		return out
	}
	sidecar := func(n, id string) string { return h.blobPath(n, id) + ".sha256" }

	data := payload(4_000, 9)
	res := h.upload("f", data)
	torn, garbage := res.Replicas[0], res.Replicas[1]
	require.NoError(t, os.WriteFile(sidecar(torn, res.FileID), nil, 0o644))
	require.NoError(t, os.WriteFile(sidecar(garbage, res.FileID), []byte("not a checksum\n"), 0o644))
	got := verify(res.FileID)
	require.Equal(t, copyCheck{res.PrimaryNode, "OK", false}, got[res.PrimaryNode])
	require.Equal(t, copyCheck{torn, "CORRUPT", true}, got[torn])
	require.Equal(t, copyCheck{garbage, "CORRUPT", true}, got[garbage])

	other := h.upload("g", payload(3_000, 2))
	require.NoError(t, os.Remove(sidecar(other.Replicas[0], other.FileID)))
	got = verify(other.FileID)
	require.Equal(t, copyCheck{other.Replicas[0], "MISSING", true}, got[other.Replicas[0]])

	for _, f := range []uploadResult{res, other} {
		for _, n := range append([]string{f.PrimaryNode}, f.Replicas...) {
			side, err := os.ReadFile(sidecar(n, f.FileID))
			require.NoError(t, err)
			require.Equal(t, f.Checksum, strings.TrimSpace(string(side)), n)
		}
	}
}
