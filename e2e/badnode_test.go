//go:build linux

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// garbageNode passes every health probe and answers every blob call with
// nonsense: a body that is not JSON, a blob without its checksum or size,
// a 200 for a write it never made.
func garbageNode(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	up := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"UP"}`)
	}
	mux.HandleFunc("GET "+wire.PathLive, up)
	mux.HandleFunc("GET "+wire.PathReady, up)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, "<html>stored, trust me</html>")
		case http.MethodPost: // a batch of small copies: "written", under another id
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"results":[{"id":"not-yours","status":201,"size":1}]}`)
		case http.MethodHead:
			w.Header().Set(wire.HeaderBlobSize, "many")
		case http.MethodDelete:
			w.WriteHeader(http.StatusTeapot)
		default:
			w.Header().Set(wire.HeaderChecksum, "not-a-checksum")
			w.Header().Set(wire.HeaderBlobSize, "-7")
			_, _ = w.Write(randomBytes(333))
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestGarbageAnsweringNodeIsRoutedAround(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3})
	real := []string{"node-1", "node-2", "node-3"}
	// Files stored before the bad node joins must stay whole too.
	warm := c.uploadRandom(6, 16<<10)
	for _, f := range warm {
		c.mustRead(f)
	}
	ctx, cancel := callCtx()
	defer cancel()
	_, err := c.api.Rebalance(ctx)
	require.NoError(t, err)

	srv := garbageNode(t)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	const bad = "garbage-1"
	_, err = c.api.Register(ctx, client.RegisterRequest{NodeID: bad, Host: host, Port: p})
	require.NoError(t, err)
	c.waitOnRing(bad)

	rg := ringOf(append(real, bad)...)
	var files []stored
	routedAround := 0
	for i := range 24 {
		f := c.mustUpload(fmt.Sprintf("g-%02d.bin", i), randomBytes(16<<10))
		require.Equal(t, client.FileActive, f.res.Status, "%s", f.res.Reason)
		require.ElementsMatch(t, real, append([]string{f.res.PrimaryNode}, f.res.Replicas...))
		if slices.Contains(rg.Preference(f.res.FileID, 3), bad) {
			routedAround++
		}
		files = append(files, f)
	}
	require.NotZero(t, routedAround, "no upload planned a copy on the garbage node")
	for _, f := range append(warm, files...) {
		require.NotEqual(t, bad, c.mustRead(f).ServedBy)
	}

	// Background work against it fails cleanly: no 5xx, no copy counted
	// on it, every file still whole.
	_, err = c.api.Rebalance(ctx)
	require.NoError(t, err)
	v, err := c.api.Verify(ctx, files[0].res.FileID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, v.HealthyCopies, 2, "%+v", v)
	_, err = c.api.Delete(ctx, files[1].res.FileID)
	require.NoError(t, err)
	files = append(warm, files[2:]...)
	for _, f := range files {
		require.NotContains(t, activeCopies(c.metadata(f.res.FileID)), bad)
		c.mustRead(f)
	}

	// Once the bad node is gone the cluster comes to rest.
	srv.Close()
	c.waitEvicted(bad)
	c.waitStatus(client.FileActive, ids(files)...)
}
