package coordinator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime/multipart"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/testenv"
)

// harness runs a real coordinator (in this process, on a loopback port) over
// a real metadata store, with real storage-node servers that a test can stop,
// restart and corrupt.
type harness struct {
	t       *testing.T
	env     map[string]string
	app     *App
	url     string
	stop    func()
	nodes   map[string]*nodetest.Node
	addrs   map[string]string
	dirs    map[string]string
	nodeEnv map[string]string
	logs    *testenv.SyncBuffer
}

// storeKinds are the metadata stores every integration test runs against.
var storeKinds = []string{"sqlite", "postgres"}

// forEachStore runs fn once per metadata store.
func forEachStore(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) { fn(t, kind) })
	}
}

// newHarness starts a coordinator with env on top of test defaults (the
// detector and repair loop only run when a test asks) and n storage nodes,
// registered and admitted to the ring.
func newHarness(t *testing.T, kind string, n int, env map[string]string) *harness {
	t.Helper()
	base := map[string]string{
		"DATA_DIRECTORY":        t.TempDir(),
		"HEALTH_CHECK_INTERVAL": "1h",
		"REPAIR_INTERVAL":       "1h",
		"LEASE_TTL":             "1s",
		"LOG_LEVEL":             "debug",
	}
	if kind == "postgres" {
		base["DATABASE_URL"] = testenv.NewPostgresDB(t)
	}
	maps.Copy(base, env)
	h := &harness{t: t, env: base, nodes: map[string]*nodetest.Node{}, addrs: map[string]string{},
		dirs: map[string]string{}, logs: &testenv.SyncBuffer{},
		// The tests here find and damage copies by their paths in the files
		// layout (blobPath); e2e runs the faults in both layouts.
		nodeEnv: map[string]string{"STORAGE_LAYOUT": "files"}}
	if tok := base["CLUSTER_TOKEN"]; tok != "" {
		h.nodeEnv["CLUSTER_TOKEN"] = tok
	}
	h.startCoordinator()
	for i := 1; i <= n; i++ {
		h.addNode(fmt.Sprintf("node-%d", i))
	}
	if n > 0 {
		h.admit()
	}
	// Cleanups run last-in first-out: stop the coordinator before the nodes,
	// so no connection of its own keeps a node's shutdown waiting.
	h.t.Cleanup(func() { h.stop() })
	return h
}

func (h *harness) startCoordinator() {
	h.t.Helper()
	cfg, err := LoadConfig(envconf.FromMap(h.env))
	require.NoError(h.t, err)
	log := slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	app, err := New(ctx, cfg, log, prometheus.NewRegistry())
	require.NoError(h.t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(h.t, err)
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln) }()
	h.app, h.url = app, "http://"+ln.Addr().String()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(h.t, <-done)
		})
	}
	h.t.Cleanup(h.stop)
}

// restartCoordinator stops the coordinator and starts a new one on the same
// data directory and database, as a process restart would.
func (h *harness) restartCoordinator() {
	h.t.Helper()
	h.stop()
	h.startCoordinator()
}

func (h *harness) store() meta.Store { return h.app.store }

// repairPass runs one repair pass to its end. The coordinator's own loop
// makes a pass at start and holds the "repair" lease while it runs; a pass
// asked for meanwhile is skipped, so it is asked again until it runs.
func (h *harness) repairPass(ctx context.Context) error {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := h.app.repair.pass(ctx)
		if err != nil || !rep.Skipped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("every repair pass for 30s was skipped: the repair lease stayed held")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addNode starts a storage node and registers it (it joins the ring after
// the success threshold of probes; see admit).
func (h *harness) addNode(id string) *nodetest.Node {
	h.t.Helper()
	env := map[string]string{"STORAGE_NODE_ID": id}
	maps.Copy(env, h.nodeEnv)
	if dir, ok := h.dirs[id]; ok {
		env["STORAGE_DATA_DIRECTORY"] = dir
	}
	n := nodetest.Start(h.t, nodetest.Options{Env: env, Addr: h.addrs[id]})
	h.nodes[id], h.addrs[id], h.dirs[id] = n, n.Addr, n.DataDir
	h.register(id)
	return n
}

// register announces a running node to the coordinator, as its
// registration loop would.
func (h *harness) register(id string) {
	h.t.Helper()
	host, port, _ := net.SplitHostPort(h.addrs[id])
	p, _ := strconv.Atoi(port)
	body, _ := json.Marshal(map[string]any{"nodeId": id, "host": host, "port": p})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/api/nodes/register", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok := h.env["CLUSTER_TOKEN"]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp := h.do(req)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
}

// stopNode stops a node's server: connections to it are refused from now on.
func (h *harness) stopNode(id string) {
	h.t.Helper()
	require.NoError(h.t, h.nodes[id].Stop())
}

// restartNode brings a stopped node back on its address with its data.
func (h *harness) restartNode(id string) {
	h.t.Helper()
	env := map[string]string{"STORAGE_NODE_ID": id, "STORAGE_DATA_DIRECTORY": h.dirs[id]}
	maps.Copy(env, h.nodeEnv)
	h.nodes[id] = nodetest.Start(h.t, nodetest.Options{Env: env, Addr: h.addrs[id]})
}

// sweep runs n health-check sweeps through the admin endpoint.
func (h *harness) sweep(n int) {
	h.t.Helper()
	for range n {
		resp := h.post("/api/admin/health-check", nil)
		require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
	}
}

// admit sweeps until every registered node has passed the success threshold.
func (h *harness) admit() {
	h.t.Helper()
	h.sweep(h.app.cfg.HealthSuccessThreshold)
}

// settle waits for the background rebalances that membership events started.
func (h *harness) settle() {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.app.idle() }, 30*time.Second, 10*time.Millisecond)
}

type response struct {
	*http.Response
	body []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), string(r.body))
}

func (r response) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Status int    `json:"status"`
		Error  string `json:"error"`
		Path   string `json:"path"`
	}
	r.json(t, &e)
	require.Equal(t, r.StatusCode, e.Status)
	require.NotEmpty(t, e.Path)
	return e.Error
}

func (h *harness) do(req *http.Request) response {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	// Every answer of every integration test must match the OpenAPI document.
	openapitest.ValidateResponse(h.t, req, resp, b)
	return response{resp, b}
}

func (h *harness) get(path string, hdr ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.url+path, nil)
	require.NoError(h.t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return h.do(req)
}

func (h *harness) post(path string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, bytes.NewReader(body))
	require.NoError(h.t, err)
	return h.do(req)
}

func (h *harness) delete(path string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodDelete, h.url+path, nil)
	require.NoError(h.t, err)
	return h.do(req)
}

// uploadResult mirrors the API's upload answer.
type uploadResult struct {
	FileID            string   `json:"fileId"`
	FileName          string   `json:"fileName"`
	ContentType       string   `json:"contentType"`
	SizeBytes         int64    `json:"sizeBytes"`
	Checksum          string   `json:"checksum"`
	Status            string   `json:"status"`
	PrimaryNode       string   `json:"primaryNode"`
	Replicas          []string `json:"replicas"`
	ReplicationFactor int      `json:"replicationFactor"`
	Reason            string   `json:"reason"`
}

type metadataResult struct {
	uploadResult
	Replicas []struct {
		NodeID  string `json:"nodeId"`
		Status  string `json:"status"`
		Primary bool   `json:"primary"`
	} `json:"replicas"`
}

func multipartBody(t *testing.T, field, name string, data []byte) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile(field, name)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	return &buf, mw.FormDataContentType()
}

func (h *harness) uploadRaw(name string, data []byte, hdr ...string) response {
	h.t.Helper()
	body, ct := multipartBody(h.t, "file", name, data)
	req, err := http.NewRequest(http.MethodPost, h.url+"/api/files", body)
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", ct)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return h.do(req)
}

func (h *harness) upload(name string, data []byte) uploadResult {
	h.t.Helper()
	resp := h.uploadRaw(name, data)
	require.Equal(h.t, http.StatusCreated, resp.StatusCode, string(resp.body))
	var res uploadResult
	resp.json(h.t, &res)
	return res
}

func (h *harness) metadata(id string) metadataResult {
	h.t.Helper()
	resp := h.get("/api/files/" + id + "/metadata")
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
	var m metadataResult
	resp.json(h.t, &m)
	return m
}

// copies lists the nodes holding an ACTIVE copy, by the metadata.
func (m metadataResult) copies(status string) []string {
	var out []string
	for _, r := range m.Replicas {
		if r.Status == status {
			out = append(out, r.NodeID)
		}
	}
	return out
}

// blobPath is where node id keeps file fid's bytes (the node's sharding).
func (h *harness) blobPath(id, fid string) string {
	return filepath.Join(h.dirs[id], fid[0:2], fid[2:4], fid)
}

// holds reports whether node id has the file's blob on disk (in either
// layout).
func (h *harness) holds(id, fid string) bool {
	return blobfault.Holds(h.t, h.dirs[id], fid)
}

// holders lists the nodes with the file's blob on disk.
func (h *harness) holders(fid string) []string {
	var out []string
	for _, id := range h.sortedNodes() {
		if h.holds(id, fid) {
			out = append(out, id)
		}
	}
	return out
}

func (h *harness) sortedNodes() []string {
	var ids []string
	for id := range h.dirs {
		ids = append(ids, id)
	}
	return sortStrings(ids)
}

// corrupt flips one byte of node id's copy of the file on disk (in either
// layout).
func (h *harness) corrupt(id, fid string) {
	h.t.Helper()
	blobfault.FlipByte(h.t, h.dirs[id], fid)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

func hasLog(h *harness, substr string) bool { return strings.Contains(h.logs.String(), substr) }
