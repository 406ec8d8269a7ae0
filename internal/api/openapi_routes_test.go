package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/auth"
	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/console"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/openapi"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

// routes lists the router's routes as "METHOD /path", those of Swagger UI
// and the console left out: they serve HTML and scripts, not the API.
func routes(t *testing.T, h http.Handler) []string {
	t.Helper()
	r, ok := h.(chi.Routes)
	require.True(t, ok, "api.New no longer returns a chi router; adapt this test")
	var out []string
	require.NoError(t, chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/swagger-ui" || strings.HasPrefix(route, openapi.UIPath) ||
			route == "/console" || strings.HasPrefix(route, console.Path) {
			return nil
		}
		// chi and OpenAPI write path parameters alike ({fileId}).
		out = append(out, method+" "+route)
		return nil
	}))
	slices.Sort(out)
	return slices.Compact(out)
}

// The OpenAPI document must not drift from the router: every route has an
// operation and every operation a route.
func TestRoutesMatchTheOpenAPIDocument(t *testing.T) {
	// A Metrics handler, uploads and keys, so the optional /metrics,
	// /api/uploads and /api/admin/keys routes are there too.
	got := routes(t, api.New(api.Options{Metrics: http.NotFoundHandler(), Uploads: fakeUploads{}, Keys: &auth.Keys{},
		Namespace: (*sqlite.Store)(nil), Objects: &objects.Service{}}))
	documented, err := openapitest.Operations()
	require.NoError(t, err)

	var undocumented, unrouted []string
	for _, r := range got {
		if !slices.Contains(documented, r) {
			undocumented = append(undocumented, r)
		}
	}
	for _, op := range documented {
		if !slices.Contains(got, op) {
			unrouted = append(unrouted, op)
		}
	}
	require.Empty(t, undocumented, "routes missing from internal/openapi/openapi.json")
	require.Empty(t, unrouted, "operations in internal/openapi/openapi.json that no route serves")
	require.Contains(t, got, "POST /api/files/{fileId}/verify", "the walk found too little to mean anything")
}

func TestOpenAPIAndSwaggerUIAreServed(t *testing.T) {
	h := api.New(api.Options{})
	tests := []struct {
		method, target string
		status         int
		contentType    string
	}{
		{http.MethodGet, "/openapi.json", http.StatusOK, "application/json"},
		{http.MethodGet, "/swagger-ui", http.StatusMovedPermanently, ""},
		{http.MethodGet, "/swagger-ui/", http.StatusOK, "text/html; charset=utf-8"},
		{http.MethodGet, "/swagger-ui/swagger-ui-bundle.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{http.MethodGet, "/swagger-ui/missing.js", http.StatusNotFound, "application/json"},
		{http.MethodPost, "/openapi.json", http.StatusMethodNotAllowed, "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			require.Equal(t, tc.status, rec.Code)
			require.Equal(t, tc.contentType, rec.Header().Get("Content-Type"))
			require.NotEmpty(t, rec.Header().Get("X-Request-Id"), "the edge middleware runs for these routes too")
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, openapi.Document(), rec.Body.Bytes())
}

// Exactly / leads a browser to the console with a temporary redirect; every
// other unknown path keeps the JSON 404.
func TestRootRedirectsToTheConsole(t *testing.T) {
	h := api.New(api.Options{})
	tests := []struct {
		method, target string
		status         int
		location, code string
	}{
		{http.MethodGet, "/", http.StatusFound, "console/", ""},
		{http.MethodGet, "/?x=1", http.StatusFound, "console/", ""},
		{http.MethodGet, "/index.html", http.StatusNotFound, "", "NOT_FOUND"},
		{http.MethodGet, "/console/missing.js", http.StatusNotFound, "", "NOT_FOUND"},
		{http.MethodGet, "/api", http.StatusNotFound, "", "NOT_FOUND"},
		{http.MethodPost, "/", http.StatusMethodNotAllowed, "", "METHOD_NOT_ALLOWED"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tc.status, rec.Code, "body: %s", rec.Body)
			require.Equal(t, tc.location, rec.Header().Get("Location"))
			if tc.code != "" {
				var body struct{ Error string }
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), "body: %s", rec.Body)
				require.Equal(t, tc.code, body.Error)
			}
			openapitest.ValidateRecorder(t, req, rec)
		})
	}

	// The relative Location, resolved against / as a browser does, is the
	// console's page.
	target, err := url.Parse("http://coordinator.test/")
	require.NoError(t, err)
	loc, err := target.Parse("console/")
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, loc.Path, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Body.String(), "<title>dfs console</title>")
}

// Fakes embed the interface so methods added to it later need no change
// here; a method the test does not expect panics.
type fakeMembers struct {
	api.Members
	nodes []meta.Node
}

func (f fakeMembers) Ring() *ring.Ring {
	var ms []ring.Member
	for _, n := range f.nodes {
		if n.OnRing() {
			ms = append(ms, ring.Member{Node: n.ID, Zone: n.PlacementZone(), Weight: n.PlacementWeight()})
		}
	}
	return ring.New(100).WithMembers(ms...)
}

func (f fakeMembers) Nodes(context.Context) ([]meta.Node, error) { return f.nodes, nil }

func (f fakeMembers) Node(_ context.Context, id string) (meta.Node, error) {
	for _, n := range f.nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return meta.Node{}, errs.WithCode(errs.NotFound, "NODE_NOT_FOUND", nil, "storage node %s not found", id)
}

type fakeFiles struct {
	api.Files
	rec meta.FileRecord
}

func (f fakeFiles) Metadata(_ context.Context, id string) (meta.FileRecord, error) {
	if id != f.rec.ID {
		return meta.FileRecord{}, errs.WithCode(errs.NotFound, "FILE_NOT_FOUND", nil, "file %s not found", id)
	}
	return f.rec, nil
}

func (f fakeFiles) List(context.Context, []meta.FileStatus, int, int, string) ([]meta.File, int, error) {
	return []meta.File{f.rec.File}, 1, nil
}

type fakeUploads struct{ api.Uploads }

const fakeSessionID = "7c0e4d6a-1b2f-4c3d-8e9f-a0b1c2d3e4f5"

func (fakeUploads) GetSession(_ context.Context, id string) (files.Session, []files.Part, error) {
	if id != fakeSessionID {
		return files.Session{}, nil, errs.WithCode(errs.NotFound, errs.CodeUploadNotFound, nil, "upload session %s not found", id)
	}
	at := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	return files.Session{ID: id, FileName: "a.tar", ContentType: "application/x-tar", CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour)},
		[]files.Part{{Number: 1, SizeBytes: 3, SHA256: strings.Repeat("ab", 32), MD5: strings.Repeat("cd", 16), CreatedAt: at}}, nil
}

func (fakeUploads) ListSessions(context.Context, string, int) ([]files.Session, error) {
	return []files.Session{}, nil
}

type fakeHealth struct{ report api.HealthReport }

func (f fakeHealth) Cluster(context.Context) api.HealthReport { return f.report }

func (f fakeHealth) Ready(context.Context) error {
	if f.report.Status == api.HealthDown {
		return errors.New("metadata store down")
	}
	return nil
}

type fakeRebalancer struct{ api.Rebalancer }

func (fakeRebalancer) Run(_ context.Context, trigger rebalance.Trigger, node string) (rebalance.Report, error) {
	return rebalance.Report{Trigger: trigger, Node: node, FilesScanned: 2, UnrecoverableFiles: []string{}, DurationMs: 3}, nil
}

// The real handlers, over fake services, answer what the document says.
func TestAnswersMatchTheOpenAPIDocument(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 15, 31, 412_000_000, time.UTC)
	nodes := []meta.Node{
		{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: meta.NodeHealthy, RegisteredAt: at, LastCheckAt: &at, LastHealthyAt: &at, ConsecutiveSuccesses: 3},
		{ID: "node-2", Host: "127.0.0.1", Port: 9002, Status: meta.NodeUnhealthy, RegisteredAt: at},
		{ID: "node-3", Host: "127.0.0.1", Port: 9003, Status: meta.NodeDeregistered, RegisteredAt: at},
	}
	// A finished repair and a drain of node-3 half done, so that both lists
	// and a node's drain are in the answers.
	tracker := ops.New(ops.Options{})
	repair := tracker.Start(ops.Repair, "REPAIR", "", 2)
	repair.Add(2, 10)
	repair.Finish(true, rebalance.Report{Trigger: rebalance.Repair, FilesScanned: 2, UnrecoverableFiles: []string{}, Complete: true})
	tracker.Start(ops.Drain, "DEREGISTERED", "node-3", 4).Add(2, 2048)
	const id = "3f2b8c1e-5d4a-4b6f-9e21-0c7d8a9b1e2f"
	rec := meta.FileRecord{
		File: meta.File{ID: id, Name: "a.txt", ContentType: "text/plain", SizeBytes: 5, Checksum: strings.Repeat("ab", 32),
			Status: meta.FileDegraded, StatusReason: "1 of 2 copies written", PrimaryNodeID: "node-1", ReplicationFactor: 2,
			RingPosition: ring.Position(id), CreatedAt: at, UpdatedAt: at},
		Replicas: []meta.Replica{{FileID: id, NodeID: "node-1", Status: meta.ReplicaActive, CreatedAt: at, UpdatedAt: at}},
	}
	report := func(status string) api.HealthReport {
		return api.HealthReport{Status: status, ReplicationFactor: 2, Nodes: api.NodeCounts{Total: 2, OnRing: 1, Healthy: 1, Unhealthy: 1},
			MetadataStore: api.ComponentState{Status: "UP", Kind: "sqlite"}, Redis: api.ComponentState{Status: "DISABLED"}}
	}
	tests := []struct {
		name, method, target string
		health               string
		status               int
	}{
		{"node list", http.MethodGet, "/api/nodes", api.HealthUp, http.StatusOK},
		{"one node", http.MethodGet, "/api/nodes/node-2", api.HealthUp, http.StatusOK},
		{"unknown node", http.MethodGet, "/api/nodes/node-9", api.HealthUp, http.StatusNotFound},
		{"ring", http.MethodGet, "/api/nodes/ring", api.HealthUp, http.StatusOK},
		{"ring points", http.MethodGet, "/api/nodes/ring?points=true", api.HealthUp, http.StatusOK},
		{"bad ring query", http.MethodGet, "/api/nodes/ring?points=yes", api.HealthUp, http.StatusBadRequest},
		{"operations", http.MethodGet, "/api/cluster/operations", api.HealthUp, http.StatusOK},
		{"draining node", http.MethodGet, "/api/nodes/node-3", api.HealthUp, http.StatusOK},
		{"metadata", http.MethodGet, "/api/files/" + id + "/metadata", api.HealthUp, http.StatusOK},
		{"unknown file", http.MethodGet, "/api/files/00000000-0000-4000-8000-000000000000/metadata", api.HealthUp, http.StatusNotFound},
		{"file list", http.MethodGet, "/api/files?page=0&size=5", api.HealthUp, http.StatusOK},
		{"bad page", http.MethodGet, "/api/files?page=x", api.HealthUp, http.StatusBadRequest},
		{"rebalance", http.MethodPost, "/api/admin/rebalance", api.HealthUp, http.StatusOK},
		{"cluster degraded", http.MethodGet, "/api/health", api.HealthDegraded, http.StatusOK},
		{"cluster down", http.MethodGet, "/api/health", api.HealthDown, http.StatusServiceUnavailable},
		{"live", http.MethodGet, "/health/live", api.HealthUp, http.StatusOK},
		{"ready", http.MethodGet, "/health/ready", api.HealthUp, http.StatusOK},
		{"not ready", http.MethodGet, "/health/ready", api.HealthDown, http.StatusServiceUnavailable},
		{"document", http.MethodGet, "/openapi.json", api.HealthUp, http.StatusOK},
		{"upload session", http.MethodGet, "/api/uploads/" + fakeSessionID, api.HealthUp, http.StatusOK},
		{"unknown upload session", http.MethodGet, "/api/uploads/00000000-0000-4000-8000-000000000000", api.HealthUp, http.StatusNotFound},
		{"upload sessions", http.MethodGet, "/api/uploads?limit=10", api.HealthUp, http.StatusOK},
		{"bad session limit", http.MethodGet, "/api/uploads?limit=x", api.HealthUp, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := api.New(api.Options{
				Files: fakeFiles{rec: rec}, Members: fakeMembers{nodes: nodes}, Rebalancer: fakeRebalancer{}, Uploads: fakeUploads{},
				Health: fakeHealth{report: report(tc.health)}, Operations: tracker,
			})
			req := httptest.NewRequest(tc.method, tc.target, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, tc.status, w.Code, "body: %s", w.Body)
			require.True(t, json.Valid(w.Body.Bytes()), "body: %s", w.Body)
			openapitest.ValidateRecorder(t, req, w)
		})
	}
}

// The liveness answer names the build, so that an operator can tell which
// version each coordinator runs from its health endpoint alone.
func TestLivenessNamesTheBuild(t *testing.T) {
	h := api.New(api.Options{Health: fakeHealth{report: api.HealthReport{Status: api.HealthUp}}})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health/live", nil))
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"status":"UP","version":"`+buildinfo.Version()+`"}`, w.Body.String())
}

// A ring position is above 2^53 for most files, where a reader whose numbers
// are doubles rounds it: the answer carries it exactly as a string too.
func TestRingPositionIsAlsoSentAsADecimalString(t *testing.T) {
	const id = "3f2b8c1e-5d4a-4b6f-9e21-0c7d8a9b1e2f"
	pos := ring.Position(id)
	require.Greater(t, pos, int64(1)<<53, "the case this test is about")
	h := api.New(api.Options{Files: fakeFiles{rec: meta.FileRecord{File: meta.File{ID: id, Status: meta.FileActive, RingPosition: pos}}}})
	for _, target := range []string{"/api/files/" + id + "/metadata", "/api/files"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		require.Equal(t, http.StatusOK, w.Code, "body: %s", w.Body)
		require.Contains(t, w.Body.String(), fmt.Sprintf(`"ringPosition":%d,"ringPositionString":"%d"`, pos, pos), target)
	}
}
