package storagenode_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/storagenode"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
)

// node is a storage node serving on a loopback port for one test.
type node struct{ *nodetest.Node }

// startNode runs a node configured from env until the test ends.
func startNode(t *testing.T, env map[string]string) *node {
	t.Helper()
	return &node{nodetest.Start(t, nodetest.Options{Env: env})}
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
	req, err := http.NewRequest(method, n.URL+path, r)
	require.NoError(t, err)
	// The node's token is sent unless the test sets Authorization itself;
	// an empty value sends no Authorization at all.
	if _, own := header["Authorization"]; !own && n.Config.ClusterToken != "" {
		req.Header.Set("Authorization", "Bearer "+n.Config.ClusterToken)
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
