package storagenode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/storagenode"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// coordinator records the registrations it receives and answers each with
// the status answer returns.
type coordinator struct {
	srv    *httptest.Server
	answer atomic.Int32

	mu    sync.Mutex
	regs  []wire.Registration
	auths []string
}

func newCoordinator(t *testing.T) *coordinator {
	c := &coordinator{}
	c.answer.Store(http.StatusOK)
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/nodes/register" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "unexpected request", http.StatusTeapot)
			return
		}
		var reg wire.Registration
		if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.regs = append(c.regs, reg)
		c.auths = append(c.auths, r.Header.Get("Authorization"))
		c.mu.Unlock()
		w.WriteHeader(int(c.answer.Load()))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *coordinator) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.regs)
}

func (c *coordinator) last() (wire.Registration, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.regs[len(c.regs)-1], c.auths[len(c.auths)-1]
}

func TestRegistrationBodyAndToken(t *testing.T) {
	c := newCoordinator(t)
	n := startNode(t, map[string]string{
		"COORDINATOR_URL":         c.srv.URL + "/",
		"STORAGE_NODE_ID":         "node-5",
		"STORAGE_ADVERTISED_HOST": "storage-node-5.internal",
		"STORAGE_ADVERTISED_PORT": "19005",
		"CLUSTER_TOKEN":           "tok",
	})
	require.Eventually(t, func() bool { return c.count() >= 1 }, 10*time.Second, 5*time.Millisecond,
		"the node registers at start")
	reg, auth := c.last()
	require.NotEmpty(t, n.DiskID)
	require.Equal(t, wire.Registration{NodeID: "node-5", Host: "storage-node-5.internal", Port: 19005, DiskID: n.DiskID, Weight: 1}, reg)
	require.Equal(t, "Bearer tok", auth)
}

func TestRegistrationCarriesZoneAndWeight(t *testing.T) {
	c := newCoordinator(t)
	startNode(t, map[string]string{"COORDINATOR_URL": c.srv.URL, "STORAGE_ZONE": "rack-b", "STORAGE_WEIGHT": "2.5"})
	require.Eventually(t, func() bool { return c.count() >= 1 }, 10*time.Second, 5*time.Millisecond)
	reg, _ := c.last()
	require.Equal(t, "rack-b", reg.Zone)
	require.Equal(t, 2.5, reg.Weight)
}

func TestAutoWeightFollowsCapacity(t *testing.T) {
	c := newCoordinator(t)
	startNode(t, map[string]string{"COORDINATOR_URL": c.srv.URL, "STORAGE_WEIGHT": "auto", "STORAGE_CAPACITY_BYTES": "3TiB"})
	require.Eventually(t, func() bool { return c.count() >= 1 }, 10*time.Second, 5*time.Millisecond)
	reg, _ := c.last()
	require.Equal(t, 3.0, reg.Weight, "1 per TiB of STORAGE_CAPACITY_BYTES")

	for _, tc := range []struct {
		capacity int64
		want     float64
	}{
		{0, storagenode.AutoWeightFloor},
		{1 << 30, storagenode.AutoWeightFloor}, // 1 GiB: below the floor
		{1 << 40, 1},
		{4 << 40, 4},
		{(1 << 40) + (1<<40)/2, 1.5},
		{(1 << 40) + 1<<30, 1}, // 1.001 TiB rounds to 1: a size read a little differently each start moves nothing
		{1 << 62, storagenode.MaxWeight},
	} {
		require.Equal(t, tc.want, storagenode.AutoWeight(tc.capacity), "capacity %d", tc.capacity)
	}
}

func TestRegistrationRepeatsEveryInterval(t *testing.T) {
	c := newCoordinator(t)
	n := startNode(t, map[string]string{"COORDINATOR_URL": c.srv.URL, "REGISTRATION_INTERVAL": "10ms"})
	require.Eventually(t, func() bool { return c.count() >= 3 }, 10*time.Second, 5*time.Millisecond,
		"the node re-registers on every interval")
	reg, auth := c.last()
	require.Equal(t, "node-1", reg.NodeID)
	require.Equal(t, "localhost", reg.Host)
	require.Equal(t, n.Config.Port, reg.Port, "the advertised port defaults to the server port")
	require.Empty(t, auth, "no token is sent when none is configured")

	require.NoError(t, n.Stop())
	// A registration the node sent just before it stopped may still be
	// arriving; after that, nothing more comes.
	time.Sleep(20 * time.Millisecond)
	stopped := c.count()
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, stopped, c.count(), "registration stops with the node")
}

// TestRegistrationLogsOncePerOutage checks that a coordinator that is down
// is reported when the outage starts and when it ends, not at every tick.
func TestRegistrationLogsOncePerOutage(t *testing.T) {
	c := newCoordinator(t)
	c.answer.Store(http.StatusServiceUnavailable)
	n := startNode(t, map[string]string{"COORDINATOR_URL": c.srv.URL, "REGISTRATION_INTERVAL": "5ms"})
	require.Eventually(t, func() bool { return c.count() >= 5 }, 10*time.Second, time.Millisecond)
	c.answer.Store(http.StatusOK)
	require.Eventually(t, func() bool { return len(n.Logs("registered with the coordinator")) == 1 }, 10*time.Second, time.Millisecond)
	c.answer.Store(http.StatusServiceUnavailable)
	seen := c.count()
	require.Eventually(t, func() bool { return c.count() >= seen+5 }, 10*time.Second, time.Millisecond)
	c.answer.Store(http.StatusNoContent)
	require.Eventually(t, func() bool {
		return len(n.Logs("registered with the coordinator again after an outage")) == 1
	}, 10*time.Second, time.Millisecond)

	warnings := n.Logs("cannot register with the coordinator; will keep trying")
	require.Len(t, warnings, 2, "one warning per outage")
	for _, w := range warnings {
		require.Equal(t, "WARN", w["level"])
		require.Contains(t, w["err"], "503")
	}
	gathered, err := n.Registry.Gather()
	require.NoError(t, err)
	var failures float64
	for _, mf := range gathered {
		if mf.GetName() == "dfs_node_registrations_total" {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == "error" {
					failures = m.GetCounter().GetValue()
				}
			}
		}
	}
	require.GreaterOrEqual(t, failures, 10.0, "every failed attempt is counted")
}

func TestRegistrationToleratesAnAbsentCoordinator(t *testing.T) {
	c := newCoordinator(t)
	c.srv.Close() // nothing listens at the URL any more
	n := startNode(t, map[string]string{"COORDINATOR_URL": c.srv.URL, "REGISTRATION_INTERVAL": "5ms"})
	require.Eventually(t, func() bool {
		return len(n.Logs("cannot register with the coordinator; will keep trying")) == 1
	}, 10*time.Second, time.Millisecond)
	resp, _ := n.request(t, http.MethodGet, "/health/ready", nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a node without a coordinator still serves")
}

func TestNoCoordinatorURLDisablesRegistration(t *testing.T) {
	n := startNode(t, nil)
	require.Eventually(t, func() bool {
		return len(n.Logs("COORDINATOR_URL is not set: the node will not register with a coordinator")) == 1
	}, 10*time.Second, time.Millisecond)
	require.Empty(t, n.Logs("registering with the coordinator"))
}

// TestShutdownFinishesRequestsInFlight stops a node while an upload is half
// sent: the upload still completes, and the node then stops. The blob is
// above STORAGE_INLINE_MAX, so that it goes to a temp file in either layout.
func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	n := startNode(t, nil)
	data := bytes.Repeat([]byte("z"), blob.DefaultInlineMax+1<<10)
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPut, n.URL+"/internal/blobs/"+uuid.NewString(), pr)
	require.NoError(t, err)
	req.ContentLength = int64(len(data))
	req.Header.Set("X-Checksum-Sha256", checksum(data))
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		resp.Body.Close()
		answered <- resp
	}()
	_, err = pw.Write(data[:1<<19])
	require.NoError(t, err)
	// The write is in flight once the node has started its temp file.
	require.Eventually(t, func() bool {
		matches, _ := filepath.Glob(filepath.Join(n.DataDir, "*", "*", ".tmp-*"))
		return len(matches) > 0
	}, 10*time.Second, time.Millisecond)

	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	require.Eventually(t, func() bool { return len(n.Logs("storage node stopping")) == 1 }, 10*time.Second, time.Millisecond)
	_, err = pw.Write(data[1<<19:])
	require.NoError(t, err)
	require.NoError(t, pw.Close())

	resp := <-answered
	require.NotNil(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the request in flight completes")
	require.NoError(t, <-stopped)
	_, err = http.Get(n.URL + "/health/live")
	require.Error(t, err, "a stopped node accepts nothing")
}

func TestRunFailsOnABusyPort(t *testing.T) {
	n := startNode(t, nil)
	cfg := n.Config
	cfg.DataDir = t.TempDir()
	srv, err := newServer(t, cfg)
	require.NoError(t, err)
	err = srv.Run(context.Background())
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "listen"), err.Error())
}
