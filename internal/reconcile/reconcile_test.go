package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// fakeNodes keeps each node's blobs in a blob.Memory, logs every mutating
// call in order, and fails calls on demand, so a test can fault a reconcile
// at an exact point.
type fakeNodes struct {
	mu      sync.Mutex
	stores  map[string]*blob.Memory
	down    map[string]bool
	failPut map[string]error
	// headErr answers a node's HEAD with an error until the node deletes
	// the blob (a torn sidecar, say).
	headErr map[string]error
	// afterPut, when set, runs after a copy landed on a node.
	afterPut func(base string)
	ops      []string
}

func newFakeNodes(ids ...string) *fakeNodes {
	f := &fakeNodes{stores: map[string]*blob.Memory{}, down: map[string]bool{}, failPut: map[string]error{}, headErr: map[string]error{}}
	for _, id := range ids {
		f.stores[id] = blob.NewMemory(blob.Options{})
	}
	return f
}

func (f *fakeNodes) node(base string) (*blob.Memory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[base] {
		return nil, errs.E(errs.Unavailable, "%s: connection refused", base)
	}
	return f.stores[base], nil
}

func (f *fakeNodes) log(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
}

func (f *fakeNodes) Head(ctx context.Context, base, id string) (wire.BlobInfo, error) {
	s, err := f.node(base)
	if err != nil {
		return wire.BlobInfo{}, err
	}
	f.mu.Lock()
	herr := f.headErr[base]
	f.mu.Unlock()
	if herr != nil {
		return wire.BlobInfo{}, herr
	}
	info, err := s.Stat(ctx, id)
	return nodetest.WireInfo(info), err
}

func (f *fakeNodes) Get(ctx context.Context, base, id string, _ *byterange.Range) (*nodeclient.Object, error) {
	s, err := f.node(base)
	if err != nil {
		return nil, err
	}
	rc, info, err := s.Fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	return &nodeclient.Object{Body: rc, Info: nodetest.WireInfo(info), ContentLength: info.Size}, nil
}

func (f *fakeNodes) Put(ctx context.Context, base, id, checksum string, size int64, body io.Reader) (wire.BlobInfo, bool, error) {
	s, err := f.node(base)
	if err != nil {
		return wire.BlobInfo{}, false, err
	}
	f.mu.Lock()
	perr := f.failPut[base]
	f.mu.Unlock()
	if perr != nil {
		return wire.BlobInfo{}, false, perr
	}
	info, created, err := s.Receive(ctx, id, checksum, size, body)
	if err == nil {
		f.log("put " + base)
		if f.afterPut != nil {
			f.afterPut(base)
		}
	}
	return nodetest.WireInfo(info), created, err
}

func (f *fakeNodes) Delete(ctx context.Context, base, id string) error {
	s, err := f.node(base)
	if err != nil {
		return err
	}
	f.log("delete " + base)
	f.mu.Lock()
	delete(f.headErr, base)
	f.mu.Unlock()
	return s.Remove(ctx, id)
}

func (f *fakeNodes) Rehash(ctx context.Context, base, id string) (wire.ChecksumReport, error) {
	s, err := f.node(base)
	if err != nil {
		return wire.ChecksumReport{}, err
	}
	c, err := s.Rehash(ctx, id)
	return nodetest.WireCheck(c), err
}

func (f *fakeNodes) holds(node, id string) bool {
	_, err := f.stores[node].Stat(context.Background(), id)
	return err == nil
}

func (f *fakeNodes) takeOps() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.ops
	f.ops = nil
	return out
}

// fakeCluster is a settable ring; node ids double as base URLs.
type fakeCluster struct {
	mu     sync.Mutex
	rg     *ring.Ring
	status map[string]meta.NodeStatus
}

func (c *fakeCluster) Ring() *ring.Ring {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rg
}

func (c *fakeCluster) BaseURL(id string) (string, bool) { return id, true }

func (c *fakeCluster) Status(id string) (meta.NodeStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.status[id]
	return st, ok
}

func (c *fakeCluster) set(nodes ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rg = ring.New(100, nodes...)
	for _, n := range nodes {
		c.status[n] = meta.NodeHealthy
	}
}

type fixture struct {
	t       *testing.T
	store   meta.Store
	nodes   *fakeNodes
	cluster *fakeCluster
	rec     *Reconciler
}

func newFixture(t *testing.T, all ...string) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	for _, n := range all {
		require.NoError(t, st.CreateNode(context.Background(), &meta.Node{ID: n, Host: n, Port: 1, Status: meta.NodeHealthy}))
	}
	f := &fixture{t: t, store: st, nodes: newFakeNodes(all...), cluster: &fakeCluster{status: map[string]meta.NodeStatus{}}}
	f.rec = New(Options{Store: st, Nodes: f.nodes, Cluster: f.cluster, ReplicationFactor: 3})
	return f
}

// file stores a file with copies on the given nodes (bytes and rows).
func (f *fixture) file(data []byte, on ...string) meta.FileRecord {
	f.t.Helper()
	sum := sha256.Sum256(data)
	id := fmt.Sprintf("00000000-0000-4000-8000-%012x", sum[:6])
	rec := meta.FileRecord{File: meta.File{ID: id, Name: "f", ContentType: "application/octet-stream",
		SizeBytes: int64(len(data)), Checksum: hex.EncodeToString(sum[:]), Status: meta.FileActive,
		PrimaryNodeID: on[0], ReplicationFactor: 3, RingPosition: ring.Position(id)}}
	for _, n := range on {
		_, _, err := f.nodes.stores[n].Receive(context.Background(), id, rec.Checksum, rec.SizeBytes, bytes.NewReader(data))
		require.NoError(f.t, err)
		rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: meta.ReplicaActive})
	}
	require.NoError(f.t, f.store.CreateFile(context.Background(), &rec))
	return rec
}

func (f *fixture) reconcile(id string) Outcome {
	f.t.Helper()
	out, err := f.rec.Reconcile(context.Background(), id)
	require.NoError(f.t, err)
	return out
}

func (f *fixture) get(id string) meta.FileRecord {
	f.t.Helper()
	rec, err := f.store.GetFile(context.Background(), id)
	require.NoError(f.t, err)
	return rec
}

// moved finds a file whose preference list changes when to replaces from.
func movedFile(t *testing.T, f *fixture, before, after []string, data func(i int) []byte) (meta.FileRecord, []string, []string) {
	t.Helper()
	rb, ra := ring.New(100, before...), ring.New(100, after...)
	for i := range 1000 {
		d := data(i)
		sum := sha256.Sum256(d)
		id := fmt.Sprintf("00000000-0000-4000-8000-%012x", sum[:6])
		pb, pa := rb.Preference(id, 3), ra.Preference(id, 3)
		if fmt.Sprint(pb) != fmt.Sprint(pa) {
			return f.file(d, pb...), pb, pa
		}
	}
	t.Fatal("no file moves")
	return meta.FileRecord{}, nil, nil
}

func TestCreatesBeforeItDeletes(t *testing.T) {
	f := newFixture(t, "A", "B", "C", "D")
	f.cluster.set("A", "B", "C")
	rec, before, after := movedFile(t, f, []string{"A", "B", "C"}, []string{"A", "B", "C", "D"}, func(i int) []byte { return []byte(fmt.Sprint("file-", i)) })
	f.cluster.set("A", "B", "C", "D")
	var surplus string
	for _, n := range before {
		if !contains(after, n) {
			surplus = n
		}
	}
	require.NotEmpty(t, surplus)

	// The newcomer refuses the copy: the surplus copy must survive.
	f.nodes.failPut["D"] = errs.E(errs.Unavailable, "D refuses")
	out := f.reconcile(rec.ID)
	require.Equal(t, 1, out.Failures)
	require.Zero(t, out.CopiesRemoved)
	require.True(t, f.nodes.holds(surplus, rec.ID), "a surplus copy was deleted before its replacement existed")
	require.Equal(t, meta.FileDegraded, f.get(rec.ID).Status)
	require.NotContains(t, f.nodes.takeOps(), "delete "+surplus)

	// Once the newcomer accepts, the copy is created first and only then is
	// the surplus one removed.
	delete(f.nodes.failPut, "D")
	out = f.reconcile(rec.ID)
	require.Equal(t, 1, out.CopiesCreated)
	require.Equal(t, 1, out.CopiesRemoved)
	require.Equal(t, []string{"put D", "delete " + surplus}, f.nodes.takeOps())
	got := f.get(rec.ID)
	require.Equal(t, meta.FileActive, got.Status)
	require.ElementsMatch(t, after, activeNodes(got))

	// A second run does nothing.
	out = f.reconcile(rec.ID)
	require.False(t, out.Changed)
	require.Zero(t, out.CopiesCreated+out.CopiesRemoved)
	require.Empty(t, f.nodes.takeOps())
}

func TestReturningNodeIsReadoptedWithoutCopying(t *testing.T) {
	f := newFixture(t, "A", "B", "C")
	f.cluster.set("A", "B", "C")
	rec := f.file([]byte("hello"), "A", "B", "C")
	f.cluster.set("A", "B") // C failed
	f.cluster.status["C"] = meta.NodeUnhealthy
	out := f.reconcile(rec.ID)
	require.Equal(t, meta.FileDegraded, out.Status)
	got := f.get(rec.ID)
	r, _ := got.Replica("C")
	require.Equal(t, meta.ReplicaFailed, r.Status)

	f.cluster.set("A", "B", "C") // C recovered, its blob intact
	out = f.reconcile(rec.ID)
	require.Equal(t, meta.FileActive, out.Status)
	require.Zero(t, out.CopiesCreated, "re-adoption copies nothing")
	require.Empty(t, f.nodes.takeOps())
}

func TestNoSourceLeftIsUnrecoverableAndNamed(t *testing.T) {
	f := newFixture(t, "A", "B", "C")
	f.cluster.set("A", "B", "C")
	rec := f.file([]byte("doomed"), "A")
	require.NoError(t, f.nodes.stores["A"].Remove(context.Background(), rec.ID))
	out := f.reconcile(rec.ID)
	require.True(t, out.Unrecoverable)
	require.Equal(t, meta.FileFailed, out.Status)
	require.Contains(t, f.get(rec.ID).StatusReason, "no reachable copy")
}

func TestCorruptSourceIsRefusedAndRemoved(t *testing.T) {
	f := newFixture(t, "A", "B", "C")
	f.cluster.set("A", "B", "C")
	// Pick a file whose preference list puts A before B, so the reconciler
	// tries A's corrupt copy as a source first.
	rg := ring.New(100, "A", "B", "C")
	var data []byte
	for i := 0; ; i++ {
		data = []byte(fmt.Sprint("precious bytes ", i))
		sum := sha256.Sum256(data)
		p := rg.Preference(fmt.Sprintf("00000000-0000-4000-8000-%012x", sum[:6]), 3)
		if indexOf(p, "A") < indexOf(p, "B") {
			break
		}
	}
	rec := f.file(data, "A", "B")
	require.True(t, f.nodes.stores["A"].Corrupt(rec.ID))
	f.reconcile(rec.ID)
	// C got a good copy (from B, after A's bytes were refused on arrival),
	// and A's bad copy was found, removed and replaced.
	for _, n := range []string{"B", "C"} {
		ck, err := f.nodes.stores[n].Rehash(context.Background(), rec.ID)
		require.NoError(t, err)
		require.Equal(t, rec.Checksum, ck.Actual, n)
	}
	f.reconcile(rec.ID)
	ck, err := f.nodes.stores["A"].Rehash(context.Background(), rec.ID)
	require.NoError(t, err)
	require.Equal(t, rec.Checksum, ck.Actual)
	require.Equal(t, meta.FileActive, f.get(rec.ID).Status)
}

func TestDeletedFileIsNeverRecreated(t *testing.T) {
	f := newFixture(t, "A", "B", "C")
	f.cluster.set("A", "B", "C")
	rec := f.file([]byte("gone"), "A", "B", "C")
	rec.Status = meta.FileDeleted
	for i := range rec.Replicas {
		rec.Replicas[i].Status = meta.ReplicaDeleting
	}
	require.NoError(t, f.store.UpdateFile(context.Background(), &rec))
	f.nodes.down["C"] = true
	out := f.reconcile(rec.ID)
	require.False(t, out.Removed)
	require.Equal(t, []string{"C"}, out.RemainingHolders)
	require.Zero(t, out.CopiesCreated)
	f.nodes.down["C"] = false
	out = f.reconcile(rec.ID)
	require.True(t, out.Removed)
	for _, n := range []string{"A", "B", "C"} {
		require.False(t, f.nodes.holds(n, rec.ID))
	}
}

func TestLockContentionSkips(t *testing.T) {
	f := newFixture(t, "A", "B", "C")
	f.cluster.set("A", "B", "C")
	rec := f.file([]byte("locked"), "A")
	held := true
	free := lease.NewLocalLocker(lease.Options{})
	f.rec.lock = lease.LockerFunc(func(ctx context.Context, name string, ttl time.Duration) (lease.Lease, bool, error) {
		require.Equal(t, "file:"+rec.ID, name)
		if held {
			return nil, false, nil
		}
		return free.TryLock(ctx, name, ttl)
	})
	out := f.reconcile(rec.ID)
	require.True(t, out.Skipped)
	require.Empty(t, f.nodes.takeOps(), "a skipped file is not touched")
	held = false
	out = f.reconcile(rec.ID)
	require.Equal(t, 2, out.CopiesCreated)
	require.Equal(t, 2*rec.SizeBytes, out.BytesCopied, "the bytes of both copies")
}

func activeNodes(rec meta.FileRecord) []string {
	var out []string
	for _, r := range rec.Replicas {
		if r.Status == meta.ReplicaActive {
			out = append(out, r.NodeID)
		}
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestFullNodeGivesItsPlaceToTheNextNode(t *testing.T) {
	f := newFixture(t, "A", "B", "C", "D")
	f.cluster.set("A", "B", "C", "D")
	rg := ring.New(100, "A", "B", "C", "D")
	rec := f.file([]byte("x"), "A") // placeholder to learn an id's list
	pref := rg.Preference(rec.ID, 4)
	full, spare := pref[2], pref[3]
	// The file has its copies on the first two nodes; the third is full.
	require.NoError(t, f.store.DeleteFile(context.Background(), rec.ID))
	require.NoError(t, f.nodes.stores["A"].Remove(context.Background(), rec.ID))
	rec = f.file([]byte("x"), pref[0], pref[1])
	f.nodes.failPut[full] = errs.E(errs.NoSpace, "%s: capacity reached", full)

	out := f.reconcile(rec.ID)
	require.Zero(t, out.Failures)
	require.Equal(t, 1, out.CopiesCreated)
	require.Equal(t, meta.FileActive, out.Status)
	require.True(t, f.nodes.holds(spare, rec.ID), "the next node of the preference list took the copy")
	require.False(t, f.nodes.holds(full, rec.ID))
	require.ElementsMatch(t, []string{pref[0], pref[1], spare}, activeNodes(f.get(rec.ID)))

	// Still full: the next run finds the stand-in's copy and changes nothing.
	f.nodes.takeOps()
	out = f.reconcile(rec.ID)
	require.Zero(t, out.Failures+out.CopiesCreated+out.CopiesRemoved)
	require.False(t, out.Changed)
	require.Equal(t, meta.FileActive, out.Status)
}

// A node that answers "what I hold under this id is corrupt" (a torn or
// garbage sidecar) is reachable: its copy is replaced, and the file does not
// stay DEGRADED waiting for a node that will never be "back".
func TestCorruptAnswerIsACopyToReplace(t *testing.T) {
	f := newFixture(t, "A", "B", "C")
	f.cluster.set("A", "B", "C")
	rec := f.file([]byte("torn sidecar"), "A", "B", "C")
	f.nodes.headErr["B"] = errs.E(errs.Corrupt, "sidecar is malformed")
	out := f.reconcile(rec.ID)
	require.Equal(t, 1, out.CopiesCreated)
	require.Equal(t, meta.FileActive, out.Status)
	require.Equal(t, []string{"delete B", "put B"}, f.nodes.takeOps(), "the bad copy is removed, then rewritten")
	require.ElementsMatch(t, []string{"A", "B", "C"}, activeNodes(f.get(rec.ID)))
}

// A copy made for a file whose row disappears meanwhile (a delete finished
// while the copy was in flight) is removed by the run that made it.
func TestCopyForAFileDeletedMeanwhileIsRemoved(t *testing.T) {
	f := newFixture(t, "A", "B", "C", "D")
	f.cluster.set("A", "B", "C")
	rec, _, after := movedFile(t, f, []string{"A", "B", "C"}, []string{"A", "B", "C", "D"}, func(i int) []byte { return []byte(fmt.Sprint("raced-", i)) })
	require.Contains(t, after, "D")
	f.cluster.set("A", "B", "C", "D")
	f.nodes.afterPut = func(base string) {
		if base == "D" {
			require.NoError(t, f.store.DeleteFile(context.Background(), rec.ID))
		}
	}
	out := f.reconcile(rec.ID)
	require.True(t, out.Removed, "%+v", out)
	require.False(t, f.nodes.holds("D", rec.ID), "the copy made for a deleted file was left behind")
}

// The sweep names nodes whose inventory holds a blob the metadata does not
// list. Such a copy is adopted while the file needs it, removed as surplus
// once the desired copies are complete, and removed for a deleted file.
func TestUnlistedCopies(t *testing.T) {
	t.Run("surplus is removed once the desired copies are complete", func(t *testing.T) {
		f := newFixture(t, "A", "B", "C", "D")
		f.cluster.set("A", "B", "C", "D")
		var rec meta.FileRecord
		var spare string
		for i := 0; spare == ""; i++ {
			data := []byte(fmt.Sprint("unlisted-", i))
			sum := sha256.Sum256(data)
			id := fmt.Sprintf("00000000-0000-4000-8000-%012x", sum[:6])
			pref := f.cluster.Ring().Preference(id, 4)
			rec = f.file(data, pref[:3]...)
			spare = pref[3]
			_, _, err := f.nodes.stores[spare].Receive(context.Background(), rec.ID, rec.Checksum, rec.SizeBytes, bytes.NewReader(data))
			require.NoError(t, err)
		}
		out := f.reconcile(rec.ID)
		require.Zero(t, out.CopiesRemoved, "a plain reconcile does not look at nodes nothing names")
		out, err := f.rec.ReconcileWith(context.Background(), rec.ID, spare)
		require.NoError(t, err)
		require.Equal(t, 1, out.CopiesRemoved)
		require.False(t, f.nodes.holds(spare, rec.ID))
		require.Len(t, f.get(rec.ID).Replicas, 3)
	})
	t.Run("a desired node's unlisted copy is adopted without copying", func(t *testing.T) {
		f := newFixture(t, "A", "B", "C")
		f.cluster.set("A", "B", "C")
		rec := f.file([]byte("adopt me"), "A", "B", "C")
		rec.Replicas = rec.Replicas[:1]
		rec.Status = meta.FileDegraded
		require.NoError(t, f.store.UpdateFile(context.Background(), &rec))
		out, err := f.rec.ReconcileWith(context.Background(), rec.ID, "B", "C")
		require.NoError(t, err)
		require.Zero(t, out.CopiesCreated)
		require.Equal(t, meta.FileActive, out.Status)
		require.Empty(t, f.nodes.takeOps())
	})
	t.Run("a deleted file's unlisted copy is removed", func(t *testing.T) {
		f := newFixture(t, "A", "B", "C", "D")
		f.cluster.set("A", "B", "C", "D")
		rec := f.file([]byte("gone"), "A", "B")
		_, _, err := f.nodes.stores["D"].Receive(context.Background(), rec.ID, rec.Checksum, rec.SizeBytes, bytes.NewReader([]byte("gone")))
		require.NoError(t, err)
		rec.Status = meta.FileDeleted
		require.NoError(t, f.store.UpdateFile(context.Background(), &rec))
		out, err := f.rec.ReconcileWith(context.Background(), rec.ID, "D")
		require.NoError(t, err)
		require.True(t, out.Removed)
		for _, n := range []string{"A", "B", "D"} {
			require.False(t, f.nodes.holds(n, rec.ID), n)
		}
	})
}

func TestPlaced(t *testing.T) {
	active := func(nodes ...string) []meta.Replica {
		var out []meta.Replica
		for _, n := range nodes {
			out = append(out, meta.Replica{NodeID: n, Status: meta.ReplicaActive})
		}
		return out
	}
	rec := func(st meta.FileStatus, primary string, rs []meta.Replica) meta.FileRecord {
		return meta.FileRecord{File: meta.File{Status: st, PrimaryNodeID: primary}, Replicas: rs}
	}
	desired := []string{"B", "A", "C"}
	cases := []struct {
		name string
		rec  meta.FileRecord
		want bool
	}{
		{"exactly placed", rec(meta.FileActive, "B", active("A", "B", "C")), true},
		{"wrong primary", rec(meta.FileActive, "A", active("A", "B", "C")), false},
		{"a copy elsewhere", rec(meta.FileActive, "B", active("A", "B", "D")), false},
		{"a surplus copy", rec(meta.FileActive, "B", active("A", "B", "C", "D")), false},
		{"a copy short", rec(meta.FileActive, "B", active("A", "B")), false},
		{"a failed row", rec(meta.FileActive, "B", append(active("A", "B", "C")[:2], meta.Replica{NodeID: "C", Status: meta.ReplicaFailed})), false},
		{"degraded", rec(meta.FileDegraded, "B", active("A", "B", "C")), false},
		{"rebalancing", rec(meta.FileRebalancing, "B", active("A", "B", "C")), false},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, Placed(tc.rec, desired), tc.name)
	}
	require.False(t, Placed(rec(meta.FileActive, "", nil), nil), "an empty ring places nothing")
}
