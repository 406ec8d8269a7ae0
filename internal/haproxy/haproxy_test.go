package haproxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRenderNamesEveryServerAndItsProbe(t *testing.T) {
	got := Render(Config{Frontends: []Frontend{
		{Name: "rest", Bind: "127.0.0.1:8080", Servers: []Server{
			{Name: "coordinator-1", Addr: "127.0.0.1:18081", CheckAddr: "127.0.0.1:18081"},
			{Name: "coordinator-2", Addr: "127.0.0.1:18082", CheckAddr: "127.0.0.1:18082"}}},
		{Name: "s3", Bind: "127.0.0.1:9000", Servers: []Server{
			{Name: "coordinator-1", Addr: "127.0.0.1:19001", CheckAddr: "127.0.0.1:18081"}}},
	}})
	for _, want := range []string{
		"frontend rest\n\tbind 127.0.0.1:8080\n\tdefault_backend rest_coordinators",
		"option httpchk GET /health/ready",
		"server coordinator-2 127.0.0.1:18082 check addr 127.0.0.1 port 18082",
		"server coordinator-1 127.0.0.1:19001 check addr 127.0.0.1 port 18081",
		"retry-on conn-failure empty-response",
		"default-server inter 1000ms fall 2 rise 2",
	} {
		require.Contains(t, got, want)
	}
}

// TestRequestsSpreadAndSurviveAServerGone runs the real haproxy over two
// servers: requests reach both, and once one is gone every request is still
// answered, by the other.
func TestRequestsSpreadAndSurviveAServerGone(t *testing.T) {
	if _, err := Binary(); err != nil {
		t.Fatalf("%v (.ci/run installs it)", err)
	}
	serve := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name)
		}))
	}
	a, b := serve("a"), serve("b")
	defer a.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	front := ln.Addr().String()
	require.NoError(t, ln.Close())
	addr := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Start(ctx, t.TempDir(), Config{CheckInterval: 100 * time.Millisecond, Frontends: []Frontend{{Name: "rest", Bind: front,
		Servers: []Server{{Name: "a", Addr: addr(a), CheckAddr: addr(a)}, {Name: "b", Addr: addr(b), CheckAddr: addr(b)}}}}})
	require.NoError(t, err)
	defer p.Stop()

	get := func() (string, error) {
		resp, err := http.Get("http://" + front + "/x")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", &statusError{resp.StatusCode}
		}
		return string(body), err
	}
	seen := map[string]int{}
	require.Eventually(t, func() bool {
		got, err := get()
		if err == nil {
			seen[got]++
		}
		return seen["a"] > 0 && seen["b"] > 0
	}, 10*time.Second, 20*time.Millisecond, "both servers get requests: %v", seen)

	b.Close()
	for range 50 {
		got, err := get()
		require.NoError(t, err, "a server gone: the request is retried on the other")
		require.Equal(t, "a", got)
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return http.StatusText(e.code) }

// exampleConfig is deploy/haproxy/haproxy.cfg's input: three coordinators
// by host name, REST on 8080 and S3 on 9000 each.
func exampleConfig() Config {
	var rest, s3 []Server
	for _, n := range []string{"coordinator-1", "coordinator-2", "coordinator-3"} {
		rest = append(rest, Server{Name: n, Addr: n + ":8080", CheckAddr: n + ":8080"})
		s3 = append(s3, Server{Name: n, Addr: n + ":9000", CheckAddr: n + ":8080"})
	}
	return Config{Frontends: []Frontend{{Name: "rest", Bind: "*:8080", Servers: rest}, {Name: "s3", Bind: "*:9000", Servers: s3}}}
}

// TestTheExampleConfigIsWhatRenderWrites keeps the deploy example in step
// with the code (DFS_WRITE_EXAMPLE=1 rewrites it), and has haproxy accept it.
func TestTheExampleConfigIsWhatRenderWrites(t *testing.T) {
	const path = "../../deploy/haproxy/haproxy.cfg"
	want := Render(exampleConfig())
	if os.Getenv("DFS_WRITE_EXAMPLE") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "run DFS_WRITE_EXAMPLE=1 go test ./internal/haproxy to rewrite it")

	bin, err := Binary()
	require.NoError(t, err, "(.ci/run installs haproxy)")
	// The example's host names resolve only where the coordinators run; the
	// same configuration on loopback addresses must pass haproxy's check.
	local := strings.NewReplacer("coordinator-1:", "127.0.0.1:", "coordinator-2:", "127.0.0.2:", "coordinator-3:", "127.0.0.3:",
		"addr coordinator-1", "addr 127.0.0.1", "addr coordinator-2", "addr 127.0.0.2", "addr coordinator-3", "addr 127.0.0.3").Replace(want)
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfg, []byte(local), 0o644))
	out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NotContains(t, string(out), "WARNING")
}
