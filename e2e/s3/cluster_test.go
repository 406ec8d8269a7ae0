//go:build linux

package s3e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
)

const (
	rootKey    = "DFSROOTTESTKEY"
	rootSecret = "root-secret-for-the-s3-tests"
	region     = "us-east-1"
)

// cluster is a running cluster with its S3 endpoint.
type cluster struct {
	t     *testing.T
	lc    *localcluster.Cluster
	s3URL string
	http  *http.Client
}

func startCluster(t *testing.T, extraEnv ...string) *cluster {
	t.Helper()
	ports, err := localcluster.FreePorts("127.0.0.1", 1)
	require.NoError(t, err)
	env := append([]string{
		"HEALTH_CHECK_INTERVAL=500ms", "HEALTH_PROBE_TIMEOUT=300ms", "REPAIR_INTERVAL=1s", "REPLICATION_FACTOR=2", "MAX_FILE_SIZE=16MiB",
		"LOG_FORMAT=json", "S3_PORT=" + strconv.Itoa(ports[0]), "ROOT_ACCESS_KEY=" + rootKey, "ROOT_SECRET_KEY=" + rootSecret,
	}, extraEnv...)
	ctx, cancel := context.WithCancel(context.Background())
	lc, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: binDir, DataDir: t.TempDir(), Nodes: 2, CoordinatorEnv: env,
		NodeEnv: []string{"REGISTRATION_INTERVAL=1s", "LOG_FORMAT=json"}, StopTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		cancel()
		t.Fatalf("start the cluster: %v", err)
	}
	c := &cluster{t: t, lc: lc, s3URL: "http://127.0.0.1:" + strconv.Itoa(ports[0]), http: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range append([]string{localcluster.CoordinatorName}, lc.Nodes()...) {
				if b, err := os.ReadFile(lc.LogPath(name)); err == nil {
					t.Logf("--- %s log (end) ---\n%s", name, tail(string(b), 4000))
				}
			}
		}
		_ = lc.Stop()
		cancel()
	})
	c.waitHealthy()
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// rest calls the REST API as the root key (HTTP Basic) unless noAuth.
func (c *cluster) rest(method, path string, body io.Reader, key, secret string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.lc.CoordinatorURL()+path, body)
	require.NoError(c.t, err)
	if key != "" {
		req.SetBasicAuth(key, secret)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, b
}

func (c *cluster) waitHealthy() {
	deadline := time.Now().Add(45 * time.Second)
	for {
		status, body := c.rest(http.MethodGet, "/api/health", nil, rootKey, rootSecret)
		var h struct{ Status string }
		_ = json.Unmarshal(body, &h)
		if status == http.StatusOK && h.Status == "UP" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster did not become healthy: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createKey makes a non-admin key through the REST API.
func (c *cluster) createKey(name string) (string, string) {
	c.t.Helper()
	status, body := c.rest(http.MethodPost, "/api/admin/keys", strings.NewReader(`{"name":"`+name+`"}`), rootKey, rootSecret)
	require.Equal(c.t, http.StatusCreated, status, string(body))
	var k struct{ AccessKey, SecretKey string }
	require.NoError(c.t, json.Unmarshal(body, &k))
	return k.AccessKey, k.SecretKey
}

// sdk is an aws-sdk-go-v2 S3 client for the cluster, path-style.
func (c *cluster) sdk(key, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region: region, BaseEndpoint: aws.String(c.s3URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
		HTTPClient:  c.http, RetryMaxAttempts: 1,
	})
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// served reports whether the coordinator's access log has a request of
// method for path answered with status.
func (c *cluster) served(method, path string, status int) bool {
	c.t.Helper()
	b, err := os.ReadFile(c.lc.LogPath(localcluster.CoordinatorName))
	require.NoError(c.t, err)
	for line := range strings.Lines(string(b)) {
		var rec struct {
			Msg, Method, Path string
			Status            int
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.Method == method && rec.Path == path && rec.Status == status {
			return true
		}
	}
	return false
}
