// Package nodetest runs real storage nodes inside a test process: the full
// HTTP server on a loopback port, over a fresh data directory (or an
// in-memory store whose blobs a test can corrupt), stopped when the test
// ends. Tests of the node, of its client and of the coordinator use it.
package nodetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/storagenode"
)

// Options configure a test node.
type Options struct {
	// Env is the node's environment, on top of a fresh data directory,
	// SERVER_HOST=127.0.0.1 and the port of the listener.
	Env map[string]string
	// Memory serves a blob.Memory instead of a data directory.
	Memory bool
	// Addr is the address to listen on ("" = 127.0.0.1, any free port).
	// Reusing the address of a stopped node brings "the same" node back.
	Addr string
}

// Node is a running storage node.
type Node struct {
	// URL is the node's base URL, such as http://127.0.0.1:40123.
	URL string
	// Addr is the host:port it listens on.
	Addr string
	// DataDir is its data directory (unused with Options.Memory).
	DataDir string
	// Config is the configuration it runs with.
	Config storagenode.Config
	// Registry holds its metrics.
	Registry *prometheus.Registry
	// Memory is its store when Options.Memory is set.
	Memory *blob.Memory
	// DiskID is the identity of its store, which it reports at registration
	// and in its health answers. A node restarted over a wiped data
	// directory, or over a new Memory, has a new one.
	DiskID string

	logs *logBuffer
	stop func() error
}

// Start runs a node until the test ends (or Stop).
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("nodetest: listen: %v", err)
	}
	vars := map[string]string{
		"STORAGE_DATA_DIRECTORY": filepath.Join(t.TempDir(), "data"),
		"SERVER_HOST":            "127.0.0.1",
		"SERVER_PORT":            strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
	}
	for k, v := range opts.Env {
		vars[k] = v
	}
	cfg, err := storagenode.LoadConfig(envconf.FromMap(vars))
	if err != nil {
		ln.Close()
		t.Fatalf("nodetest: config: %v", err)
	}
	n := &Node{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), DataDir: cfg.DataDir, Config: cfg,
		Registry: prometheus.NewRegistry(), logs: &logBuffer{}}
	logger := slog.New(slog.NewJSONHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var srv *storagenode.Server
	if opts.Memory {
		n.Memory = blob.NewMemory(blob.Options{CapacityBytes: cfg.CapacityBytes})
		n.DataDir = ""
		srv, err = storagenode.NewWithStore(cfg, n.Memory, logger, n.Registry)
	} else {
		srv, err = storagenode.New(cfg, logger, n.Registry)
	}
	if err != nil {
		ln.Close()
		t.Fatalf("nodetest: new node: %v", err)
	}
	n.DiskID = srv.DiskID()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var result error
	n.stop = func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("nodetest: node stopped with %v", err)
		}
	})
	return n
}

// Stop shuts the node down as SIGTERM would and returns what Serve
// returned. Calling it again returns the same.
func (n *Node) Stop() error { return n.stop() }

// Logs returns the node's log records whose message is msg ("" = all), each
// decoded from JSON.
func (n *Node) Logs(msg string) []map[string]any { return n.logs.records(msg) }

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

func (l *logBuffer) records(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && (msg == "" || rec["msg"] == msg) {
			out = append(out, rec)
		}
	}
	return out
}
