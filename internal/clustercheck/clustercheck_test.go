package clustercheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// The fake cluster: a coordinator and storage nodes as httptest servers
// over one state a test breaks in one way, so that each rule of the check
// is shown to catch what it is for.

type fakeFile struct {
	data    []byte
	status  client.FileStatus
	primary string
	rows    []client.Replica
	// served, when set, is what a download delivers instead of data.
	served []byte
}

type fakeBlob struct {
	data    []byte
	sidecar string // the checksum the node recorded; "" for a torn sidecar
}

type fake struct {
	t     *testing.T
	mu    sync.Mutex
	files map[string]*fakeFile
	disks map[string]map[string]*fakeBlob // node → id → blob
	ring  []string                        // nodes the coordinator has on its ring
	// broken nodes answer their listing with 500.
	broken map[string]bool
	// pageSize is how many blobs a node lists per page at most, whatever
	// the caller asks, so that paging is exercised.
	pageSize int
	// downloadStatus, when not 0, is what every download answers.
	downloadStatus int

	coord *httptest.Server
	nodes map[string]*httptest.Server
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

const rf = 3

// newFake starts a healthy cluster of nodes holding n files, each placed
// exactly by the ring.
func newFake(t *testing.T, nodes []string, n int) *fake {
	f := &fake{
		t: t, files: map[string]*fakeFile{}, disks: map[string]map[string]*fakeBlob{},
		ring: slices.Clone(nodes), broken: map[string]bool{}, pageSize: 3, nodes: map[string]*httptest.Server{},
	}
	rg := ring.New(100, nodes...)
	for _, node := range nodes {
		f.disks[node] = map[string]*fakeBlob{}
	}
	for i := range n {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		data := []byte(fmt.Sprintf("the bytes of file %d", i))
		pref := rg.Preference(id, rf)
		ff := &fakeFile{data: data, status: client.FileActive, primary: pref[0]}
		for _, node := range pref {
			ff.rows = append(ff.rows, client.Replica{NodeID: node, Status: client.CopyActive, Primary: node == pref[0]})
			f.disks[node][id] = &fakeBlob{data: data, sidecar: sum(data)}
		}
		f.files[id] = ff
	}
	f.coord = httptest.NewServer(http.HandlerFunc(f.serveCoordinator))
	t.Cleanup(f.coord.Close)
	for _, node := range nodes {
		f.addNodeServer(node)
	}
	return f
}

func (f *fake) addNodeServer(node string) {
	if f.disks[node] == nil {
		f.disks[node] = map[string]*fakeBlob{}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serveNode(node, w, r) }))
	f.t.Cleanup(srv.Close)
	f.nodes[node] = srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]any{"status": 404, "error": "FILE_NOT_FOUND", "message": "no such file", "path": r.URL.Path})
}

func (f *fake) fileJSON(id string, ff *fakeFile) client.File {
	return client.File{
		FileID: id, Checksum: sum(ff.data), SizeBytes: int64(len(ff.data)), Status: ff.status,
		PrimaryNode: ff.primary, ReplicationFactor: rf, Replicas: slices.Clone(ff.rows),
	}
}

func (f *fake) serveCoordinator(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.Path
	switch {
	case path == "/api/nodes":
		var out []client.Node
		for _, node := range slices.Sorted(maps.Keys(f.nodes)) {
			host, port, _ := net.SplitHostPort(strings.TrimPrefix(f.nodes[node].URL, "http://"))
			p, _ := strconv.Atoi(port)
			on := slices.Contains(f.ring, node)
			out = append(out, client.Node{NodeID: node, Host: host, Port: p, Status: client.NodeHealthy, OnRing: on})
		}
		writeJSON(w, http.StatusOK, out)
	case path == "/api/nodes/ring":
		writeJSON(w, http.StatusOK, client.RingInfo{PhysicalNodes: len(f.ring), VirtualNodesPerNode: 100, TotalRingPositions: 100 * len(f.ring)})
	case path == "/api/files":
		// Every file on one page; the checker asks for 1000 at a time.
		var items []client.File
		for _, id := range slices.Sorted(maps.Keys(f.files)) {
			it := f.fileJSON(id, f.files[id])
			it.Replicas = nil
			items = append(items, it)
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page > 0 {
			items = nil
		}
		writeJSON(w, http.StatusOK, client.FileList{Items: items, Page: page, Size: 1000, Total: len(f.files)})
	case strings.HasSuffix(path, "/metadata"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/api/files/"), "/metadata")
		ff, ok := f.files[id]
		if !ok {
			notFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, f.fileJSON(id, ff))
	case strings.HasPrefix(path, "/api/files/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(path, "/api/files/")
		ff, ok := f.files[id]
		switch {
		case !ok:
			notFound(w, r)
			return
		case f.downloadStatus != 0:
			writeJSON(w, f.downloadStatus, map[string]any{"status": f.downloadStatus, "error": "STORAGE_UNAVAILABLE", "message": "no holder answered", "path": path})
			return
		}
		body := ff.data
		if ff.served != nil {
			body = ff.served
		}
		w.Header().Set("X-Checksum-Sha256", sum(body))
		w.Header().Set("X-Served-By-Node", ff.primary)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	default:
		http.NotFound(w, r)
	}
}

func (f *fake) serveNode(node string, w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer secret" {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "UNAUTHORIZED"})
		return
	}
	disk := f.disks[node]
	switch {
	case r.URL.Path == wire.PathBlobs:
		if f.broken[node] {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "INTERNAL_ERROR", "message": "disk on fire"})
			return
		}
		after := r.URL.Query().Get("after")
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		limit = min(limit, f.pageSize)
		var page wire.BlobList
		page.Blobs = []wire.BlobInfo{}
		for _, id := range slices.Sorted(maps.Keys(disk)) {
			if id <= after {
				continue
			}
			if len(page.Blobs) == limit {
				page.Next = page.Blobs[limit-1].ID
				break
			}
			b := disk[id]
			page.Blobs = append(page.Blobs, wire.BlobInfo{ID: id, Size: int64(len(b.data)), Checksum: b.sidecar})
		}
		writeJSON(w, http.StatusOK, page)
	case strings.HasSuffix(r.URL.Path, "/checksum"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, wire.PathBlobs+"/"), "/checksum")
		b, ok := disk[id]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "BLOB_NOT_FOUND"})
			return
		}
		actual := sum(b.data)
		writeJSON(w, http.StatusOK, wire.ChecksumReport{
			ID: id, Size: int64(len(b.data)), StoredChecksum: b.sidecar, ActualChecksum: actual,
			Intact: b.sidecar != "" && b.sidecar == actual,
		})
	default:
		http.NotFound(w, r)
	}
}

// acked is every file of the fake as the client that uploaded it knows it.
func (f *fake) acked() []File {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []File
	for _, id := range slices.Sorted(maps.Keys(f.files)) {
		out = append(out, File{ID: id, SHA256: sum(f.files[id].data)})
	}
	return out
}

func (f *fake) options(files []File, deleted ...string) Options {
	api, err := client.New(f.coord.URL, client.Options{})
	require.NoError(f.t, err)
	urls := map[string]string{}
	for node, srv := range f.nodes {
		urls[node] = srv.URL
	}
	return Options{API: api, Nodes: urls, Token: "secret", Files: files, Deleted: deleted, Concurrency: 4}
}

func (f *fake) check(o Options) Report {
	f.t.Helper()
	rep, err := Check(context.Background(), o)
	require.NoError(f.t, err)
	f.t.Log(rep.String())
	return rep
}

// pick returns a file of the fake and its preference list, the first file
// whose list holds want (any file when want is empty).
func (f *fake) pick(want string) (string, []string) {
	rg := ring.New(100, f.ring...)
	for _, id := range slices.Sorted(maps.Keys(f.files)) {
		pref := rg.Preference(id, rf)
		if want == "" || slices.Contains(pref, want) {
			return id, pref
		}
	}
	f.t.Fatalf("no file has %s in its preference list", want)
	return "", nil
}

func (f *fake) notIn(pref []string) string {
	for _, n := range f.ring {
		if !slices.Contains(pref, n) {
			return n
		}
	}
	f.t.Fatal("every node is in the preference list")
	return ""
}

var fourNodes = []string{"node-1", "node-2", "node-3", "node-4"}

func TestHealthyClusterHolds(t *testing.T) {
	f := newFake(t, fourNodes, 20)
	for _, shallow := range []bool{false, true} {
		o := f.options(f.acked())
		o.Shallow = shallow
		rep := f.check(o)
		require.True(t, rep.OK(), rep.String())
		require.Equal(t, 20, rep.Files)
		require.Zero(t, rep.Unacknowledged)
		require.Equal(t, 4, rep.Nodes)
		// Three copies of each file, listed three at a time: paging was
		// followed to the end.
		require.Equal(t, 60, rep.Blobs)
		require.Equal(t, fourNodes, rep.Ring)
		require.Contains(t, rep.Summary(), "the invariant holds")
	}
}

// violationOf requires the report to hold a violation of kind k about file
// (and node, when not empty), and returns it.
func violationOf(t *testing.T, rep Report, k Kind, file, node string) Violation {
	t.Helper()
	for _, v := range rep.Violations {
		if v.Kind == k && v.File == file && (node == "" || v.Node == node) {
			return v
		}
	}
	t.Fatalf("no %s violation for file %q on %q in:\n%s", k, file, node, rep)
	return Violation{}
}

func TestEachRuleCatchesItsFault(t *testing.T) {
	type tc struct {
		name string
		// breakIt breaks the healthy fake and returns the file and node the
		// violation must name (node may be empty).
		breakIt func(f *fake) (file, node string)
		kind    Kind
		// deleted are the ids the caller says it deleted.
		deleted func(f *fake) []string
		// shallowToo says the shallow check must catch it as well.
		shallowToo bool
	}
	cases := []tc{
		{name: "wrong bytes read back", kind: KindRead, breakIt: func(f *fake) (string, string) {
			id, _ := f.pick("")
			f.files[id].served = []byte("other bytes, declared honestly")
			return id, ""
		}},
		{name: "a download that fails", kind: KindRead, breakIt: func(f *fake) (string, string) {
			id, _ := f.pick("")
			f.downloadStatus = http.StatusServiceUnavailable
			return id, ""
		}},
		{name: "degraded", kind: KindStatus, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, _ := f.pick("")
			f.files[id].status = client.FileDegraded
			return id, ""
		}},
		{name: "an acknowledged file lost from the metadata", kind: KindStatus, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			delete(f.files, id)
			for _, n := range pref {
				delete(f.disks[n], id)
			}
			return id, ""
		}},
		{name: "a copy on a node outside the preference list", kind: KindPlacement, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			other := f.notIn(pref)
			ff := f.files[id]
			ff.rows[2].NodeID = other
			f.disks[other][id] = f.disks[pref[2]][id]
			delete(f.disks[pref[2]], id)
			return id, ""
		}},
		{name: "a fourth ACTIVE copy", kind: KindPlacement, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			other := f.notIn(pref)
			f.files[id].rows = append(f.files[id].rows, client.Replica{NodeID: other, Status: client.CopyActive})
			f.disks[other][id] = &fakeBlob{data: f.files[id].data, sidecar: sum(f.files[id].data)}
			return id, ""
		}},
		{name: "two copies only", kind: KindPlacement, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			f.files[id].rows = f.files[id].rows[:2]
			delete(f.disks[pref[2]], id)
			return id, ""
		}},
		{name: "a FAILED copy row in the preference list", kind: KindPlacement, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			f.files[id].rows[1].Status = client.CopyFailed
			delete(f.disks[pref[1]], id)
			return id, ""
		}},
		{name: "the primary is not first", kind: KindPrimary, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			f.files[id].primary = pref[1]
			return id, ""
		}},
		{name: "an ACTIVE copy the node does not hold", kind: KindCopy, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			delete(f.disks[pref[1]], id)
			return id, pref[1]
		}},
		{name: "bytes on disk rotted under an intact-looking sidecar", kind: KindCopy, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			f.disks[pref[0]][id] = &fakeBlob{data: []byte("rotten"), sidecar: sum(f.files[id].data)}
			return id, pref[0]
		}},
		{name: "a torn (empty) sidecar", kind: KindCopy, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			f.disks[pref[2]][id].sidecar = ""
			return id, pref[2]
		}},
		{name: "a sidecar recording other bytes", kind: KindCopy, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			f.disks[pref[2]][id] = &fakeBlob{data: []byte("x"), sidecar: sum([]byte("x"))}
			return id, pref[2]
		}},
		{name: "a blob no file has", kind: KindOrphan, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id := "ffffffff-0000-4000-8000-000000000000"
			f.disks["node-2"][id] = &fakeBlob{data: []byte("left over"), sidecar: sum([]byte("left over"))}
			return id, "node-2"
		}},
		{name: "an intact blob under a FAILED row outside the preference list", kind: KindOrphan, shallowToo: true, breakIt: func(f *fake) (string, string) {
			id, pref := f.pick("")
			other := f.notIn(pref)
			f.files[id].rows = append(f.files[id].rows, client.Replica{NodeID: other, Status: client.CopyFailed})
			f.disks[other][id] = &fakeBlob{data: f.files[id].data, sidecar: sum(f.files[id].data)}
			return id, other
		}},
		{name: "a deleted file still on a node", kind: KindDeleted, shallowToo: true,
			deleted: func(*fake) []string { return []string{"dddddddd-0000-4000-8000-000000000000"} },
			breakIt: func(f *fake) (string, string) {
				id := "dddddddd-0000-4000-8000-000000000000"
				f.disks["node-3"][id] = &fakeBlob{data: []byte("gone"), sidecar: sum([]byte("gone"))}
				return id, "node-3"
			}},
		{name: "a deleted file still in the metadata", kind: KindDeleted, shallowToo: true,
			deleted: func(f *fake) []string { id, _ := f.pick(""); return []string{id} },
			breakIt: func(f *fake) (string, string) {
				id, _ := f.pick("")
				f.files[id].status = client.FileDeleted
				return id, ""
			}},
		{name: "a node that cannot list", kind: KindNode, shallowToo: true, breakIt: func(f *fake) (string, string) {
			f.broken["node-4"] = true
			return "", "node-4"
		}},
		{name: "a running node off the ring that holds a copy", kind: KindOrphan, shallowToo: true, breakIt: func(f *fake) (string, string) {
			f.addNodeServer("node-5")
			id, _ := f.pick("")
			f.disks["node-5"][id] = &fakeBlob{data: f.files[id].data, sidecar: sum(f.files[id].data)}
			return id, "node-5"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, fourNodes, 12)
			files := f.acked()
			var deleted []string
			if c.deleted != nil {
				deleted = c.deleted(f)
			}
			f.mu.Lock()
			file, node := c.breakIt(f)
			f.mu.Unlock()
			rep := f.check(f.options(files, deleted...))
			require.False(t, rep.OK())
			v := violationOf(t, rep, c.kind, file, node)
			require.Contains(t, rep.String(), v.String(), "every violation is in the report's text")

			o := f.options(files, deleted...)
			o.Shallow = true
			shallow := f.check(o)
			if c.shallowToo {
				violationOf(t, shallow, c.kind, file, node)
			} else {
				require.Zero(t, shallow.Count(c.kind), "the shallow check reads no bytes: %s", shallow)
			}
		})
	}
}

func TestUnacknowledgedFilesAreHeldToTheSameRules(t *testing.T) {
	f := newFake(t, fourNodes, 10)
	files := f.acked()
	// The client never heard back about the last two, and the second of
	// them is misplaced.
	stray := files[len(files)-1].ID
	f.mu.Lock()
	f.files[stray].primary = "node-9"
	f.mu.Unlock()
	rep := f.check(f.options(files[:len(files)-2]))
	require.Equal(t, 10, rep.Files)
	require.Equal(t, 2, rep.Unacknowledged)
	require.Len(t, rep.Violations, 1, rep.String())
	violationOf(t, rep, KindPrimary, stray, "")
}

func TestTheRingIsTheCoordinators(t *testing.T) {
	// The coordinator dropped node-4 from its ring, yet the files still
	// sit where a four-node ring puts them: most are misplaced now.
	f := newFake(t, fourNodes, 12)
	f.mu.Lock()
	f.ring = fourNodes[:3]
	f.mu.Unlock()
	rep := f.check(f.options(f.acked()))
	require.Equal(t, []string{"node-1", "node-2", "node-3"}, rep.Ring)
	require.NotZero(t, rep.Count(KindPlacement), rep.String())
}

func TestReportLinesAreBounded(t *testing.T) {
	rep := Report{Violations: []Violation{
		{Kind: KindOrphan, File: "a", Node: "node-1", Detail: "x"},
		{Kind: KindOrphan, File: "b", Node: "node-1", Detail: "y"},
		{Kind: KindNode, Node: "node-2", Detail: "z"},
	}}
	require.Equal(t, 2, rep.Count(KindOrphan))
	out := rep.Lines(1)
	require.Contains(t, out, "3 violations (node 1, orphan 2)")
	require.Contains(t, out, "orphan file a on node-1: x")
	require.Contains(t, out, "… and 2 more")
	require.NotContains(t, out, "file b")
}

func TestOptionsNeedAClient(t *testing.T) {
	_, err := Check(context.Background(), Options{})
	require.Error(t, err)
}

func TestVirtualNodesMustBeTheCoordinators(t *testing.T) {
	f := newFake(t, fourNodes, 4)
	o := f.options(f.acked())
	o.VNodes = 100
	require.True(t, f.check(o).OK())
	// Told another count, the check would misjudge every placement: it
	// refuses rather than report nonsense.
	o.VNodes = 10
	_, err := Check(context.Background(), o)
	require.ErrorContains(t, err, "100 virtual nodes")
}
