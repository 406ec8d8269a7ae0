//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// The settings every cluster starts with: a failure detector, repair loop and
// abandoned-upload timeout fast enough for a test to watch them act, and JSON
// logs a test can read.
var (
	coordinatorDefaults = []string{
		"HEALTH_CHECK_INTERVAL=500ms", "HEALTH_PROBE_TIMEOUT=300ms", "REPAIR_INTERVAL=1s",
		"PENDING_UPLOAD_TIMEOUT=2s", "LOG_FORMAT=json", "LOG_LEVEL=info",
	}
	nodeDefaults = []string{"REGISTRATION_INTERVAL=1s", "LOG_FORMAT=json", "LOG_LEVEL=info"}
)

// layoutVar picks the storage layout of every node the tests start
// (STORAGE_LAYOUT): unset, the nodes' own default. CI runs the package once
// so and the fault tests once more with the other layout (.ci/run).
const layoutVar = "DFS_E2E_STORAGE_LAYOUT"

// withLayout adds the layout layoutVar names, if any, to the node settings;
// TestMain has checked its value.
func withLayout(env []string) []string {
	if l := os.Getenv(layoutVar); l != "" {
		return append(env, "STORAGE_LAYOUT="+l)
	}
	return env
}

// Bounds on waiting for the cluster to act. They are generous because the
// whole package shares two cores; a condition normally holds within seconds.
const (
	settleTimeout = 45 * time.Second
	callTimeout   = 30 * time.Second
	pollInterval  = 100 * time.Millisecond
)

// options describe a test cluster; the zero value is three nodes with the
// defaults above.
type options struct {
	nodes    int
	coordEnv []string // after coordinatorDefaults, so they override them
	nodeEnv  []string // after nodeDefaults, so they override them
	// nodeEnvs are settings of single nodes, by name, after nodeEnv.
	nodeEnvs map[string][]string
	token    string // CLUSTER_TOKEN on both sides
	// sweep makes the test drive the failure detector itself through
	// POST /api/admin/health-check (set HEALTH_CHECK_INTERVAL high with it).
	sweep bool
}

// cluster is a running local cluster and the clients that talk to it.
type cluster struct {
	t     *testing.T
	lc    *localcluster.Cluster
	api   *client.Client
	http  *http.Client // for the nodes' internal API and raw calls
	token string
	sweep bool
	// extras are storage nodes started outside the local cluster; only the
	// test's goroutine touches the map.
	extras map[string]*extraNode
}

// startCluster starts a coordinator and o.nodes storage nodes, waits until
// every node is on the ring, and stops everything when the test ends.
func startCluster(t *testing.T, o options) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	if o.nodes == 0 {
		o.nodes = 3
	}
	coordEnv := append(slices.Clone(coordinatorDefaults), o.coordEnv...)
	nodeEnv := append(withLayout(slices.Clone(nodeDefaults)), o.nodeEnv...)
	if o.token != "" {
		coordEnv = append(coordEnv, "CLUSTER_TOKEN="+o.token)
		nodeEnv = append(nodeEnv, "CLUSTER_TOKEN="+o.token)
	}
	ctx, cancel := context.WithCancel(context.Background())
	lc, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: binDir, DataDir: t.TempDir(), Nodes: o.nodes,
		CoordinatorEnv: coordEnv, NodeEnv: nodeEnv, NodeEnvs: o.nodeEnvs,
		StopTimeout: 5 * time.Second,
		// The cluster logs from its own goroutines, possibly after the test
		// has ended; the process logs hold everything a failure needs.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		cancel()
		t.Fatalf("start the cluster: %v", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: transport, Timeout: callTimeout}
	api, err := client.New(lc.CoordinatorURL(), client.Options{HTTPClient: &http.Client{Transport: transport}, Token: o.token})
	require.NoError(t, err)
	c := &cluster{t: t, lc: lc, api: api, http: hc, token: o.token, sweep: o.sweep, extras: map[string]*extraNode{}}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
		if err := lc.Stop(); err != nil {
			t.Logf("stop the cluster: %v", err)
		}
		cancel()
		transport.CloseIdleConnections()
	})
	c.waitOnRing(lc.Nodes()...)
	return c
}

// with returns the cluster as seen from t, a subtest of the test that
// started it, so that the helpers fail the subtest that called them.
func (c *cluster) with(t *testing.T) *cluster {
	cc := *c
	cc.t = t
	return &cc
}

// dumpLogs puts the end of every process log into the test output.
func (c *cluster) dumpLogs() {
	for _, name := range append([]string{localcluster.CoordinatorName}, c.lc.Nodes()...) {
		b, err := os.ReadFile(c.lc.LogPath(name))
		if err != nil {
			continue
		}
		// Access lines drown everything else; what a failure needs is the
		// decisions the process took.
		lines := slices.DeleteFunc(strings.Split(strings.TrimRight(string(b), "\n"), "\n"), func(l string) bool {
			return strings.Contains(l, `"msg":"http request"`) || strings.Contains(l, `"msg":"request"`) ||
				strings.Contains(l, `"msg":"batched blob write"`)
		})
		c.t.Logf("last lines of %s (without access lines):\n%s", name, strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

// eventually polls cond until it holds, failing the test with cond's last
// explanation when timeout passes first.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last seen: %s", what, timeout, detail)
		}
		time.Sleep(pollInterval)
	}
}

// nodes returns every node the coordinator knows, by id.
func (c *cluster) nodes() map[string]client.Node {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	list, err := c.api.Nodes(ctx)
	require.NoError(c.t, err)
	out := make(map[string]client.Node, len(list))
	for _, n := range list {
		out[n.NodeID] = n
	}
	return out
}

// waitOnRing waits until every named node is HEALTHY and on the ring.
func (c *cluster) waitOnRing(names ...string) {
	c.t.Helper()
	eventually(c.t, settleTimeout, fmt.Sprintf("nodes %v on the ring", names), func() (bool, string) {
		if c.sweep {
			c.healthCheck()
		}
		nodes := c.nodes()
		for _, name := range names {
			if n, ok := nodes[name]; !ok || n.Status != client.NodeHealthy || !n.OnRing {
				return false, fmt.Sprintf("%s: %+v", name, n)
			}
		}
		return true, ""
	})
}

// healthCheck runs one probe sweep now.
func (c *cluster) healthCheck() client.HealthCheckResult {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	res, err := c.api.HealthCheck(ctx)
	require.NoError(c.t, err)
	return res
}

// waitEvicted waits until the named node is UNHEALTHY and off the ring.
func (c *cluster) waitEvicted(name string) {
	c.t.Helper()
	eventually(c.t, settleTimeout, name+" evicted", func() (bool, string) {
		if c.sweep {
			c.healthCheck()
		}
		n := c.nodes()[name]
		return n.Status == client.NodeUnhealthy && !n.OnRing, fmt.Sprintf("%+v", n)
	})
}

// stored is a file a test uploaded and got a 201 for.
type stored struct {
	name string
	data []byte
	res  client.UploadResult
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func (c *cluster) upload(name string, data []byte) (client.UploadResult, error) {
	ctx, cancel := callCtx()
	defer cancel()
	return c.api.Upload(ctx, name, bytes.NewReader(data), int64(len(data)), client.UploadOptions{})
}

func (c *cluster) mustUpload(name string, data []byte) stored {
	c.t.Helper()
	res, err := c.upload(name, data)
	require.NoError(c.t, err, "upload %s", name)
	return stored{name: name, data: data, res: res}
}

// uploadRandom stores n files of size random bytes each.
func (c *cluster) uploadRandom(n, size int) []stored {
	c.t.Helper()
	out := make([]stored, n)
	for i := range out {
		out[i] = c.mustUpload(fmt.Sprintf("file-%02d.bin", i), randomBytes(size))
	}
	return out
}

// download fetches a whole file; the client checks its bytes against the
// checksum the coordinator declares.
func (c *cluster) download(ctx context.Context, id string) ([]byte, client.DownloadInfo, error) {
	var buf bytes.Buffer
	info, err := c.api.Download(ctx, id, &buf, client.DownloadOptions{})
	return buf.Bytes(), info, err
}

// mustRead downloads f and requires its exact bytes.
func (c *cluster) mustRead(f stored) client.DownloadInfo {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	got, info, err := c.download(ctx, f.res.FileID)
	require.NoError(c.t, err, "download %s", f.res.FileID)
	require.True(c.t, bytes.Equal(f.data, got), "download of %s: bytes differ from the upload", f.res.FileID)
	return info
}

func (c *cluster) metadata(id string) client.File {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	f, err := c.api.Metadata(ctx, id)
	require.NoError(c.t, err, "metadata of %s", id)
	return f
}

var allStatuses = []client.FileStatus{client.FilePending, client.FileActive, client.FileDegraded,
	client.FileRebalancing, client.FileFailed, client.FileDeleted}

// files lists every file in the given statuses (all of them when none).
func (c *cluster) files(statuses ...client.FileStatus) []client.File {
	c.t.Helper()
	if len(statuses) == 0 {
		statuses = allStatuses
	}
	ctx, cancel := callCtx()
	defer cancel()
	var out []client.File
	for page := 0; ; page++ {
		l, err := c.api.List(ctx, page, 1000, statuses)
		require.NoError(c.t, err)
		out = append(out, l.Items...)
		if len(l.Items) == 0 || len(out) >= l.Total {
			return out
		}
	}
}

// activeCopies returns the nodes holding an ACTIVE copy of f.
func activeCopies(f client.File) []string {
	var out []string
	for _, r := range f.Replicas {
		if r.Status == client.CopyActive {
			out = append(out, r.NodeID)
		}
	}
	slices.Sort(out)
	return out
}

// waitStatus waits until every file in ids has the status want and, for
// ACTIVE, replication-factor ACTIVE copies.
func (c *cluster) waitStatus(want client.FileStatus, ids ...string) {
	c.t.Helper()
	eventually(c.t, settleTimeout, fmt.Sprintf("%d file(s) %s", len(ids), want), func() (bool, string) {
		for _, id := range ids {
			f := c.metadata(id)
			if f.Status != want || (want == client.FileActive && len(activeCopies(f)) != f.ReplicationFactor) {
				return false, fmt.Sprintf("%s is %s with copies %v", id, f.Status, activeCopies(f))
			}
		}
		return true, ""
	})
}

func ids(files []stored) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.res.FileID
	}
	return out
}

// internal calls a storage node's internal API with the cluster token.
func (c *cluster) internal(method, node, path string) (*http.Response, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.nodeURL(node)+path, nil)
	require.NoError(c.t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err, "%s %s on %s", method, path, node)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp, body
}

// nodeURL is the base URL of a node of the cluster or of an extra node.
func (c *cluster) nodeURL(node string) string {
	if n, ok := c.extras[node]; ok {
		return n.url
	}
	return c.lc.NodeURL(node)
}

// dataDir is the data directory of a node of the cluster or of an extra node.
func (c *cluster) dataDir(node string) string {
	if n, ok := c.extras[node]; ok {
		return n.dir
	}
	return c.lc.DataDir(node)
}

// blobs lists every blob a node holds, through its internal API.
func (c *cluster) blobs(node string) map[string]wire.BlobInfo {
	c.t.Helper()
	base := c.nodeURL(node)
	out := map[string]wire.BlobInfo{}
	after := ""
	for {
		req, err := http.NewRequest(http.MethodGet, base+wire.PathBlobs+"?limit=10000&after="+url.QueryEscape(after), nil)
		require.NoError(c.t, err)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.http.Do(req)
		require.NoError(c.t, err, "list the blobs of %s", base)
		var page wire.BlobList
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		require.Equal(c.t, http.StatusOK, resp.StatusCode)
		require.NoError(c.t, err)
		for _, b := range page.Blobs {
			out[b.ID] = b
		}
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

func (c *cluster) stats(node string) wire.Stats {
	c.t.Helper()
	resp, body := c.internal(http.MethodGet, node, wire.PathStats)
	require.Equal(c.t, http.StatusOK, resp.StatusCode, "%s", body)
	var s wire.Stats
	require.NoError(c.t, json.Unmarshal(body, &s))
	return s
}

// writes records, for every blob of a node, where its copy lies on disk and,
// for a file of its own, when it was last written: a copy written again
// changes its entry in either layout (a volume appends a new record).
func (c *cluster) writes(node string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for id := range c.blobs(node) {
		loc := blobfault.Locate(c.t, c.dataDir(node), id)
		stamp := fmt.Sprintf("%s@%d", loc.Path, loc.Offset)
		if loc.Sidecar != "" {
			st, err := os.Stat(loc.Path)
			require.NoError(c.t, err)
			stamp += " " + st.ModTime().String()
		}
		out[id] = stamp
	}
	return out
}

// placement is every (node, blob) pair: what the nodes hold, or what the
// metadata says they hold.
type placement map[string][]string // node → sorted blob ids

func (c *cluster) heldBlobs(nodes ...string) placement {
	out := placement{}
	for _, n := range nodes {
		for id := range c.blobs(n) {
			out[n] = append(out[n], id)
		}
		slices.Sort(out[n])
	}
	return out
}

// recordedCopies is the ACTIVE copies the metadata records, over every file
// in every status.
func (c *cluster) recordedCopies(nodes ...string) placement {
	out := placement{}
	for _, n := range nodes {
		out[n] = nil
	}
	for _, f := range c.files() {
		for _, n := range activeCopies(c.metadata(f.FileID)) {
			out[n] = append(out[n], f.FileID)
		}
	}
	for n := range out {
		slices.Sort(out[n])
	}
	return out
}

// logEntry is one JSON log line of a process.
type logEntry map[string]any

func (e logEntry) str(key string) string {
	v, _ := e[key].(string)
	return v
}

func (e logEntry) num(key string) float64 {
	v, _ := e[key].(float64)
	return v
}

// logEntries reads the JSON lines of a process log whose msg starts with
// prefix; the cluster's own banners and anything else that is not JSON is
// skipped.
func (c *cluster) logEntries(name, prefix string) []logEntry {
	c.t.Helper()
	return readLogEntries(c.t, c.lc.LogPath(name), prefix)
}

// readLogEntries is logEntries for the log file at path, which may belong
// to a process outside the local cluster.
func readLogEntries(t *testing.T, path, prefix string) []logEntry {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if strings.HasPrefix(e.str("msg"), prefix) {
			out = append(out, e)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// apiError returns the API error in err's chain, or nil.
func apiError(err error) *client.APIError {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// requireAPIError requires err to be an answer with the given status and code.
func requireAPIError(t *testing.T, err error, status int, code string, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	ae := apiError(err)
	require.NotNil(t, ae, "not an API error: %v", err)
	require.Equal(t, status, ae.Status, "%v", err)
	require.Equal(t, code, ae.Code, "%v", err)
}

// extraProcess is a daemon a test starts from the built binaries outside the
// local cluster, on a port of its own.
type extraProcess struct {
	name, url, log string
	cmd            *exec.Cmd
	done           chan struct{}
}

// startExtraProcess starts binary as name with env (given its port) and
// stops it when the test ends, showing its log when the test failed; it
// waits until the process answers ready.
func (c *cluster) startExtraProcess(name, binary string, env func(port string) []string) *extraProcess {
	c.t.Helper()
	ports, err := localcluster.FreePorts("127.0.0.1", 1)
	require.NoError(c.t, err)
	port := strconv.Itoa(ports[0])
	p := &extraProcess{name: name, url: "http://127.0.0.1:" + port, log: filepath.Join(c.t.TempDir(), name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	require.NoError(c.t, err)
	p.cmd = exec.Command(filepath.Join(binDir, binary))
	// The address comes last, so that no setting in env can move it.
	p.cmd.Env = slices.Concat([]string{"PATH=" + os.Getenv("PATH")}, env(port), []string{"SERVER_HOST=127.0.0.1", "SERVER_PORT=" + port})
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(c.t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	c.t.Cleanup(func() {
		// A paused process would sit on SIGTERM until it is continued.
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if c.t.Failed() {
			b, _ := os.ReadFile(p.log)
			lines := slices.DeleteFunc(strings.Split(strings.TrimRight(string(b), "\n"), "\n"), func(l string) bool {
				return strings.Contains(l, `"msg":"http request"`) || strings.Contains(l, `"msg":"request"`) ||
					strings.Contains(l, `"msg":"batched blob write"`)
			})
			c.t.Logf("last lines of %s (without access lines):\n%s", name, strings.Join(lines[max(0, len(lines)-80):], "\n"))
		}
	})
	eventually(c.t, settleTimeout, name+" ready", func() (bool, string) {
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.log)
			c.t.Fatalf("%s exited at start:\n%s", name, b)
		default:
		}
		resp, err := c.http.Get(p.url + wire.PathReady)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	return p
}

// signal sends sig to the process's group.
func (p *extraProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, syscall.Kill(-p.cmd.Process.Pid, sig))
}

// extraNode is a storage node outside the local cluster, for settings the
// cluster gives all of its nodes alike (such as a capacity limit on one).
type extraNode struct {
	*extraProcess
	dir string
}

// startExtraNode starts another storage node that registers with the
// cluster's coordinator, with env on top of the cluster's node defaults.
func (c *cluster) startExtraNode(name string, env ...string) *extraNode {
	c.t.Helper()
	dir := filepath.Join(c.t.TempDir(), name)
	p := c.startExtraProcess(name, localcluster.StorageNodeBinary, func(port string) []string {
		return slices.Concat(withLayout(slices.Clone(nodeDefaults)), env, []string{
			"STORAGE_NODE_ID=" + name, "STORAGE_DATA_DIRECTORY=" + dir,
			"STORAGE_ADVERTISED_HOST=127.0.0.1", "STORAGE_ADVERTISED_PORT=" + port,
			"COORDINATOR_URL=" + c.lc.CoordinatorURL(), "CLUSTER_TOKEN=" + c.token})
	})
	n := &extraNode{extraProcess: p, dir: dir}
	c.extras[name] = n
	return n
}

func (c *cluster) ring() client.RingInfo {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	r, err := c.api.Ring(ctx)
	require.NoError(c.t, err)
	return r
}

// primaries groups files by the primary their upload reported, and names the
// node that is primary of the most.
func primaries(files []stored) (map[string][]stored, string) {
	by := map[string][]stored{}
	top := ""
	for _, f := range files {
		by[f.res.PrimaryNode] = append(by[f.res.PrimaryNode], f)
	}
	for n, fs := range by {
		if top == "" || len(fs) > len(by[top]) || (len(fs) == len(by[top]) && n < top) {
			top = n
		}
	}
	return by, top
}

// putBlob stores a blob on a node directly through its internal API, as
// data the coordinator knows nothing of.
func (c *cluster) putBlob(node, id string, data []byte) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPut, c.nodeURL(node)+wire.BlobPath(id), bytes.NewReader(data))
	require.NoError(c.t, err)
	req.Header.Set(wire.HeaderChecksum, sha256Hex(data))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(c.t, http.StatusCreated, resp.StatusCode, "%s", body)
}
