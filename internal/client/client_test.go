package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/errs"
)

func TestNew(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://localhost:8080", "http://localhost:8080", true},
		{"http://localhost:8080/", "http://localhost:8080", true},
		{"localhost:8080", "http://localhost:8080", true},
		{"https://dfs.example/api-gw/", "https://dfs.example/api-gw", true},
		{"", "", false},
		{"ftp://host", "", false},
		{"http://", "", false},
		{"http://host:8080?x=1", "", false},
		{"http://bad host", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			c, err := New(tt.in, Options{})
			if !tt.ok {
				require.Error(t, err)
				require.Equal(t, errs.Invalid, errs.KindOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, c.BaseURL())
		})
	}
}

// call is one request the fake saw.
type call struct {
	method, path, query, body, auth, requestID string
}

// recorder answers every request with status and body and records it.
func recorder(t *testing.T, status int, body string) (*httptest.Server, <-chan call) {
	t.Helper()
	calls := make(chan call, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- call{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Get("Authorization"), r.Header.Get("X-Request-Id")}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, calls
}

func TestCallsUseTheRightRoute(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		call   func(context.Context, *Client) (any, error)
		want   call
		result any
	}{
		{"metadata", 200, `{"fileId":"f1","status":"DEGRADED","replicas":[{"nodeId":"node-1","status":"ACTIVE","primary":true}]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Metadata(ctx, "f1") },
			call{method: "GET", path: "/api/files/f1/metadata"},
			File{FileID: "f1", Status: FileDegraded, Replicas: []Replica{{NodeID: "node-1", Status: CopyActive, Primary: true}}}},
		{"list with statuses", 200, `{"items":[{"fileId":"f1"}],"page":2,"size":5,"total":11}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.List(ctx, 2, 5, []FileStatus{FilePending, FileDeleted})
			},
			call{method: "GET", path: "/api/files", query: "page=2&size=5&status=PENDING%2CDELETED"},
			FileList{Items: []File{{FileID: "f1"}}, Page: 2, Size: 5, Total: 11}},
		{"list with defaults", 200, `{"items":[],"page":0,"size":20,"total":0}`,
			func(ctx context.Context, c *Client) (any, error) { return c.List(ctx, 0, 0, nil) },
			call{method: "GET", path: "/api/files", query: "page=0"},
			FileList{Items: []File{}, Size: 20}},
		{"delete, complete", 204, ``,
			func(ctx context.Context, c *Client) (any, error) { return c.Delete(ctx, "f1") },
			call{method: "DELETE", path: "/api/files/f1"},
			DeleteResult{FileID: "f1", Status: FileDeleted, Complete: true}},
		{"delete, pending", 202, `{"fileId":"f1","status":"DELETED","complete":false,"pendingNodes":["node-3"],"message":"later"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Delete(ctx, "f1") },
			call{method: "DELETE", path: "/api/files/f1"},
			DeleteResult{FileID: "f1", Status: FileDeleted, PendingNodes: []string{"node-3"}, Message: "later"}},
		{"verify", 200, `{"fileId":"f1","status":"ACTIVE","healthyCopies":3,"copies":[{"nodeId":"node-2","result":"CORRUPT","rebuilt":true,"status":"ACTIVE"}]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Verify(ctx, "f1") },
			call{method: "POST", path: "/api/files/f1/verify"},
			VerifyResult{FileID: "f1", Status: FileActive, HealthyCopies: 3, Copies: []CopyCheck{{NodeID: "node-2", Result: CheckCorrupt, Rebuilt: true, Status: CopyActive}}}},
		{"nodes", 200, `[{"nodeId":"node-1","port":9001,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":32.4}]`,
			func(ctx context.Context, c *Client) (any, error) { return c.Nodes(ctx) },
			call{method: "GET", path: "/api/nodes"},
			[]Node{{NodeID: "node-1", Port: 9001, Status: NodeHealthy, OnRing: true, KeyspaceSharePercent: 32.4}}},
		{"node with an id to escape", 200, `{"nodeId":"a/b"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Node(ctx, "a/b") },
			call{method: "GET", path: "/api/nodes/a%2Fb"},
			Node{NodeID: "a/b"}},
		{"ring", 200, `{"physicalNodes":3,"virtualNodesPerNode":100,"totalRingPositions":300,"nodes":[{"nodeId":"node-3","keyspaceSharePercent":35.21}]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Ring(ctx) },
			call{method: "GET", path: "/api/nodes/ring"},
			RingInfo{PhysicalNodes: 3, VirtualNodesPerNode: 100, TotalRingPositions: 300, Nodes: []RingShare{{NodeID: "node-3", KeyspaceSharePercent: 35.21}}}},
		{"register", 200, `{"nodeId":"node-9","status":"UNHEALTHY"}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.Register(ctx, RegisterRequest{NodeID: "node-9", Host: "127.0.0.1", Port: 9009})
			},
			call{method: "POST", path: "/api/nodes/register", body: `{"nodeId":"node-9","host":"127.0.0.1","port":9009}`},
			Node{NodeID: "node-9", Status: NodeUnhealthy}},
		{"deregister and wait", 200, `{"node":{"nodeId":"node-2","status":"DEREGISTERED"},"drain":{"node":"node-2","complete":true,"run":{"trigger":"DEREGISTERED","copiesCreated":4}}}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Deregister(ctx, "node-2", true) },
			call{method: "DELETE", path: "/api/nodes/node-2", query: "wait=true"},
			DeregisterResult{Node: Node{NodeID: "node-2", Status: NodeDeregistered},
				Drain: DrainReport{Node: "node-2", Complete: true, Run: &RebalanceReport{Trigger: TriggerDeregistered, CopiesCreated: 4}}}},
		{"deregister", 202, `{"node":{"nodeId":"node-2"},"drain":{"node":"node-2","filesRemaining":7}}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Deregister(ctx, "node-2", false) },
			call{method: "DELETE", path: "/api/nodes/node-2"},
			DeregisterResult{Node: Node{NodeID: "node-2"}, Drain: DrainReport{Node: "node-2", FilesRemaining: 7}}},
		{"forced drain", 202, `{"node":{"nodeId":"node-2"},"drain":{"node":"node-2","filesRemaining":7}}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.DeregisterWith(ctx, "node-2", DrainOptions{Wait: true, Force: true})
			},
			call{method: "DELETE", path: "/api/nodes/node-2", query: "force=true&wait=true"},
			DeregisterResult{Node: Node{NodeID: "node-2"}, Drain: DrainReport{Node: "node-2", FilesRemaining: 7}}},
		{"drain plan", 200, `{"node":"node-2","safe":false,"reasons":["r"],"files":1,"bytes":5,"targets":[{"nodeId":"node-3","files":1,"bytes":5,"freeBytes":null}],"soleCopies":[]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.PlanDrain(ctx, "node-2") },
			call{method: "DELETE", path: "/api/nodes/node-2", query: "dryRun=true"},
			DrainPlan{Node: "node-2", Reasons: []string{"r"}, Files: 1, Bytes: 5,
				Targets: []DrainTarget{{NodeID: "node-3", Files: 1, Bytes: 5}}, SoleCopies: []string{}}},
		{"rejoin", 200, `{"nodeId":"node-2","status":"UNHEALTHY"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Rejoin(ctx, "node-2") },
			call{method: "POST", path: "/api/nodes/node-2/rejoin"},
			Node{NodeID: "node-2", Status: NodeUnhealthy}},
		{"placement", 200, `{"nodeId":"node-2","zone":"rack-2","weight":2,"points":200,"reportedWeight":1,"overridden":["zone","weight"]}`,
			func(ctx context.Context, c *Client) (any, error) {
				zone, weight := "rack-2", 2.0
				return c.SetPlacement(ctx, "node-2", PlacementRequest{Zone: &zone, Weight: &weight})
			},
			call{method: "PUT", path: "/api/nodes/node-2/placement", body: `{"zone":"rack-2","weight":2}`},
			Node{NodeID: "node-2", Zone: "rack-2", Weight: 2, Points: 200, ReportedWeight: 1, Overridden: []string{"zone", "weight"}}},
		{"placement: no zone, weight reset", 200, `{"nodeId":"node-2","weight":1,"points":100,"reportedWeight":1,"overridden":["zone"]}`,
			func(ctx context.Context, c *Client) (any, error) {
				none := ""
				return c.SetPlacement(ctx, "node-2", PlacementRequest{Zone: &none, Reset: []string{"weight"}})
			},
			call{method: "PUT", path: "/api/nodes/node-2/placement", body: `{"zone":"","reset":["weight"]}`},
			Node{NodeID: "node-2", Weight: 1, Points: 100, ReportedWeight: 1, Overridden: []string{"zone"}}},
		{"ring with zones", 200, `{"physicalNodes":2,"virtualNodesPerNode":100,"totalRingPositions":300,"nodes":[{"nodeId":"node-2","keyspaceSharePercent":66.5,"zone":"a","weight":2,"points":200},{"nodeId":"node-1","keyspaceSharePercent":33.5,"weight":1,"points":100}],"zones":[{"zone":"a","keyspaceSharePercent":66.5,"nodes":1}]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Ring(ctx) },
			call{method: "GET", path: "/api/nodes/ring"},
			RingInfo{PhysicalNodes: 2, VirtualNodesPerNode: 100, TotalRingPositions: 300,
				Nodes: []RingShare{{NodeID: "node-2", KeyspaceSharePercent: 66.5, Zone: "a", Weight: 2, Points: 200},
					{NodeID: "node-1", KeyspaceSharePercent: 33.5, Weight: 1, Points: 100}},
				Zones: []ZoneShare{{Zone: "a", KeyspaceSharePercent: 66.5, Nodes: 1}}}},
		{"health", 200, `{"status":"DEGRADED","reasons":["1 node(s) unhealthy"],"replicationFactor":3,"nodes":{"total":3,"onRing":2},"metadataStore":{"status":"UP","kind":"sqlite"},"redis":{"status":"DISABLED"}}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Health(ctx) },
			call{method: "GET", path: "/api/health"},
			HealthReport{Status: HealthDegraded, Reasons: []string{"1 node(s) unhealthy"}, ReplicationFactor: 3, Nodes: NodeCounts{Total: 3, OnRing: 2},
				MetadataStore: ComponentState{Status: "UP", Kind: "sqlite"}, Redis: ComponentState{Status: "DISABLED"}}},
		{"health, down is a report", 503, `{"status":"DOWN","reasons":["no node on the ring"]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Health(ctx) },
			call{method: "GET", path: "/api/health"},
			HealthReport{Status: HealthDown, Reasons: []string{"no node on the ring"}}},
		{"rebalance", 200, `{"trigger":"MANUAL","filesScanned":12,"unrecoverableFiles":[],"durationMs":225}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Rebalance(ctx) },
			call{method: "POST", path: "/api/admin/rebalance"},
			RebalanceReport{Trigger: TriggerManual, FilesScanned: 12, UnrecoverableFiles: []string{}, DurationMs: 225}},
		{"health check", 200, `{"nodes":[{"nodeId":"node-1","status":"UNHEALTHY","error":"connection refused"}]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.HealthCheck(ctx) },
			call{method: "POST", path: "/api/admin/health-check"},
			HealthCheckResult{Nodes: []NodeHealth{{NodeID: "node-1", Status: NodeUnhealthy, Error: "connection refused"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, calls := recorder(t, tt.status, tt.body)
			c, err := New(srv.URL, Options{Token: "s3cret"})
			require.NoError(t, err)
			got, err := tt.call(WithRequestID(t.Context(), "req-1"), c)
			require.NoError(t, err)
			require.Equal(t, tt.result, got)
			seen := <-calls
			tt.want.auth, tt.want.requestID = "Bearer s3cret", "req-1"
			require.Equal(t, tt.want, seen)
		})
	}
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		kind   errs.Kind
		want   APIError
	}{
		{"error shape", 404, `{"timestamp":"2026-11-29T10:15:31Z","status":404,"error":"FILE_NOT_FOUND","message":"file f1 not found","path":"/api/files/f1/metadata"}`,
			errs.NotFound, APIError{Status: 404, Code: errs.CodeFileNotFound, Message: "file f1 not found", Path: "/api/files/f1/metadata"}},
		{"conflict", 409, `{"status":409,"error":"CONFLICT","message":"still pending","path":"/x"}`,
			errs.Conflict, APIError{Status: 409, Code: errs.CodeConflict, Message: "still pending", Path: "/x"}},
		{"metadata store down", 503, `{"status":503,"error":"METADATA_UNAVAILABLE","message":"db down","path":"/x"}`,
			errs.Unavailable, APIError{Status: 503, Code: errs.CodeMetadataUnavailable, Message: "db down", Path: "/x"}},
		{"forbidden", 403, `{"status":403,"error":"FORBIDDEN","message":"no","path":"/x"}`,
			errs.Forbidden, APIError{Status: 403, Code: "FORBIDDEN", Message: "no", Path: "/x"}},
		{"not the error shape", 502, "<html>Bad Gateway</html>\nmore",
			errs.Other, APIError{Status: 502, Message: "<html>Bad Gateway</html>", Path: "/api/files/f1/metadata"}},
		{"empty body", 500, "",
			errs.Other, APIError{Status: 500, Path: "/api/files/f1/metadata"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := recorder(t, tt.status, tt.body)
			_, err := newClient(t, srv.URL).Metadata(t.Context(), "f1")
			var apiErr *APIError
			require.ErrorAs(t, err, &apiErr)
			apiErr.Timestamp = apiErr.Timestamp.UTC()
			tt.want.Timestamp = apiErr.Timestamp // checked by the decoding, not here
			require.Equal(t, tt.want, *apiErr)
			require.Equal(t, tt.kind, errs.KindOf(err))
			require.Contains(t, err.Error(), tt.want.Code)
		})
	}
}

func TestHealthErrorShapeOn503IsAnError(t *testing.T) {
	srv, _ := recorder(t, 503, `{"status":503,"error":"METADATA_UNAVAILABLE","message":"db down","path":"/api/health"}`)
	_, err := newClient(t, srv.URL).Health(t.Context())
	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, errs.CodeMetadataUnavailable, apiErr.Code)
}

func TestUnreachableCoordinator(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	c := newClient(t, "http://"+addr)
	_, err = c.Nodes(t.Context())
	var ce *ConnError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "http://"+addr, ce.URL)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.Contains(t, err.Error(), "cannot reach the coordinator at http://"+addr)
}

func TestCancelledContextIsNotAnUnreachableCoordinator(t *testing.T) {
	srv, _ := recorder(t, 200, `[]`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := newClient(t, srv.URL).Nodes(ctx)
	require.ErrorIs(t, err, context.Canceled)
	var ce *ConnError
	require.False(t, errors.As(err, &ce))
}

func TestEmptyIDIsRefusedLocally(t *testing.T) {
	srv, calls := recorder(t, 200, `{}`)
	c := newClient(t, srv.URL)
	_, err := c.Metadata(t.Context(), "")
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	_, err = c.Deregister(t.Context(), "", true)
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.Empty(t, calls, "nothing was sent")
}

// TestResultsRoundTrip checks that re-encoding a decoded answer gives the
// same JSON, which the CLI's --json output relies on.
func TestResultsRoundTrip(t *testing.T) {
	raw := `{"fileId":"f1","fileName":"a","contentType":"text/plain","sizeBytes":5,"checksum":"c","status":"DEGRADED","reason":"r","primaryNode":"node-1","replicationFactor":3,"ringPosition":8430220832983623584,"ringPositionString":"8430220832983623584","createdAt":"2026-11-29T10:15:31.412Z","updatedAt":"2026-11-29T10:15:32Z","replicas":[{"nodeId":"node-1","status":"ACTIVE","primary":true,"createdAt":"2026-11-29T10:15:31Z","updatedAt":"2026-11-29T10:15:31Z"}]}`
	var f File
	require.NoError(t, json.Unmarshal([]byte(raw), &f))
	out, err := json.Marshal(f)
	require.NoError(t, err)
	require.JSONEq(t, raw, string(out))
}

// TestConcurrentCallsReuseConnections: the default transport keeps enough
// idle connections that goroutines sharing a client do not open a new one
// per request (the standard library keeps only two per host).
func TestConcurrentCallsReuseConnections(t *testing.T) {
	const workers, calls = 16, 200
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `[]`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				_, err := c.Nodes(t.Context())
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	// A request may dial while another connection is being returned, so a
	// few more than one per caller can open; without reuse it is hundreds.
	require.LessOrEqual(t, opened.Load(), int64(4*workers),
		"connections opened for %d requests from %d goroutines", workers*calls, workers)
}

func TestUserAgent(t *testing.T) {
	agents := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agents <- r.UserAgent()
		io.WriteString(w, `[]`)
	}))
	t.Cleanup(srv.Close)
	tests := []struct{ given, want string }{
		{"", "dfs-client/" + buildinfo.Version()},
		{"dfs-cli/v9", "dfs-cli/v9"},
	}
	for _, tt := range tests {
		c, err := New(srv.URL, Options{UserAgent: tt.given})
		require.NoError(t, err)
		_, err = c.Nodes(t.Context())
		require.NoError(t, err)
		require.Equal(t, tt.want, <-agents)
	}
}

// A placement the coordinator would refuse is refused here, naming what is
// wrong, and nothing is sent.
func TestSetPlacementRefusesBadRequests(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{})
	require.NoError(t, err)
	str := func(s string) *string { return &s }
	num := func(f float64) *float64 { return &f }
	tests := []struct {
		name string
		id   string
		req  PlacementRequest
		want string
	}{
		{"no node", "", PlacementRequest{Weight: num(2)}, "a node id is required"},
		{"nothing", "node-1", PlacementRequest{}, "nothing to change"},
		{"weight zero", "node-1", PlacementRequest{Weight: num(0)}, "weight 0: must be a decimal > 0 and at most 1000"},
		{"weight negative", "node-1", PlacementRequest{Weight: num(-1)}, "weight -1: must be a decimal > 0"},
		{"weight too large", "node-1", PlacementRequest{Weight: num(1000.5)}, "weight 1000.5: must be a decimal > 0 and at most 1000"},
		{"zone with a space", "node-1", PlacementRequest{Zone: str("rack 2")}, `zone "rack 2": no spaces or control characters`},
		{"zone too long", "node-1", PlacementRequest{Zone: str(strings.Repeat("z", 256))}, "longer than 255 bytes"},
		{"unknown reset", "node-1", PlacementRequest{Reset: []string{"rack"}}, `reset "rack": want zone or weight`},
		{"reset twice", "node-1", PlacementRequest{Reset: []string{"zone", "zone"}}, "reset zone given twice"},
		{"set and reset", "node-1", PlacementRequest{Weight: num(2), Reset: []string{"weight"}}, "weight both set and reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.SetPlacement(t.Context(), tt.id, tt.req)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, errs.Invalid, errs.KindOf(err))
		})
	}
	require.Zero(t, requests.Load(), "a refused placement was sent")
	require.NoError(t, CheckPlacement(PlacementRequest{Weight: num(1000)}), "the largest weight")
	require.NoError(t, CheckPlacement(PlacementRequest{Zone: str("")}), "an override to no zone")
}
