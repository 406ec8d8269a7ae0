package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
)

// fakeAnswer is an error answer a fake route gives instead of its work.
type fakeAnswer struct {
	status int
	code   string
	msg    string
}

// fakeCoordinator serves the coordinator's REST API from memory, with knobs
// for the answers the CLI must handle: forced errors per route, corrupt
// downloads, degraded uploads, pending deletes and the cluster's health.
type fakeCoordinator struct {
	srv *httptest.Server

	mu    sync.Mutex
	files map[string]*fakeFile
	order []string // ids, oldest first
	// fail forces an answer on a route, keyed by its pattern ("GET /api/nodes").
	fail          map[string]fakeAnswer
	corrupt       bool              // downloads declare a checksum the bytes do not have
	fromCache     bool              // downloads say they came from the content cache
	uploadStatus  client.FileStatus // default ACTIVE
	uploadReason  string
	deletePending []string // nodes a delete cannot reach
	verifyStatus  client.FileStatus
	health        client.HealthReport
	rebalance     client.RebalanceReport
	uploads       int    // uploads that reached the handler
	userAgent     string // of the latest request
	deregistered  map[string]bool
	drainLeft     int      // files a drain reports still on the node
	drainQueries  []string // the query of every deregistration
	drainUnsafe   []string // why a drain is not safe; none means it is
	durability    client.DurabilityReport
	scrub         *client.ScrubReport // nil: the coordinator has no scrub route
	sessions      fakeSessions
	chunkSize     int // above 0: larger files are stored as chunks of this size, each on node-1, node-2 and node-3
	placement     map[string]*fakePlacement
	placements    []string // the body of every placement request
	ringInfo      client.RingInfo
}

// fakePlacement is a node's own zone and weight and an operator's
// overrides of them.
type fakePlacement struct {
	zone           string
	weight         float64
	zoneOverride   *string
	weightOverride *float64
}

// applyPlacement fills in n's zone, weight and points as the coordinator
// would; it holds f.mu.
func (f *fakeCoordinator) applyPlacement(n *client.Node) {
	p := f.placement[n.NodeID]
	n.Zone, n.Weight, n.ReportedZone, n.ReportedWeight, n.Overridden = p.zone, p.weight, p.zone, p.weight, nil
	if p.zoneOverride != nil {
		n.Zone, n.Overridden = *p.zoneOverride, append(n.Overridden, "zone")
	}
	if p.weightOverride != nil {
		n.Weight, n.Overridden = *p.weightOverride, append(n.Overridden, "weight")
	}
	n.Points = 0
	if n.OnRing {
		n.Points = max(1, int(100*n.Weight+0.5))
	}
}

type fakeFile struct {
	meta client.File
	data []byte
}

func newFakeCoordinator(t *testing.T) *fakeCoordinator {
	t.Helper()
	f := &fakeCoordinator{
		files:        map[string]*fakeFile{},
		deregistered: map[string]bool{},
		fail:         map[string]fakeAnswer{},
		uploadStatus: client.FileActive,
		verifyStatus: client.FileActive,
		health:       client.HealthReport{Status: client.HealthUp, ReplicationFactor: 3, Nodes: client.NodeCounts{Total: 3, OnRing: 3, Healthy: 3}},
		rebalance:    client.RebalanceReport{Trigger: client.TriggerManual, UnrecoverableFiles: []string{}},
		placement:    map[string]*fakePlacement{"node-1": {zone: "zone-a", weight: 1}, "node-2": {weight: 1}},
		ringInfo: client.RingInfo{PhysicalNodes: 1, VirtualNodesPerNode: 100, TotalRingPositions: 100,
			Nodes: []client.RingShare{{NodeID: "node-1", KeyspaceSharePercent: 100, Zone: "zone-a", Weight: 1, Points: 100}},
			Zones: []client.ZoneShare{{Zone: "zone-a", KeyspaceSharePercent: 100, Nodes: 1}}},
	}
	mux := http.NewServeMux()
	route := func(pattern string, h http.HandlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "req-fake-1")
			f.mu.Lock()
			forced, ok := f.fail[pattern]
			f.userAgent = r.UserAgent()
			f.mu.Unlock()
			if ok {
				httpx.WriteErrorCode(w, r, forced.status, forced.code, forced.msg)
				return
			}
			h(w, r)
		})
	}
	route("POST /api/files", f.upload)
	route("GET /api/files", f.list)
	route("GET /api/files/{id}", f.download)
	route("GET /api/files/{id}/metadata", f.metadata)
	route("DELETE /api/files/{id}", f.delete)
	route("POST /api/files/{id}/verify", f.verify)
	route("GET /api/nodes", f.nodes)
	route("GET /api/nodes/ring", f.ring)
	route("DELETE /api/nodes/{id}", f.deregister)
	route("POST /api/nodes/{id}/rejoin", f.rejoin)
	route("PUT /api/nodes/{id}/placement", f.setPlacement)
	route("GET /api/health", f.clusterHealth)
	route("POST /api/admin/rebalance", f.runRebalance)
	route("GET /api/cluster/durability", f.clusterDurability)
	route("GET /api/cluster/scrub", f.clusterScrub)
	f.routeSessions(route)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// add stores a file directly and returns its id.
func (f *fakeCoordinator) add(name string, data []byte) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(name, "application/octet-stream", data)
}

func (f *fakeCoordinator) addLocked(name, ctype string, data []byte) string {
	sum := sha256.Sum256(data)
	id := uuid.NewString()
	now := time.Now().UTC()
	f.files[id] = &fakeFile{data: data, meta: client.File{
		FileID: id, FileName: name, ContentType: ctype, SizeBytes: int64(len(data)),
		Checksum: hex.EncodeToString(sum[:]), Status: f.uploadStatus, Reason: f.uploadReason,
		PrimaryNode: "node-1", ReplicationFactor: 3, CreatedAt: now, UpdatedAt: now,
		Replicas: []client.Replica{
			{NodeID: "node-1", Status: client.CopyActive, Primary: true, CreatedAt: now, UpdatedAt: now},
			{NodeID: "node-2", Status: client.CopyActive, CreatedAt: now, UpdatedAt: now},
		},
	}}
	if f.chunkSize > 0 && len(data) > f.chunkSize {
		f.chunkLocked(&f.files[id].meta, data)
	}
	f.order = append(f.order, id)
	return id
}

// chunkLocked stores m as a chunked file: the file has no copies of its
// own, each chunk three ACTIVE ones.
func (f *fakeCoordinator) chunkLocked(m *client.File, data []byte) {
	m.Replicas = nil
	for i, off := 0, 0; off < len(data); i, off = i+1, off+f.chunkSize {
		end := min(off+f.chunkSize, len(data))
		sum := sha256.Sum256(data[off:end])
		c := client.Chunk{Index: i, ChunkID: uuid.NewString(), Offset: int64(off), SizeBytes: int64(end - off),
			Checksum: hex.EncodeToString(sum[:]), Status: client.FileActive}
		for _, n := range []string{"node-3", "node-1", "node-2"} {
			c.Replicas = append(c.Replicas, client.Replica{NodeID: n, Status: client.CopyActive, Primary: n == "node-3"})
		}
		m.Chunks = append(m.Chunks, c)
	}
}

func (f *fakeCoordinator) file(w http.ResponseWriter, r *http.Request) *fakeFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	ff, ok := f.files[r.PathValue("id")]
	if !ok {
		httpx.WriteErrorCode(w, r, http.StatusNotFound, errs.CodeFileNotFound, "file "+r.PathValue("id")+" not found")
		return nil
	}
	return ff
}

func (f *fakeCoordinator) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
		return
	}
	part, err := mr.NextPart()
	if err != nil {
		httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
		return
	}
	data, err := io.ReadAll(part)
	if err != nil {
		httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
		return
	}
	f.mu.Lock()
	f.uploads++
	id := f.addLocked(part.FileName(), part.Header.Get("Content-Type"), data)
	m := f.files[id].meta
	f.mu.Unlock()
	res := client.UploadResult{
		FileID: m.FileID, FileName: m.FileName, ContentType: m.ContentType, SizeBytes: m.SizeBytes,
		Checksum: m.Checksum, Status: m.Status, PrimaryNode: m.PrimaryNode, Replicas: []string{"node-2"},
		ReplicationFactor: 3, CreatedAt: m.CreatedAt, Reason: m.Reason,
	}
	if len(m.Chunks) > 0 {
		res.Replicas = []string{}
	}
	httpx.WriteJSON(w, http.StatusCreated, res)
}

func (f *fakeCoordinator) list(w http.ResponseWriter, r *http.Request) {
	if st := r.URL.Query().Get("status"); st != "" && st != "ACTIVE" {
		httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, fmt.Sprintf("unknown status %q", st))
		return
	}
	size := 20
	if s := r.URL.Query().Get("size"); s != "" {
		size, _ = strconv.Atoi(s)
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	f.mu.Lock()
	defer f.mu.Unlock()
	items := []client.File{}
	for i := len(f.order) - 1 - page*size; i >= 0 && len(items) < size; i-- {
		m := f.files[f.order[i]].meta
		m.Replicas = nil
		items = append(items, m)
	}
	httpx.WriteJSON(w, http.StatusOK, client.FileList{Items: items, Page: page, Size: size, Total: len(f.order)})
}

func (f *fakeCoordinator) download(w http.ResponseWriter, r *http.Request) {
	ff := f.file(w, r)
	if ff == nil {
		return
	}
	f.mu.Lock()
	checksum := ff.meta.Checksum
	if f.corrupt {
		checksum = "00" + checksum[2:]
	}
	fromCache := f.fromCache
	f.mu.Unlock()
	h := w.Header()
	h.Set("Content-Length", strconv.Itoa(len(ff.data)))
	h.Set("Content-Type", ff.meta.ContentType)
	h.Set("ETag", `"`+checksum+`"`)
	h.Set("X-Checksum-Sha256", checksum)
	if fromCache {
		h.Set("X-Served-From", "content-cache")
	} else {
		h.Set("X-Served-By-Node", "node-2")
	}
	w.Write(ff.data)
}

func (f *fakeCoordinator) metadata(w http.ResponseWriter, r *http.Request) {
	if ff := f.file(w, r); ff != nil {
		httpx.WriteJSON(w, http.StatusOK, ff.meta)
	}
}

func (f *fakeCoordinator) delete(w http.ResponseWriter, r *http.Request) {
	ff := f.file(w, r)
	if ff == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, ff.meta.FileID)
	for i, id := range f.order {
		if id == ff.meta.FileID {
			f.order = append(f.order[:i], f.order[i+1:]...)
			break
		}
	}
	if len(f.deletePending) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, client.DeleteResult{
		FileID: ff.meta.FileID, Status: client.FileDeleted, PendingNodes: f.deletePending, Message: "later",
	})
}

func (f *fakeCoordinator) verify(w http.ResponseWriter, r *http.Request) {
	ff := f.file(w, r)
	if ff == nil {
		return
	}
	f.mu.Lock()
	status := f.verifyStatus
	f.mu.Unlock()
	res := client.VerifyResult{FileID: ff.meta.FileID, Checksum: ff.meta.Checksum, Status: status, HealthyCopies: 2, Copies: []client.CopyCheck{
		{NodeID: "node-1", Result: client.CheckOK, Status: client.CopyActive},
		{NodeID: "node-2", Result: client.CheckCorrupt, Rebuilt: true, Status: client.CopyActive},
	}}
	if status != client.FileActive {
		res.Copies = append(res.Copies, client.CopyCheck{NodeID: "node-3", Result: client.CheckUnreachable, Error: "connection refused"})
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

func (f *fakeCoordinator) nodes(w http.ResponseWriter, _ *http.Request) {
	checked := time.Now().Add(-3 * time.Second)
	nodes := []client.Node{
		{NodeID: "node-1", Host: "127.0.0.1", Port: 9001, Status: client.NodeHealthy, OnRing: true, KeyspaceSharePercent: 32.4, LastCheckAt: &checked,
			BlobCount: ptr(int64(12)), BytesUsed: ptr(int64(3 << 20)), FreeBytes: ptr(int64(5 << 30))},
		{NodeID: "node-2", Host: "127.0.0.1", Port: 9002, Status: client.NodeUnhealthy, KeyspaceSharePercent: 0, ConsecutiveFailures: 4},
	}
	f.mu.Lock()
	for i := range nodes {
		f.applyPlacement(&nodes[i])
	}
	f.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, nodes)
}

// setPlacement applies an operator's zone and weight, refusing what the
// coordinator refuses.
func (f *fakeCoordinator) setPlacement(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.placements = append(f.placements, string(body))
	n, ok := f.node(w, r)
	if !ok {
		return
	}
	var req client.PlacementRequest
	if err := json.Unmarshal(body, &req); err != nil {
		httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
		return
	}
	if err := client.CheckPlacement(req); err != nil {
		httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
		return
	}
	p := f.placement[n.NodeID]
	if req.Zone != nil {
		p.zoneOverride = req.Zone
	}
	if req.Weight != nil {
		p.weightOverride = req.Weight
	}
	for _, what := range req.Reset {
		if what == "zone" {
			p.zoneOverride = nil
		} else {
			p.weightOverride = nil
		}
	}
	f.applyPlacement(&n)
	httpx.WriteJSON(w, http.StatusOK, n)
}

// node finds a known node, answering 404 for any other; it holds f.mu.
func (f *fakeCoordinator) node(w http.ResponseWriter, r *http.Request) (client.Node, bool) {
	id := r.PathValue("id")
	if id != "node-1" && id != "node-2" {
		httpx.WriteErrorCode(w, r, http.StatusNotFound, errs.CodeNodeNotFound, "node "+id+" not found")
		return client.Node{}, false
	}
	n := client.Node{NodeID: id, Host: "127.0.0.1", Port: 9000, Status: client.NodeHealthy, OnRing: true}
	if f.deregistered[id] {
		n.Status, n.OnRing = client.NodeDeregistered, false
	}
	f.applyPlacement(&n)
	return n, true
}

func (f *fakeCoordinator) deregister(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drainQueries = append(f.drainQueries, r.URL.RawQuery)
	n, ok := f.node(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("dryRun") == "true" {
		free := int64(3 << 30)
		httpx.WriteJSON(w, http.StatusOK, client.DrainPlan{Node: n.NodeID, Safe: len(f.drainUnsafe) == 0,
			Reasons: append([]string{}, f.drainUnsafe...), Files: 4, Bytes: 6 << 20, FilesOnNode: 4, BytesOnNode: 6 << 20,
			RemainingNodes: 3, ReplicationFactor: 3, SoleCopies: []string{},
			Targets: []client.DrainTarget{{NodeID: "node-1", Files: 4, Bytes: 6 << 20, FreeBytes: &free}, {NodeID: "node-3", Files: 1, Bytes: 1}}})
		return
	}
	if len(f.drainUnsafe) > 0 && r.URL.Query().Get("force") != "true" && !f.deregistered[n.NodeID] {
		httpx.WriteErrorCode(w, r, http.StatusConflict, errs.CodeUnsafeDrain,
			"draining node "+n.NodeID+" is not safe: "+strings.Join(f.drainUnsafe, "; ")+"; force=true drains it anyway")
		return
	}
	f.deregistered[n.NodeID] = true
	n.Status, n.OnRing = client.NodeDeregistered, false
	res := client.DeregisterResult{Node: n, Drain: client.DrainReport{Node: n.NodeID, FilesRemaining: f.drainLeft, PendingUploads: 1}}
	status := http.StatusAccepted
	if f.drainLeft > 0 && r.URL.Query().Get("wait") != "true" {
		eta := 7.4
		res.Drain.Progress = &client.RunProgress{FilesDone: 3, FilesTotal: 10, BytesCopied: 3 << 20, BytesPerSecond: 1 << 20, EtaSeconds: &eta}
	}
	if r.URL.Query().Get("wait") == "true" {
		res.Drain.Complete = f.drainLeft == 0
		res.Drain.Run = &client.RebalanceReport{Trigger: client.TriggerDeregistered, FilesScanned: 9, FilesAffected: 4,
			CopiesCreated: 4, CopiesRemoved: 4, UnrecoverableFiles: []string{}, DurationMs: 1500}
		if res.Drain.Complete {
			status = http.StatusOK
		}
	}
	httpx.WriteJSON(w, status, res)
}

func (f *fakeCoordinator) rejoin(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.node(w, r)
	if !ok {
		return
	}
	if !f.deregistered[n.NodeID] {
		httpx.WriteErrorCode(w, r, http.StatusConflict, errs.CodeConflict, "node "+n.NodeID+" is HEALTHY, not deregistered")
		return
	}
	delete(f.deregistered, n.NodeID)
	n.Status, n.OnRing = client.NodeUnhealthy, false
	httpx.WriteJSON(w, http.StatusOK, n)
}

func (f *fakeCoordinator) ring(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	ring := f.ringInfo
	f.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, ring)
}

func (f *fakeCoordinator) clusterHealth(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	h := f.health
	f.mu.Unlock()
	status := http.StatusOK
	if h.Status == client.HealthDown {
		status = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, status, h)
}

func (f *fakeCoordinator) runRebalance(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	rep := f.rebalance
	f.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, rep)
}

func ptr[T any](v T) *T { return &v }

func (f *fakeCoordinator) clusterDurability(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	d := f.durability
	f.mu.Unlock()
	httpx.WriteJSON(w, http.StatusOK, d)
}

func (f *fakeCoordinator) clusterScrub(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	sc := f.scrub
	f.mu.Unlock()
	if sc == nil {
		httpx.NotFoundHandler(w, r)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, sc)
}
