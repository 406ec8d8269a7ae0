package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/testenv"
)

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRootKeyS3PortAndAPIAuth shows the effect of ROOT_ACCESS_KEY and
// ROOT_SECRET_KEY (the REST API wants a key), API_AUTH=open (it does not)
// and S3_PORT (a second listener, answering S3 XML; unset, none).
func TestRootKeyS3PortAndAPIAuth(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		rest, s3 int // statuses of an anonymous GET /api/files and GET / on S3_PORT (0: nothing listens)
		// warns: the start-up warns that node calls go unauthenticated
		// (a root key without CLUSTER_TOKEN).
		warns bool
	}{
		{"no root key", map[string]string{}, http.StatusOK, 0, false},
		{"a root key", map[string]string{"ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "admin-secret"}, http.StatusUnauthorized, 0, true},
		{"a root key and CLUSTER_TOKEN", map[string]string{"ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "admin-secret", "CLUSTER_TOKEN": "t0ken"},
			http.StatusUnauthorized, 0, false},
		{"a root key, API_AUTH=open", map[string]string{"ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "admin-secret", "API_AUTH": "open"},
			http.StatusOK, 0, true},
		{"S3_PORT", map[string]string{"ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "admin-secret", "S3_PORT": "s3"},
			http.StatusUnauthorized, http.StatusForbidden, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, s3Port := freePort(t), freePort(t)
			env := map[string]string{"SERVER_HOST": "127.0.0.1", "SERVER_PORT": fmt.Sprint(port), "DATA_DIRECTORY": t.TempDir()}
			for k, v := range tc.env {
				env[k] = v
			}
			if env["S3_PORT"] == "s3" {
				env["S3_PORT"] = fmt.Sprint(s3Port)
			}
			cfg, err := LoadConfig(envconf.FromMap(env))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			var logged testenv.SyncBuffer
			app, err := New(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), prometheus.NewRegistry())
			require.NoError(t, err)
			require.Equal(t, tc.warns, strings.Contains(logged.String(), "CLUSTER_TOKEN is not"), "the start-up's warning:\n%s", logged.String())
			done := make(chan error, 1)
			go func() { done <- app.Run(ctx) }()
			defer func() {
				cancel()
				require.NoError(t, <-done)
			}()
			get := func(url string) int {
				resp, err := http.Get(url)
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			require.Eventually(t, func() bool { return get(fmt.Sprintf("http://127.0.0.1:%d/health/ready", port)) == http.StatusOK },
				5*time.Second, 10*time.Millisecond, "/health/* needs no key")
			require.Equal(t, tc.rest, get(fmt.Sprintf("http://127.0.0.1:%d/api/files", port)))
			require.Equal(t, http.StatusUnauthorized, get(fmt.Sprintf("http://bad:bad@127.0.0.1:%d/api/files", port)),
				"a wrong key is refused whether or not one is needed")
			s3URL := fmt.Sprintf("http://127.0.0.1:%d/", s3Port)
			if tc.s3 != 0 {
				// The S3 listener opens just after the REST one.
				require.Eventually(t, func() bool { return get(s3URL) != 0 }, 5*time.Second, 10*time.Millisecond)
			}
			require.Equal(t, tc.s3, get(s3URL), "an anonymous S3 request")
		})
	}
}
