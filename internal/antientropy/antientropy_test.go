package antientropy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// fakeNodes serves each node's blobs from a blob.Memory; node ids double as
// base URLs. torn marks copies whose checksum sidecar is torn: HEAD answers
// Corrupt and the listing shows no checksum, until the copy is deleted.
type fakeNodes struct {
	mu      sync.Mutex
	stores  map[string]*blob.Memory
	torn    map[copyKey]bool
	listErr map[string]error
	lists   map[string]int
	// afterList, when set, runs after each listing (outside the lock) and
	// is told whether the listing reached its end.
	afterList func(ended bool)
	mutating  []string
}

func newFakeNodes(ids ...string) *fakeNodes {
	f := &fakeNodes{stores: map[string]*blob.Memory{}, torn: map[copyKey]bool{}, listErr: map[string]error{}, lists: map[string]int{}}
	for _, id := range ids {
		f.stores[id] = blob.NewMemory(blob.Options{})
	}
	return f
}

func (f *fakeNodes) Head(ctx context.Context, base, id string) (wire.BlobInfo, error) {
	f.mu.Lock()
	torn := f.torn[copyKey{id, base}]
	f.mu.Unlock()
	if torn {
		return wire.BlobInfo{}, errs.E(errs.Corrupt, "sidecar of %s is malformed", id)
	}
	info, err := f.stores[base].Stat(ctx, id)
	return nodetest.WireInfo(info), err
}

func (f *fakeNodes) Get(ctx context.Context, base, id string, _ *byterange.Range) (*nodeclient.Object, error) {
	rc, info, err := f.stores[base].Fetch(ctx, id)
	if err != nil {
		return nil, err
	}
	return &nodeclient.Object{Body: rc, Info: nodetest.WireInfo(info), ContentLength: info.Size}, nil
}

func (f *fakeNodes) Put(ctx context.Context, base, id, checksum string, size int64, body io.Reader) (wire.BlobInfo, bool, error) {
	f.note("put " + base + " " + id)
	info, created, err := f.stores[base].Receive(ctx, id, checksum, size, body)
	return nodetest.WireInfo(info), created, err
}

func (f *fakeNodes) Delete(ctx context.Context, base, id string) error {
	f.note("delete " + base + " " + id)
	f.mu.Lock()
	delete(f.torn, copyKey{id, base})
	f.mu.Unlock()
	return f.stores[base].Remove(ctx, id)
}

func (f *fakeNodes) Rehash(ctx context.Context, base, id string) (wire.ChecksumReport, error) {
	c, err := f.stores[base].Rehash(ctx, id)
	return nodetest.WireCheck(c), err
}

func (f *fakeNodes) List(ctx context.Context, base, after string, limit int) (wire.BlobList, error) {
	f.mu.Lock()
	lerr := f.listErr[base]
	f.lists[base]++
	f.mu.Unlock()
	if lerr != nil {
		return wire.BlobList{}, lerr
	}
	infos, err := f.stores[base].Enumerate(ctx, after, limit+1)
	if err != nil {
		return wire.BlobList{}, err
	}
	if f.afterList != nil {
		defer func() { f.afterList(len(infos) <= limit) }()
	}
	out := wire.BlobList{}
	if len(infos) > limit {
		infos = infos[:limit]
		out.Next = infos[limit-1].ID
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range infos {
		if f.torn[copyKey{in.ID, base}] {
			in.Checksum = ""
		}
		out.Blobs = append(out.Blobs, nodetest.WireInfo(in))
	}
	return out, nil
}

func (f *fakeNodes) note(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mutating = append(f.mutating, op)
}

func (f *fakeNodes) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.mutating
	f.mutating = nil
	return out
}

func (f *fakeNodes) holds(node, id string) bool {
	_, err := f.stores[node].Stat(context.Background(), id)
	return err == nil
}

type fakeCluster struct{ rg *ring.Ring }

func (c fakeCluster) Ring() *ring.Ring                      { return c.rg }
func (c fakeCluster) BaseURL(id string) (string, bool)      { return id, true }
func (c fakeCluster) Status(string) (meta.NodeStatus, bool) { return meta.NodeHealthy, true }

// countEvents records what the sweep reported.
type countEvents struct {
	mu     sync.Mutex
	found  map[Kind]int
	fixed  map[Kind]int
	passes int
}

func (e *countEvents) Found(k Kind, n int) { e.mu.Lock(); e.found[k] += n; e.mu.Unlock() }
func (e *countEvents) Fixed(k Kind, n int) { e.mu.Lock(); e.fixed[k] += n; e.mu.Unlock() }
func (e *countEvents) Checked(int)         {}
func (e *countEvents) Progress(float64)    {}
func (e *countEvents) PassCompleted(time.Time) {
	e.mu.Lock()
	e.passes++
	e.mu.Unlock()
}

type fixture struct {
	t      testing.TB
	store  meta.Store
	nodes  *fakeNodes
	rg     *ring.Ring
	now    time.Time
	events *countEvents
	sw     *Sweeper
}

func newFixture(t testing.TB, o Options, all ...string) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	for _, n := range all {
		require.NoError(t, st.CreateNode(context.Background(), &meta.Node{ID: n, Host: n, Port: 1, Status: meta.NodeHealthy}))
	}
	f := &fixture{t: t, store: st, nodes: newFakeNodes(all...), rg: ring.New(100, all...), now: time.Unix(1_800_000_000, 0),
		events: &countEvents{found: map[Kind]int{}, fixed: map[Kind]int{}}}
	cl := fakeCluster{rg: f.rg}
	rec := reconcile.New(reconcile.Options{Store: st, Nodes: f.nodes, Cluster: cl, ReplicationFactor: 3})
	o.Store, o.Nodes, o.Cluster, o.Reconciler, o.Events = st, f.nodes, cl, rec, f.events
	o.Now = func() time.Time { return f.now }
	if o.OrphanGrace == 0 {
		o.OrphanGrace = time.Minute
	}
	if o.Rate == 0 {
		o.Rate = 1_000_000
	}
	f.sw, err = New(o)
	require.NoError(t, err)
	return f
}

// fileWithID stores a file under id where the ring wants it.
func (f *fixture) fileWithID(id string, data []byte) meta.FileRecord {
	f.t.Helper()
	return f.storeFile(id, data, f.rg.Preference(id, 3))
}

// file stores a file with bytes and ACTIVE rows on the given nodes (its
// preference list when none are given), the first its primary.
func (f *fixture) file(data []byte, on ...string) meta.FileRecord {
	f.t.Helper()
	id := uuid.NewString()
	if len(on) == 0 {
		on = f.rg.Preference(id, 3)
	}
	return f.storeFile(id, data, on)
}

func (f *fixture) storeFile(id string, data []byte, on []string) meta.FileRecord {
	f.t.Helper()
	sum := sha256.Sum256(data)
	rec := meta.FileRecord{File: meta.File{ID: id, Name: "f", ContentType: "application/octet-stream",
		SizeBytes: int64(len(data)), Checksum: hex.EncodeToString(sum[:]), Status: meta.FileActive,
		PrimaryNodeID: on[0], ReplicationFactor: 3, RingPosition: ring.Position(id)}}
	for _, n := range on {
		f.put(n, rec, data)
		rec.Replicas = append(rec.Replicas, meta.Replica{NodeID: n, Status: meta.ReplicaActive})
	}
	require.NoError(f.t, f.store.CreateFile(context.Background(), &rec))
	return rec
}

func (f *fixture) put(node string, rec meta.FileRecord, data []byte) {
	f.t.Helper()
	_, _, err := f.nodes.stores[node].Receive(context.Background(), rec.ID, rec.Checksum, rec.SizeBytes, bytes.NewReader(data))
	require.NoError(f.t, err)
}

// placed stores a file exactly where the ring wants it.
func (f *fixture) placed(data []byte) meta.FileRecord { return f.file(data) }

func (f *fixture) pass() Report {
	f.t.Helper()
	rep, err := f.sw.Pass(context.Background())
	require.NoError(f.t, err)
	require.True(f.t, rep.Complete)
	return rep
}

func (f *fixture) get(id string) meta.FileRecord {
	f.t.Helper()
	rec, err := f.store.GetFile(context.Background(), id)
	require.NoError(f.t, err)
	return rec
}

func activeNodes(rec meta.FileRecord) []string {
	var out []string
	for _, c := range rec.Replicas {
		if c.Status == meta.ReplicaActive {
			out = append(out, c.NodeID)
		}
	}
	return out
}

func TestPlacedFilesCostNoNodeCallButTheListing(t *testing.T) {
	f := newFixture(t, Options{PageSize: 4}, "A", "B", "C", "D")
	for i := range 40 {
		f.placed([]byte(fmt.Sprint("placed-", i)))
	}
	rep := f.pass()
	require.Equal(t, 40, rep.Checked)
	require.Empty(t, f.nodes.ops(), "nothing to fix, nothing written")
	for _, k := range Kinds {
		require.Zero(t, rep.Found[k], k)
	}
	require.Equal(t, 1, f.events.passes)
	const pages = 10
	for _, n := range []string{"A", "B", "C", "D"} {
		held, err := f.nodes.stores[n].Enumerate(context.Background(), "", 1000)
		require.NoError(t, err)
		// Each node's listing is read ahead in pages of its own: at most
		// one call per metadata page plus one per page of its blobs, never
		// one per file.
		require.LessOrEqual(t, f.nodes.lists[n], pages+(len(held)+3)/4, n)
	}
}

// Every kind of wrong state below is found by the sweep alone and put right
// by the reconciler, without any event.
func TestPassFindsAndFixesEveryKind(t *testing.T) {
	f := newFixture(t, Options{MoveMisplaced: true}, "A", "B", "C", "D")
	ctx := context.Background()

	good := f.placed([]byte("good"))

	// missing: an ACTIVE row on a node that lost the blob (a wiped disk).
	missing := f.placed([]byte("missing"))
	lost := missing.Replicas[1].NodeID
	require.NoError(t, f.nodes.stores[lost].Remove(ctx, missing.ID))

	// misplaced: a fourth ACTIVE copy whose removal failed earlier.
	surplus := f.placed([]byte("surplus"))
	spare := f.rg.Preference(surplus.ID, 4)[3]
	f.put(spare, surplus, []byte("surplus"))
	surplus.Replicas = append(surplus.Replicas, meta.Replica{NodeID: spare, Status: meta.ReplicaActive})
	require.NoError(t, f.store.UpdateFile(ctx, &surplus))

	// corrupt: a torn checksum sidecar.
	torn := f.placed([]byte("torn"))
	tornOn := torn.Replicas[0].NodeID
	f.nodes.torn[copyKey{torn.ID, tornOn}] = true

	// orphans: a blob of a file the metadata does not have, and an unlisted
	// copy of a file it has.
	ghost := uuid.NewString()
	_, _, err := f.nodes.stores["A"].Receive(ctx, ghost, hexSum("ghost"), 5, bytes.NewReader([]byte("ghost")))
	require.NoError(t, err)
	unlisted := f.placed([]byte("unlisted"))
	unlistedOn := f.rg.Preference(unlisted.ID, 4)[3]
	f.put(unlistedOn, unlisted, []byte("unlisted"))

	rep := f.pass()
	require.Equal(t, 1, rep.Found[Missing])
	require.Equal(t, 1, rep.Fixed[Missing])
	require.Equal(t, 1, rep.Found[Misplaced], "the surplus copy")
	require.Equal(t, 1, rep.Found[Corrupt])
	require.Zero(t, rep.Found[Orphan], "an orphan is only remembered in the pass that first sees it")

	require.True(t, f.nodes.holds(lost, missing.ID), "the missing copy was rebuilt")
	require.ElementsMatch(t, f.rg.Preference(missing.ID, 3), activeNodes(f.get(missing.ID)))
	require.False(t, f.nodes.holds(spare, surplus.ID), "the surplus copy was removed")
	require.Len(t, f.get(surplus.ID).Replicas, 3)
	require.Equal(t, meta.FileActive, f.get(torn.ID).Status)
	require.NotContains(t, f.nodes.torn, copyKey{torn.ID, tornOn}, "the torn copy was replaced")
	require.True(t, f.nodes.holds(tornOn, torn.ID))
	require.True(t, f.nodes.holds("A", ghost), "within the grace period an orphan is left alone")
	require.True(t, f.nodes.holds(unlistedOn, unlisted.ID))

	f.now = f.now.Add(30 * time.Second)
	rep = f.pass()
	require.Zero(t, rep.Found[Orphan], "still within the grace period")

	f.now = f.now.Add(31 * time.Second)
	rep = f.pass()
	require.Equal(t, 2, rep.Found[Orphan])
	require.Equal(t, 2, rep.Fixed[Orphan])
	require.False(t, f.nodes.holds("A", ghost), "a blob no file owns is removed after the grace period")
	require.False(t, f.nodes.holds(unlistedOn, unlisted.ID), "an unlisted surplus copy is removed")
	require.Len(t, f.get(unlisted.ID).Replicas, 3)

	rep = f.pass()
	for _, k := range Kinds {
		require.Zero(t, rep.Found[k], "converged: a further pass finds nothing (%s)", k)
	}
	require.True(t, reconcile.Placed(f.get(good.ID), f.rg.Preference(good.ID, 3)))
	require.Equal(t, map[Kind]int{Missing: 1, Misplaced: 1, Corrupt: 1, Orphan: 2}, f.events.found, "the events saw what the reports said")
	require.Equal(t, map[Kind]int{Missing: 1, Misplaced: 1, Corrupt: 1, Orphan: 2}, f.events.fixed)
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A node whose listing fails is not judged: none of its copies is called
// missing, and nothing it holds is called an orphan.
func TestUnlistableNodeIsNotJudged(t *testing.T) {
	f := newFixture(t, Options{}, "A", "B", "C")
	rec := f.placed([]byte("kept"))
	on := rec.Replicas[0].NodeID
	require.NoError(t, f.nodes.stores[on].Remove(context.Background(), rec.ID))
	f.nodes.listErr[on] = errs.E(errs.Unavailable, "node %s: connection refused", on)
	rep := f.pass()
	require.Zero(t, rep.Found[Missing], "a node that did not answer is not a node that lost its copies")
	delete(f.nodes.listErr, on)
	rep = f.pass()
	require.Equal(t, 1, rep.Found[Missing])
}

// With automatic rebalancing off, a file whose only fault is its placement
// is left to the operator; a missing copy is still rebuilt.
func TestMisplacedFilesAreLeftAloneWhenMovingIsOff(t *testing.T) {
	f := newFixture(t, Options{MoveMisplaced: false}, "A", "B", "C", "D")
	surplus := f.placed([]byte("surplus"))
	spare := f.rg.Preference(surplus.ID, 4)[3]
	f.put(spare, surplus, []byte("surplus"))
	surplus.Replicas = append(surplus.Replicas, meta.Replica{NodeID: spare, Status: meta.ReplicaActive})
	require.NoError(t, f.store.UpdateFile(context.Background(), &surplus))
	f.pass()
	require.True(t, f.nodes.holds(spare, surplus.ID))
	require.Empty(t, f.nodes.ops())
}

// failingStore fails FilesAfter once after a number of pages, the way a
// restart or a lost lease cuts a pass short.
type failingStore struct {
	meta.Store
	mu        sync.Mutex
	failAfter int
	pages     int
}

func (s *failingStore) FilesAfter(ctx context.Context, after string, limit int) ([]meta.FileRecord, error) {
	s.mu.Lock()
	s.pages++
	fail := s.pages == s.failAfter+1
	s.mu.Unlock()
	if fail {
		return nil, errs.E(errs.Unavailable, "metadata store: connection lost")
	}
	return s.Store.FilesAfter(ctx, after, limit)
}

func TestPassResumesFromItsCursor(t *testing.T) {
	f := newFixture(t, Options{PageSize: 3}, "A", "B", "C")
	for i := range 10 {
		f.placed([]byte(fmt.Sprint("file-", i)))
	}
	fs := &failingStore{Store: f.store, failAfter: 2}
	o := f.sw.o
	o.Store = fs
	sw, err := New(o)
	require.NoError(t, err)

	rep, err := sw.Pass(context.Background())
	require.Error(t, err)
	require.False(t, rep.Complete)
	require.Equal(t, 6, rep.Checked)
	st, err := sw.LoadState(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, st.Cursor, "the cursor survives the cut")

	// A new sweeper (a restarted coordinator) picks the pass up there.
	again, err := New(o)
	require.NoError(t, err)
	rep, err = again.Pass(context.Background())
	require.NoError(t, err)
	require.True(t, rep.Complete)
	require.Equal(t, 4, rep.Checked, "only the files after the cursor are checked again")
	st, err = again.LoadState(context.Background())
	require.NoError(t, err)
	require.Empty(t, st.Cursor)
	require.True(t, f.now.Equal(st.LastFullPassAt), "%v", st.LastFullPassAt)
}

func TestNextPassIsDueAnIntervalAfterTheLastStarted(t *testing.T) {
	f := newFixture(t, Options{Interval: 10 * time.Minute}, "A", "B", "C")
	require.Zero(t, f.sw.untilDue(context.Background()), "a sweep that never ran is due at once")
	f.pass()
	require.Equal(t, time.Minute, f.sw.untilDue(context.Background()), "checks back at least every minute")
	f.now = f.now.Add(9*time.Minute + 30*time.Second)
	require.Equal(t, 30*time.Second, f.sw.untilDue(context.Background()))
	f.now = f.now.Add(time.Minute)
	require.Zero(t, f.sw.untilDue(context.Background()))
}

// A coordinator that does not hold the sweep's lease does not spin on it
// while another coordinator's pass, visible through the shared cursor, runs.
func TestRunWaitsWhileAnotherCoordinatorSweeps(t *testing.T) {
	var asked atomic.Int64
	f := newFixture(t, Options{Interval: time.Hour, Lock: lease.LockerFunc(func(context.Context, string, time.Duration) (lease.Lease, bool, error) {
		asked.Add(1)
		return nil, false, nil
	})}, "A", "B", "C")
	require.NoError(t, f.sw.saveState(context.Background(), State{Cursor: "00000000-0000-4000-8000-000000000001", PassStartedAt: f.now}))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	f.sw.Run(ctx)
	require.Equal(t, int64(1), asked.Load(), "asked once, then waited")
}

// With no node on the ring there is nothing to compare against: the pass is
// skipped, and Run waits instead of asking again at once.
func TestEmptyRingIsSkipped(t *testing.T) {
	f := newFixture(t, Options{Interval: time.Hour}, "A", "B", "C")
	f.sw.o.Cluster = fakeCluster{rg: ring.New(100)}
	rep, err := f.sw.Pass(context.Background())
	require.NoError(t, err)
	require.True(t, rep.Skipped)
	var reads atomic.Int64
	f.sw.o.Store = &countingStateStore{Store: f.store, reads: &reads}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	f.sw.Run(ctx)
	require.LessOrEqual(t, reads.Load(), int64(2), "no spinning on an empty ring")
}

type countingStateStore struct {
	meta.Store
	reads *atomic.Int64
}

func (s *countingStateStore) GetState(ctx context.Context, key string) (string, error) {
	s.reads.Add(1)
	return s.Store.GetState(ctx, key)
}

// A copy that lands on a node after the node's listing reached its end, with
// a row in a later page, is not judged missing: a finished listing is asked
// again for the later range.
func TestCopiesWrittenDuringAPassAreNotCalledMissing(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2}, "A", "B", "C", "D")
	// ids of a given prefix, with or without node D in their preference list.
	pick := func(prefix string, withD bool, n int) []string {
		var out []string
		for i := 0; len(out) < n; i++ {
			id := fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i)
			if slices.Contains(f.rg.Preference(id, 3), "D") == withD {
				out = append(out, id)
			}
		}
		return out
	}
	// D's two blobs sort first, so its listing ends with the first page;
	// four more files follow on the other nodes only.
	for _, id := range append(pick("10000000", true, 2), pick("20000000", false, 4)...) {
		f.fileWithID(id, []byte(id))
	}
	late := pick("ffffffff", true, 1)[0]
	var once sync.Once
	f.nodes.afterList = func(ended bool) {
		if ended {
			// Its copies land on D once D's listing has ended; its row is in
			// the last metadata page.
			once.Do(func() { f.fileWithID(late, []byte("late")) })
		}
	}
	rep := f.pass()
	require.Equal(t, 7, rep.Checked)
	require.Zero(t, rep.Found[Missing], "%v", rep.Found)
}

// An orphan sighting that a whole pass does not renew is dropped, so a blob
// that comes back later starts its grace period afresh.
func TestUnseenOrphansAreForgotten(t *testing.T) {
	f := newFixture(t, Options{}, "A", "B", "C")
	ctx := context.Background()
	ghost := uuid.NewString()
	_, _, err := f.nodes.stores["A"].Receive(ctx, ghost, hexSum("ghost"), 5, bytes.NewReader([]byte("ghost")))
	require.NoError(t, err)
	f.pass()
	require.Len(t, f.sw.seen, 1)
	require.NoError(t, f.nodes.stores["A"].Remove(ctx, ghost))
	f.pass()
	require.Empty(t, f.sw.seen, "the blob went away: its sighting goes too")
	_, _, err = f.nodes.stores["A"].Receive(ctx, ghost, hexSum("ghost"), 5, bytes.NewReader([]byte("ghost")))
	require.NoError(t, err)
	f.now = f.now.Add(2 * time.Minute)
	rep := f.pass()
	require.Zero(t, rep.Found[Orphan], "back again: a new grace period, not the old sighting")
	require.True(t, f.nodes.holds("A", ghost))
}
