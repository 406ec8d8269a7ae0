package coordinator

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// pausingProxy stands in front of a storage node and, once paused, holds
// every blob write it receives until the writer gives up: a node that
// accepts a copy and never answers.
type pausingProxy struct {
	srv       *httptest.Server
	transport *http.Transport
	paused    atomic.Bool
	// held is closed when the first write is held, ended when that write's
	// request ended while it was held (the writer cancelled it).
	held, ended chan struct{}
	once        sync.Once
}

func newPausingProxy(t *testing.T, target string) *pausingProxy {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &pausingProxy{transport: &http.Transport{}, held: make(chan struct{}), ended: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = p.transport
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		write := r.Method == http.MethodPut || r.Method == http.MethodPost && r.URL.Path == wire.PathBlobBatch
		if write && p.paused.Load() {
			// Reading the body to its end is what lets the server notice
			// the writer hanging up.
			_, _ = io.Copy(io.Discard, r.Body)
			first := false
			p.once.Do(func() { first = true; close(p.held) })
			<-r.Context().Done()
			if first {
				close(p.ended)
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.close)
	return p
}

func (p *pausingProxy) addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

func (p *pausingProxy) close() {
	p.srv.Close()
	p.transport.CloseIdleConnections()
}

// TestShutdownDuringAQuarantineRebuild: a download finds a corrupt copy and
// the rebuild of that copy hangs on its write to the quarantined node while
// the coordinator shuts down. Serve must cancel the rebuild and wait for it:
// once Serve has returned (and closed the store), nothing of the rebuild may
// be left running, and nothing may be logged after the coordinator stopped.
func TestShutdownDuringAQuarantineRebuild(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		size int
	}{
		// Verified whole before the first byte: quarantined at once, the
		// rebuild queued.
		{"verified before sending", nil, 4096},
		// Above DOWNLOAD_BUFFER_SIZE: read into a read buffer and verified
		// there before the first byte, the same quarantine and rebuild.
		{"verified in a read buffer", map[string]string{"DOWNLOAD_BUFFER_SIZE": "1KB"}, 200_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			env := map[string]string{"REPLICATION_FACTOR": "2"}
			for k, v := range tc.env {
				env[k] = v
			}
			h := newHarness(t, "sqlite", 0, env)
			proxies := map[string]*pausingProxy{}
			for _, id := range []string{"node-1", "node-2"} {
				n := nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_NODE_ID": id}})
				p := newPausingProxy(t, n.URL)
				h.nodes[id], h.addrs[id], h.dirs[id], proxies[id] = n, p.addr(), n.DataDir, p
				h.register(id)
			}
			h.admit()
			data := payload(tc.size, 5)
			res := h.upload("f", data)
			require.Len(t, h.holders(res.FileID), 2)

			for _, p := range proxies {
				p.paused.Store(true)
			}
			h.corrupt(res.PrimaryNode, res.FileID)
			resp, err := http.Get(h.url + "/api/files/" + res.FileID)
			require.NoError(t, err)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, data, got, "served by the good copy")
			p := proxies[res.PrimaryNode]
			select {
			case <-p.held:
			case <-time.After(20 * time.Second):
				t.Fatal("the rebuild never wrote to the quarantined node")
			}

			h.stop()
			select {
			case <-p.ended:
			default:
				t.Fatal("Serve returned while the rebuild's write was still in flight")
			}
			logs := h.logs.String()
			stopped := strings.Index(logs, "coordinator stopped")
			require.Positive(t, stopped)
			require.NotContains(t, logs[stopped:], "\n"+"time=", "nothing is logged after the coordinator stopped")
			require.NotContains(t, logs, "database is closed")

			for id, n := range h.nodes {
				require.NoError(t, n.Stop())
				proxies[id].close()
			}
			http.DefaultClient.CloseIdleConnections()
			goleak.VerifyNone(t, before)
		})
	}
}

// TestShutdownTimeoutIsTheGraceOfRequestsInFlight: a download in flight when
// the coordinator is told to stop is served to its end while SHUTDOWN_TIMEOUT
// lasts, and is cut off, named in the log, once it has run out; either way
// Serve returns without an error.
func TestShutdownTimeoutIsTheGraceOfRequestsInFlight(t *testing.T) {
	for _, tc := range []struct {
		grace    string
		finishes bool
	}{{"1h", true}, {"100ms", false}} {
		t.Run("SHUTDOWN_TIMEOUT="+tc.grace, func(t *testing.T) {
			h := newHarness(t, "sqlite", 2, map[string]string{"REPLICATION_FACTOR": "2", "SHUTDOWN_TIMEOUT": tc.grace})
			// Larger than what the sockets between the two ends buffer, so
			// the handler is still writing while the client does not read.
			data := payload(24<<20, 9)
			id := h.upload("big", data).FileID
			resp, err := http.Get(h.url + "/api/files/" + id)
			require.NoError(t, err)
			defer resp.Body.Close()
			head := make([]byte, 64<<10)
			_, err = io.ReadFull(resp.Body, head)
			require.NoError(t, err)

			stopped := make(chan struct{})
			go func() { h.stop(); close(stopped) }()
			require.Eventually(t, func() bool { return hasLog(h, "coordinator shutting down") }, 10*time.Second, 10*time.Millisecond)
			require.Contains(t, h.logs.String(), "requests_in_flight=1")
			if tc.finishes {
				rest, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.Equal(t, data, append(head, rest...), "the download in flight is served whole")
				<-stopped
				require.NotContains(t, h.logs.String(), "cutting off")
				return
			}
			<-stopped
			require.Contains(t, h.logs.String(), "shutdown grace is over; cutting off the requests still running")
			require.Contains(t, h.logs.String(), "GET /api/files/"+id)
			rest, _ := io.ReadAll(resp.Body)
			require.Less(t, len(head)+len(rest), len(data), "the download was cut off")
		})
	}
}
