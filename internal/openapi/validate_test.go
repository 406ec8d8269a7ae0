package openapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/openapi/openapitest"
)

const (
	fileID = "3f2b8c1e-5d4a-4b6f-9e21-0c7d8a9b1e2f"
	sum    = "4d7f9c0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6"
	ts     = "2026-11-29T10:15:31.412345678Z"
)

func jsonHeader(extra ...string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req-1"}}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

func downloadHeader(extra ...string) http.Header {
	h := http.Header{
		"Content-Type": {"application/pdf"}, "X-Request-Id": {"req-2"}, "X-Served-By-Node": {"node-2"},
		"Etag": {`"` + sum + `"`}, "X-Checksum-Sha256": {sum}, "Accept-Ranges": {"bytes"},
		"Content-Disposition": {`attachment; filename="a.pdf"`}, "Last-Modified": {"Sun, 29 Nov 2026 10:15:31 GMT"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	return h
}

var uploadResult = `{"fileId":"` + fileID + `","fileName":"a.pdf","contentType":"application/pdf","sizeBytes":5,
  "checksum":"` + sum + `","status":"DEGRADED","primaryNode":"node-1","replicas":["node-2"],"replicationFactor":3,
  "createdAt":"` + ts + `","reason":"2 of 3 copies written: node-3: connection refused"}`

var errorBody = `{"timestamp":"` + ts + `","status":404,"error":"FILE_NOT_FOUND","message":"file not found","path":"/api/files/` + fileID + `"}`

var node = `{"nodeId":"node-1","host":"127.0.0.1","port":9001,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":32.4,
  "registeredAt":"` + ts + `","lastCheckAt":"` + ts + `","lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":5}`

var drainPlan = `{"node":"node-2","safe":false,"reasons":["node node-3 would receive 10 bytes (1 files) but did not report its free space"],
  "files":1,"bytes":10,"filesOnNode":1,"bytesOnNode":10,"pendingUploads":0,"remainingNodes":3,"replicationFactor":3,
  "targets":[{"nodeId":"node-3","files":1,"bytes":10,"freeBytes":null}],"soleCopies":[]}`

type sample struct {
	name, method, path string
	status             int
	header             http.Header
	body               string
}

// Answers shaped as the coordinator gives them must pass.
func TestValidAnswersPass(t *testing.T) {
	tests := []sample{
		{"upload 201", "POST", "/api/files", 201, jsonHeader("Location", "/api/files/"+fileID), uploadResult},
		{"idempotent replay", "POST", "/api/files", 201, jsonHeader("Location", "/api/files/"+fileID, "Idempotent-Replayed", "true"), uploadResult},
		{"file not found", "GET", "/api/files/" + fileID + "/metadata", 404, jsonHeader(), errorBody},
		{"node list", "GET", "/api/nodes", 200, jsonHeader(), "[" + node + "]"},
		{"empty node list", "GET", "/api/nodes", 200, jsonHeader(), "[]"},
		{"one node", "GET", "/api/nodes/node-1", 200, jsonHeader(), node},
		{"ring, not a node named ring", "GET", "/api/nodes/ring", 200, jsonHeader(),
			`{"physicalNodes":1,"virtualNodesPerNode":100,"totalRingPositions":100,"nodes":[{"nodeId":"node-1","keyspaceSharePercent":100}]}`},
		{"download", "GET", "/api/files/" + fileID, 200, downloadHeader(), "%PDF-"},
		{"download from the content cache", "GET", "/api/files/" + fileID, 200, func() http.Header {
			h := downloadHeader()
			h.Del("X-Served-By-Node")
			h.Set("X-Served-From", "content-cache")
			return h
		}(), "%PDF-"},
		{"range", "GET", "/api/files/" + fileID, 206, downloadHeader("Content-Range", "bytes 0-1/5"), "%P"},
		{"range past the end", "GET", "/api/files/" + fileID, 416, jsonHeader("Content-Range", "bytes */5"),
			strings.Replace(errorBody, `404,"error":"FILE_NOT_FOUND"`, `416,"error":"RANGE_NOT_SATISFIABLE"`, 1)},
		{"delete complete", "DELETE", "/api/files/" + fileID, 204, http.Header{"X-Request-Id": {"r"}}, ""},
		{"delete pending", "DELETE", "/api/files/" + fileID, 202, jsonHeader(),
			`{"fileId":"` + fileID + `","status":"DELETED","complete":false,"pendingNodes":["node-3"],"message":"later"}`},
		{"cluster down", "GET", "/api/health", 503, jsonHeader(),
			`{"status":"DOWN","reasons":["no node is on the ring"],"replicationFactor":3,"nodes":{"total":0,"onRing":0,"healthy":0,"unhealthy":0,"deregistered":0},
			  "metadataStore":{"status":"UP","kind":"sqlite"},"redis":{"status":"DISABLED"}}`},
		{"drain report", "DELETE", "/api/nodes/node-2", 200, jsonHeader(),
			`{"node":` + node + `,"drain":{"node":"node-2","filesRemaining":0,"complete":true,"run":{"trigger":"DEREGISTERED","node":"node-2",
			  "filesScanned":3,"filesAffected":3,"copiesCreated":3,"copiesRemoved":3,"primariesPromoted":1,"failures":0,"unrecoverableFiles":[],"filesSkipped":0,"durationMs":12,"complete":true}}}`},
		{"drain plan", "DELETE", "/api/nodes/node-2?dryRun=true", 200, jsonHeader(), drainPlan},
		{"unsafe drain refused", "DELETE", "/api/nodes/node-2", 409, jsonHeader(),
			strings.Replace(errorBody, `404,"error":"FILE_NOT_FOUND"`, `409,"error":"UNSAFE_DRAIN"`, 1)},
		{"encoded slash stays in the id", "GET", "/api/files/..%2F..%2Fetc/metadata", 400, jsonHeader(),
			strings.Replace(errorBody, `404,"error":"FILE_NOT_FOUND"`, `400,"error":"INVALID_REQUEST"`, 1)},
		{"router 404", "GET", "/api/nothing", 404, jsonHeader(),
			strings.Replace(errorBody, "FILE_NOT_FOUND", "NOT_FOUND", 1)},
		{"router 405", "PUT", "/api/files", 405, jsonHeader(),
			strings.Replace(errorBody, `404,"error":"FILE_NOT_FOUND"`, `405,"error":"METHOD_NOT_ALLOWED"`, 1)},
		{"metrics", "GET", "/metrics", 200, http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}, "X-Request-Id": {"r"}},
			"# HELP x y\n# TYPE x counter\nx 1\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			require.NoError(t, openapitest.Validate(req, tc.status, tc.header, []byte(tc.body)))
		})
	}
}

// Answers that break the document must fail, each for its own reason.
func TestWrongAnswersFail(t *testing.T) {
	tests := []struct {
		sample
		why string // a fragment of the validator's complaint
	}{
		{sample{"missing field", "POST", "/api/files", 201, jsonHeader("Location", "/api/files/"+fileID),
			strings.Replace(uploadResult, `"checksum":"`+sum+`",`, "", 1)}, `property "checksum" is missing`},
		{sample{"unknown field", "POST", "/api/files", 201, jsonHeader("Location", "/api/files/"+fileID),
			strings.Replace(uploadResult, `"sizeBytes":5,`, `"sizeBytes":5,"size":5,`, 1)}, `"size"`},
		{sample{"unknown status value", "POST", "/api/files", 201, jsonHeader("Location", "/api/files/"+fileID),
			strings.Replace(uploadResult, `"DEGRADED"`, `"DONE"`, 1)}, "DONE"},
		{sample{"no Location", "POST", "/api/files", 201, jsonHeader(), uploadResult}, "Location"},
		{sample{"undocumented status", "POST", "/api/files", 200, jsonHeader(), uploadResult}, "status is not supported"},
		{sample{"unknown error code", "GET", "/api/files/" + fileID + "/metadata", 404, jsonHeader(),
			strings.Replace(errorBody, "FILE_NOT_FOUND", "MISSING", 1)}, "MISSING"},
		{sample{"error without timestamp", "GET", "/api/files/" + fileID + "/metadata", 404, jsonHeader(),
			strings.Replace(errorBody, `"timestamp":"`+ts+`",`, "", 1)}, `property "timestamp" is missing`},
		{sample{"bad time", "GET", "/api/nodes", 200, jsonHeader(), "[" + strings.Replace(node, `"registeredAt":"`+ts, `"registeredAt":"yesterday`, 1) + "]"}, "registeredAt"},
		{sample{"drain plan without its targets", "DELETE", "/api/nodes/node-2?dryRun=true", 200, jsonHeader(),
			strings.Replace(drainPlan, `"targets":[{"nodeId":"node-3","files":1,"bytes":10,"freeBytes":null}],`, "", 1)}, "targets"},
		{sample{"node list as object", "GET", "/api/nodes", 200, jsonHeader(), node}, "array"},
		{sample{"no request id", "GET", "/api/nodes", 200, http.Header{"Content-Type": {"application/json"}}, "[]"}, "X-Request-Id"},
		{sample{"text instead of JSON", "GET", "/api/nodes", 200, http.Header{"Content-Type": {"text/plain"}, "X-Request-Id": {"r"}}, "[]"}, "text/plain"},
		{sample{"download without serving node", "GET", "/api/files/" + fileID, 200, func() http.Header {
			h := downloadHeader()
			h.Del("X-Served-By-Node")
			return h
		}(), "%PDF-"}, "exactly one must be present"},
		{sample{"download from a node and the cache at once", "GET", "/api/files/" + fileID, 200, func() http.Header {
			h := downloadHeader()
			h.Set("X-Served-From", "content-cache")
			return h
		}(), "%PDF-"}, "exactly one must be present"},
		{sample{"unknown cache source", "GET", "/api/files/" + fileID, 200, func() http.Header {
			h := downloadHeader()
			h.Del("X-Served-By-Node")
			h.Set("X-Served-From", "disk")
			return h
		}(), "%PDF-"}, "X-Served-From"},
		{sample{"range without Content-Range", "GET", "/api/files/" + fileID, 206, downloadHeader(), "%P"}, "Content-Range"},
		{sample{"no such operation", "PUT", "/api/files", 200, jsonHeader(), "{}"}, "no operation"},
		{sample{"router 404 with another code", "GET", "/api/nothing", 404, jsonHeader(), errorBody}, "not NOT_FOUND"},
		{sample{"router 405 not in the error shape", "PUT", "/api/files", 405, jsonHeader(), `{"error":"METHOD_NOT_ALLOWED"}`}, "not an Error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			err := openapitest.Validate(req, tc.status, tc.header, []byte(tc.body))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.why)
		})
	}
}

// recordingTB stands in for a test so the helper's failure can be observed.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Error(args ...any) {
	r.errors = append(r.errors, fmt.Sprint(args...))
}

func TestValidateResponseFailsTheTest(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/api/nodes", nil)
	good := &http.Response{StatusCode: 200, Header: jsonHeader(), Request: req}
	bad := &http.Response{StatusCode: 200, Header: jsonHeader(), Request: req}

	tb := &recordingTB{TB: t}
	openapitest.ValidateResponse(tb, nil, good, []byte("["+node+"]"))
	require.Empty(t, tb.errors)
	openapitest.ValidateResponse(tb, nil, bad, []byte(`[{"nodeId":"node-1"}]`))
	require.Len(t, tb.errors, 1)

	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "r")
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(http.StatusOK)
	_, _ = rec.WriteString(`{"nodes":[]}`)
	tb = &recordingTB{TB: t}
	openapitest.ValidateRecorder(tb, req, rec)
	require.Len(t, tb.errors, 1, "a node list answered as an object must fail")
}
