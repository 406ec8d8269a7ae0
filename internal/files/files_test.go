package files

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// gateNodes are in-memory nodes whose writes can be held at a gate, so a test
// can act while an upload is in the middle of its node writes.
type gateNodes struct {
	stores   map[string]*blob.Memory
	gate     chan struct{} // when non-nil, every Put waits on it
	started  chan string
	inFlight atomic.Int32
	maxSeen  atomic.Int32
	fail     map[string]error
	hold     map[string]chan struct{} // a Put to this node also waits on its channel
	quiet    bool                     // benchmarks: do not report started writes
	gets     atomic.Int32             // reads asked of any node
	puts     atomic.Int32             // writes asked of any node
	// getGate, when non-nil, holds every Get until it is closed or the
	// Get's context ends; each held Get is announced on getHeld.
	getGate chan struct{}
	getHeld chan struct{}
}

func newGateNodes(ids ...string) *gateNodes {
	g := &gateNodes{stores: map[string]*blob.Memory{}, fail: map[string]error{}, started: make(chan string, 64)}
	for _, id := range ids {
		g.stores[id] = blob.NewMemory(blob.Options{})
	}
	return g
}

func (g *gateNodes) Put(ctx context.Context, base, id, checksum string, size int64, body io.Reader) (wire.BlobInfo, bool, error) {
	g.puts.Add(1)
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		m := g.maxSeen.Load()
		if n <= m || g.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	if !g.quiet {
		g.started <- base
	}
	if g.gate != nil {
		<-g.gate
	}
	if h := g.hold[base]; h != nil {
		<-h
	}
	if err := g.fail[base]; err != nil {
		return wire.BlobInfo{}, false, err
	}
	info, created, err := g.stores[base].Receive(ctx, id, checksum, size, body)
	return nodetest.WireInfo(info), created, err
}

func (g *gateNodes) Get(ctx context.Context, base, id string, rng *byterange.Range) (*nodeclient.Object, error) {
	g.gets.Add(1)
	if g.getGate != nil {
		g.getHeld <- struct{}{}
		select {
		case <-g.getGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rc, info, err := g.stores[base].Fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	if rng == nil {
		return &nodeclient.Object{Body: rc, Info: nodetest.WireInfo(info), ContentLength: info.Size}, nil
	}
	if _, err := rc.Seek(rng.Start, io.SeekStart); err != nil {
		rc.Close()
		return nil, err
	}
	body := struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, rng.Length), rc}
	return &nodeclient.Object{Body: body, Info: nodetest.WireInfo(info), ContentLength: rng.Length}, nil
}

func (g *gateNodes) Head(ctx context.Context, base, id string) (wire.BlobInfo, error) {
	info, err := g.stores[base].Stat(ctx, id)
	return nodetest.WireInfo(info), err
}

func (g *gateNodes) Delete(ctx context.Context, base, id string) error {
	return g.stores[base].Remove(ctx, id)
}

func (g *gateNodes) Rehash(ctx context.Context, base, id string) (wire.ChecksumReport, error) {
	c, err := g.stores[base].Rehash(ctx, id)
	return nodetest.WireCheck(c), err
}

type staticCluster struct{ rg *ring.Ring }

func (c staticCluster) Ring() *ring.Ring                      { return c.rg }
func (c staticCluster) BaseURL(id string) (string, bool)      { return id, true }
func (c staticCluster) Status(string) (meta.NodeStatus, bool) { return meta.NodeHealthy, true }

func newService(t testing.TB, nodes *gateNodes, ids []string, mod func(*Options)) (*Service, meta.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	for _, n := range ids {
		require.NoError(t, st.CreateNode(context.Background(), &meta.Node{ID: n, Host: n, Port: 1, Status: meta.NodeHealthy}))
	}
	cl := staticCluster{rg: ring.New(100, ids...)}
	o := Options{
		Store: st, Nodes: nodes, Cluster: cl, ReplicationFactor: 3, MaxFileSize: 1 << 20,
		SpoolDir: filepath.Join(t.TempDir(), "spool"), VerifyOnDownload: true, DownloadBuffer: 1 << 10,
		Reconciler: reconcile.New(reconcile.Options{Store: st, Nodes: nodes, Cluster: cl, ReplicationFactor: 3}),
	}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	require.NoError(t, err)
	return s, st
}

func TestReplicaWritesAreBoundedAcrossUploads(t *testing.T) {
	ids := []string{"A", "B", "C", "D"}
	nodes := newGateNodes(ids...)
	s, _ := newService(t, nodes, ids, func(o *Options) { o.ReplicaConcurrency = 1 })
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			_, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader(strings.Repeat("x", i+1))})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	// Each upload's first writer runs without a slot; the other copy writes
	// share one slot, so at most one of them runs beside the six first ones.
	require.LessOrEqual(t, int(nodes.maxSeen.Load()), 6+1)

	one := newGateNodes(ids...)
	s1, _ := newService(t, one, ids, func(o *Options) { o.ReplicaConcurrency = 1 })
	one.gate = make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := s1.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("y")})
		done <- err
	}()
	first, second := <-one.started, <-one.started // the slot-free writer and the one holding the slot
	require.NotEqual(t, first, second)
	select {
	case n := <-one.started:
		t.Fatalf("a third copy write (%s) started while the only slot was taken", n)
	case <-time.After(100 * time.Millisecond):
	}
	close(one.gate)
	require.NoError(t, <-done)
}

func TestRepeatWhileTheFirstIsInFlightIsAConflict(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := newService(t, nodes, ids, nil)
	nodes.gate = make(chan struct{})
	first := make(chan error)
	go func() {
		_, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("same"), IdempotencyKey: "k"})
		first <- err
	}()
	<-nodes.started // the first upload's PENDING row exists and its bytes are moving
	_, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("same"), IdempotencyKey: "k"})
	require.True(t, errs.Is(err, errs.Conflict), "got %v", err)
	require.Contains(t, err.Error(), "still in progress")
	close(nodes.gate)
	require.NoError(t, <-first)
}

func TestUploadFailsOverAndRecordsWhatHappened(t *testing.T) {
	ids := []string{"A", "B", "C", "D"}
	nodes := newGateNodes(ids...)
	s, st := newService(t, nodes, ids, nil)
	// Every node but one refuses: the upload lands there and says why.
	nodes.fail["A"] = errs.E(errs.NoSpace, "disk full")
	nodes.fail["B"] = errs.E(errs.Unavailable, "connection refused")
	nodes.fail["C"] = errs.E(errs.Unavailable, "connection refused")
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("payload")})
	require.NoError(t, err)
	require.Equal(t, "D", res.PrimaryNode)
	require.Equal(t, meta.FileDegraded, res.Status)
	for _, n := range []string{"A: disk full", "B: connection refused", "C: connection refused"} {
		require.Contains(t, res.Reason, n)
	}
	rec, err := st.GetFile(context.Background(), res.FileID)
	require.NoError(t, err)
	require.Len(t, rec.Replicas, 4, "every node written to was recorded before its write")
	require.Equal(t, []string{"D"}, activeOf(rec))

	// Nobody accepts: nothing is left behind.
	nodes.fail["D"] = errs.E(errs.Unavailable, "connection refused")
	_, err = s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("lost")})
	require.True(t, errs.Is(err, errs.Unavailable))
	n, total, err := st.ListFiles(context.Background(), meta.FileQuery{Statuses: []meta.FileStatus{meta.FilePending}, Limit: 10})
	require.NoError(t, err)
	require.Zero(t, total, "%v", n)
}

func TestOversizedBodyIsRefusedAndSpoolCleaned(t *testing.T) {
	ids := []string{"A"}
	s, _ := newService(t, newGateNodes(ids...), ids, func(o *Options) { o.MaxFileSize = 10 })
	_, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(make([]byte, 11))})
	require.True(t, errs.Is(err, errs.TooLarge))
	left, err := filepath.Glob(filepath.Join(s.opt.SpoolDir, "*"))
	require.NoError(t, err)
	require.Empty(t, left)
	_, err = s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(make([]byte, 10))})
	require.NoError(t, err, "exactly the limit is allowed")
}

func TestPendingRowIsTouchedWhileTheUploadRuns(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := newService(t, nodes, ids, func(o *Options) { o.PendingTouch = 10 * time.Millisecond })
	nodes.gate = make(chan struct{})
	done := make(chan UploadResult)
	go func() {
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("slow")})
		require.NoError(t, err)
		done <- res
	}()
	<-nodes.started
	ids2, err := st.FileIDsByStatus(context.Background(), []meta.FileStatus{meta.FilePending}, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, ids2, 1)
	first, err := st.GetFile(context.Background(), ids2[0])
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rec, err := st.GetFile(context.Background(), ids2[0])
		return err == nil && rec.UpdatedAt.After(first.UpdatedAt)
	}, 5*time.Second, 5*time.Millisecond, "a live upload refreshes its row")
	close(nodes.gate)
	<-done
}

// TestDownloadRange is the coordinator's reading of a Range by the shared
// parser (whose own table is in internal/byterange): a range covering the
// whole file is the whole file, and If-Range compares with the file's ETag
// and creation time.
func TestDownloadRange(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 30, 45, 123, time.UTC)
	file := func(size int64) meta.File {
		return meta.File{ID: "f", SizeBytes: size, Checksum: strings.Repeat("ab", 32), CreatedAt: created}
	}
	etag := ETag(file(100))
	cases := []struct {
		h, ifRange string
		size       int64
		want       *byterange.Range
		unsat      bool
	}{
		{"", "", 100, nil, false},
		{"bytes=0-9", "", 100, &byterange.Range{Start: 0, Length: 10}, false},
		{"bytes=90-", "", 100, &byterange.Range{Start: 90, Length: 10}, false},
		{"bytes=-5", "", 100, &byterange.Range{Start: 95, Length: 5}, false},
		{"bytes=-500", "", 100, nil, false}, // the whole file
		{"bytes=0-99", "", 100, nil, false},
		{"bytes=0-", "", 100, nil, false},
		{"bytes=50-1000", "", 100, &byterange.Range{Start: 50, Length: 50}, false},
		{"bytes=100-", "", 100, nil, true},
		{"bytes=-0", "", 100, nil, true},
		{"bytes=0-", "", 0, nil, true},
		{"bytes=5-1", "", 100, nil, false}, // invalid: ignored
		{"bytes=a-b", "", 100, nil, false}, // invalid: ignored
		{"bytes=+5-", "", 100, nil, false}, // invalid: ignored
		{"items=0-1", "", 100, nil, false}, // other unit: ignored
		{"bytes=0-1,3-4", "", 100, nil, false},
		{"bytes=0-9", etag, 100, &byterange.Range{Start: 0, Length: 10}, false},
		{"bytes=0-9", created.Format(http.TimeFormat), 100, &byterange.Range{Start: 0, Length: 10}, false},
		{"bytes=0-9", `"` + strings.Repeat("cd", 32) + `"`, 100, nil, false},
		{"bytes=0-9", created.Add(time.Hour).Format(http.TimeFormat), 100, nil, false},
		{"bytes=100-", `"stale"`, 100, nil, false},
	}
	for _, c := range cases {
		got, err := DownloadRange(byterange.Request{Range: c.h, IfRange: c.ifRange}, file(c.size))
		if c.unsat {
			require.True(t, errs.Is(err, errs.Unsatisfiable), c.h)
			var ue *byterange.UnsatisfiableError
			require.ErrorAs(t, err, &ue, c.h)
			require.Equal(t, c.size, ue.Size, "the error carries the size for Content-Range")
			continue
		}
		require.NoError(t, err, c.h)
		require.Equal(t, c.want, got, "%s (If-Range %s)", c.h, c.ifRange)
	}
}

func TestCleanFileName(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf":             "report.pdf",
		"../../etc/passwd":       "passwd",
		`C:\Users\me\a.txt`:      "a.txt",
		"":                       "file",
		"..":                     "file",
		"bad\x00name\n.txt":      "badname.txt",
		strings.Repeat("é", 200): strings.Repeat("é", 127),
	} {
		require.Equal(t, want, cleanFileName(in), in)
	}
}

func activeOf(rec meta.FileRecord) []string {
	var out []string
	for _, r := range rec.Replicas {
		if r.Status == meta.ReplicaActive {
			out = append(out, r.NodeID)
		}
	}
	return out
}
