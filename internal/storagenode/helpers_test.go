package storagenode_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/storagenode"
)

// logBuffer collects JSON log records written concurrently.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records returns every record so far whose msg is msg ("" = all).
func (l *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		if msg == "" || rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// node is a storage node serving on a loopback port for one test.
type node struct {
	base     string
	dataDir  string
	cfg      storagenode.Config
	registry *prometheus.Registry
	logs     *logBuffer
	stop     func() error // cancels Serve and returns its result
}

// startNode runs a node configured from env (plus a fresh data directory
// and a loopback listener) until the test ends.
func startNode(t *testing.T, env map[string]string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	vars := map[string]string{
		"STORAGE_DATA_DIRECTORY": t.TempDir() + "/data",
		"SERVER_HOST":            "127.0.0.1",
		"SERVER_PORT":            strconv.Itoa(port),
	}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := storagenode.LoadConfig(envconf.FromMap(vars))
	require.NoError(t, err)
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := prometheus.NewRegistry()
	srv, err := storagenode.New(cfg, logger, reg)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { require.NoError(t, stop()) })
	return &node{base: "http://" + ln.Addr().String(), dataDir: cfg.DataDir, cfg: cfg, registry: reg, logs: logs, stop: stop}
}

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// request sends one request and returns the answer with its body read.
func (n *node) request(t *testing.T, method, path string, body []byte, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, n.base+path, r)
	require.NoError(t, err)
	// The node's token is sent unless the test sets Authorization itself;
	// an empty value sends no Authorization at all.
	if _, own := header["Authorization"]; !own && n.cfg.ClusterToken != "" {
		req.Header.Set("Authorization", "Bearer "+n.cfg.ClusterToken)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// put writes data as id with its correct checksum.
func (n *node) put(t *testing.T, id string, data []byte) (*http.Response, []byte) {
	t.Helper()
	return n.request(t, http.MethodPut, "/internal/blobs/"+id, data, map[string]string{"X-Checksum-Sha256": checksum(data)})
}

// requireError checks an answer is an error in the common shape.
func requireError(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	require.Equal(t, status, resp.StatusCode, "body: %s", body)
	if resp.Request.Method == http.MethodHead {
		return
	}
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var eb httpx.ErrorBody
	require.NoError(t, json.Unmarshal(body, &eb), "body: %s", body)
	require.Equal(t, status, eb.Status)
	require.Equal(t, code, eb.Error)
	require.NotEmpty(t, eb.Message)
	require.True(t, strings.HasPrefix(eb.Path, "/"), "path %q", eb.Path)
	require.False(t, eb.Timestamp.IsZero())
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(body, &v), "body: %s", body)
	return v
}

// newServer builds a node that logs nowhere.
func newServer(t *testing.T, cfg storagenode.Config) (*storagenode.Server, error) {
	t.Helper()
	return storagenode.New(cfg, slog.New(slog.DiscardHandler), nil)
}
