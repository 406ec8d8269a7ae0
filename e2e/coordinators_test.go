package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/haproxy"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

const (
	threeKey    = "THREEROOT"
	threeSecret = "three-root-secret"
)

// TestThreeCoordinatorsBehindHAProxy runs three coordinators over one
// PostgreSQL and one Redis, behind a real HAProxy: what is written through
// one is read through every other at once, a delete through one is a 404
// everywhere at once, a key revoked through one is refused by the others at
// once — with Redis up, and with Redis down — and a coordinator killed -9
// costs the downloads going through HAProxy nothing.
func TestThreeCoordinatorsBehindHAProxy(t *testing.T) {
	t.Parallel()
	if _, err := haproxy.Binary(); err != nil {
		t.Fatalf("%v (.ci/run installs it)", err)
	}
	rd := redistest.Start(t)
	shared := []string{"DATABASE_URL=" + pgtest.Start(t).URL(), "REDIS_URL=" + rd.URL(),
		"ROOT_ACCESS_KEY=" + threeKey, "ROOT_SECRET_KEY=" + threeSecret, "API_AUTH=open", "LEASE_TTL=3s"}
	c := startCluster(t, options{nodes: 3, coordEnv: shared})
	b := c.startExtraCoordinator("coordinator-b", shared...)
	cc := c.startExtraCoordinator("coordinator-c", shared...)
	urls := []string{c.lc.CoordinatorURL(), b.url, cc.url}
	logs := []string{c.coordLog(), b.log, cc.log}
	apis := make([]*client.Client, len(urls))
	for i, u := range urls {
		var err error
		apis[i], err = client.New(u, client.Options{HTTPClient: c.http})
		require.NoError(t, err)
	}
	admin, err := client.New(urls[0], client.Options{HTTPClient: c.http, AccessKey: threeKey, SecretKey: threeSecret})
	require.NoError(t, err)
	ctx := context.Background()
	for _, l := range logs {
		waitLogLine(t, l, "cache invalidations subscribed")
	}

	t.Run("a write through one is read through every other at once", func(t *testing.T) {
		for i := range 12 {
			data := randomBytes(2<<10 + i*997)
			res, err := apis[i%3].Upload(ctx, fmt.Sprintf("ryw-%d", i), bytes.NewReader(data), int64(len(data)), client.UploadOptions{})
			require.NoError(t, err)
			for j := 1; j < 3; j++ {
				var buf bytes.Buffer
				_, err := apis[(i+j)%3].Download(ctx, res.FileID, &buf, client.DownloadOptions{})
				require.NoError(t, err, "read through %s", urls[(i+j)%3])
				require.True(t, bytes.Equal(data, buf.Bytes()))
			}
		}
	})

	t.Run("a delete through one is a 404 through every other at once", func(t *testing.T) {
		for i := range 6 {
			data := randomBytes(4 << 10)
			res, err := apis[0].Upload(ctx, fmt.Sprintf("del-%d", i), bytes.NewReader(data), int64(len(data)), client.UploadOptions{})
			require.NoError(t, err)
			for _, a := range apis { // every coordinator has read it, and may hold it
				_, err := a.Metadata(ctx, res.FileID)
				require.NoError(t, err)
				_, err = a.Download(ctx, res.FileID, &bytes.Buffer{}, client.DownloadOptions{})
				require.NoError(t, err)
			}
			_, err = apis[i%3].Delete(ctx, res.FileID)
			require.NoError(t, err)
			for j := 1; j < 3; j++ {
				_, err := apis[(i+j)%3].Download(ctx, res.FileID, &bytes.Buffer{}, client.DownloadOptions{})
				require.Equal(t, errs.NotFound, errs.KindOf(err), "download through %s after the delete: %v", urls[(i+j)%3], err)
				_, err = apis[(i+j)%3].Metadata(ctx, res.FileID)
				require.Equal(t, errs.NotFound, errs.KindOf(err))
			}
		}
	})

	// revokeAndCheck creates a key, has every coordinator accept (and cache)
	// it, revokes it through one and requires the others to refuse it at
	// once.
	revokeAndCheck := func(t *testing.T, round int) {
		k, err := admin.CreateKey(ctx, client.NewKey{Name: "round-" + strconv.Itoa(round)})
		require.NoError(t, err)
		users := make([]*client.Client, len(urls))
		for i, u := range urls {
			users[i], err = client.New(u, client.Options{HTTPClient: c.http, AccessKey: k.AccessKey, SecretKey: k.SecretKey})
			require.NoError(t, err)
			for range 3 {
				_, err := users[i].List(ctx, 0, 1, nil)
				require.NoError(t, err, "the new key works through %s at once", u)
			}
		}
		revoker, err := client.New(urls[round%3], client.Options{HTTPClient: c.http, AccessKey: threeKey, SecretKey: threeSecret})
		require.NoError(t, err)
		require.NoError(t, revoker.DeleteKey(ctx, k.AccessKey))
		for i, u := range users {
			_, err := u.List(ctx, 0, 1, nil)
			require.Equal(t, errs.Unauthorized, errs.KindOf(err), "the key revoked through %s, used through %s: %v", urls[round%3], urls[i], err)
		}
	}

	t.Run("a key revoked through one is refused by every other at once", func(t *testing.T) {
		for round := range 6 {
			revokeAndCheck(t, round)
		}
	})

	t.Run("with Redis down, a revoked key is refused everywhere at once too", func(t *testing.T) {
		rd.Kill()
		for _, l := range logs {
			waitLogLine(t, l, "the shared caches are bypassed")
		}
		for round := range 3 {
			revokeAndCheck(t, round)
		}
		rd.Restart()
		for _, l := range logs {
			waitLogLine(t, l, "cache invalidations subscribed", 2)
		}
		revokeAndCheck(t, 0)
	})

	t.Run("behind HAProxy, a coordinator killed -9 costs downloads nothing", func(t *testing.T) {
		ports, err := localcluster.FreePorts("127.0.0.1", 1)
		require.NoError(t, err)
		front := "127.0.0.1:" + strconv.Itoa(ports[0])
		var servers []haproxy.Server
		for i, u := range urls {
			addr := strings.TrimPrefix(u, "http://")
			servers = append(servers, haproxy.Server{Name: "coordinator-" + strconv.Itoa(i+1), Addr: addr, CheckAddr: addr})
		}
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		hp, err := haproxy.Start(hctx, filepath.Join(t.TempDir(), "haproxy"), haproxy.Config{CheckInterval: 200 * time.Millisecond,
			Frontends: []haproxy.Frontend{{Name: "rest", Bind: front, Servers: servers}}})
		require.NoError(t, err)
		defer hp.Stop()
		lb, err := client.New("http://"+front, client.Options{HTTPClient: &http.Client{Timeout: callTimeout}})
		require.NoError(t, err)

		var files []stored
		for i := range 30 {
			data := randomBytes(3<<10 + i)
			res, err := lb.Upload(ctx, fmt.Sprintf("lb-%d", i), bytes.NewReader(data), int64(len(data)), client.UploadOptions{})
			require.NoError(t, err)
			files = append(files, stored{name: res.FileName, data: data, res: res})
		}
		for _, l := range logs {
			require.Contains(t, readFile(t, l), `"path":"/api/files"`, "HAProxy sends uploads to every coordinator (%s)", l)
		}
		cc.signal(t, syscall.SIGKILL)
		for round := range 3 {
			for _, f := range files {
				var buf bytes.Buffer
				_, err := lb.Download(ctx, f.res.FileID, &buf, client.DownloadOptions{})
				require.NoError(t, err, "round %d: download through HAProxy with a coordinator killed", round)
				require.True(t, bytes.Equal(f.data, buf.Bytes()))
			}
		}
	})
}

// waitLogLine waits until the log at path holds msg at least n times
// (default once).
func waitLogLine(t *testing.T, path, msg string, n ...int) {
	t.Helper()
	want := 1
	if len(n) > 0 {
		want = n[0]
	}
	eventually(t, settleTimeout, fmt.Sprintf("%q in %s", msg, filepath.Base(path)), func() (bool, string) {
		got := strings.Count(readFile(t, path), msg)
		return got >= want, strconv.Itoa(got) + " so far"
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
