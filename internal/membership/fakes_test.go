package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// memStore is an in-memory Store with the real one's optimistic locking.
type memStore struct {
	mu    sync.Mutex
	nodes map[string]meta.Node
	// beforeUpdate, when set, runs under the lock before UpdateNode checks the
	// version, so a test can play a second writer that gets in first.
	beforeUpdate func(stored *meta.Node)
	// beforeCreate, when set, runs under the lock before CreateNode checks
	// for an existing row.
	beforeCreate func()
	updates      int
	// epoch is the membership epoch; failBump, when set, is what bumping it
	// answers instead.
	epoch    int64
	failBump error
	// ops logs "bump <epoch>" and "update <node> <status>" in the order the
	// store saw them, so a test can tell that a change bumped the epoch
	// once, before it wrote the node.
	ops []string
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{nodes: map[string]meta.Node{}} }

func (s *memStore) CreateNode(_ context.Context, n *meta.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.beforeCreate != nil {
		s.beforeCreate()
	}
	if _, ok := s.nodes[n.ID]; ok {
		return errs.E(errs.Conflict, "node %s exists", n.ID)
	}
	n.Version = 1
	s.nodes[n.ID] = clone(*n)
	return nil
}

func (s *memStore) GetNode(_ context.Context, id string) (meta.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[id]
	if !ok {
		return meta.Node{}, errs.E(errs.NotFound, "node %s not found", id)
	}
	return clone(n), nil
}

func (s *memStore) ListNodes(context.Context) ([]meta.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]meta.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, clone(n))
	}
	slices.SortFunc(out, func(a, b meta.Node) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *memStore) UpdateNode(_ context.Context, n *meta.Node) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	cur, ok := s.nodes[n.ID]
	if !ok {
		return errs.E(errs.NotFound, "node %s not found", n.ID)
	}
	if s.beforeUpdate != nil {
		s.beforeUpdate(&cur)
		s.nodes[n.ID] = cur
	}
	if cur.Version != n.Version {
		return errs.E(errs.Conflict, "node %s: stale version %d, stored %d", n.ID, n.Version, cur.Version)
	}
	n.Version++
	s.nodes[n.ID] = clone(*n)
	s.ops = append(s.ops, fmt.Sprintf("update %s %s", n.ID, n.Status))
	return nil
}

func (s *memStore) BumpMembershipEpoch(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failBump != nil {
		return 0, s.failBump
	}
	s.epoch++
	s.ops = append(s.ops, fmt.Sprintf("bump %d", s.epoch))
	return s.epoch, nil
}

func (s *memStore) MarkNodeCopiesLost(_ context.Context, nodeID, _ string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, "lost "+nodeID)
	return nil, nil
}

// takeOps returns the bumps and node writes since the last call.
func (s *memStore) takeOps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ops
	s.ops = nil
	return out
}

// bumps counts the epoch bumps so far.
func (s *memStore) bumps() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// put stores n as is, for setting up a state directly.
func (s *memStore) put(n meta.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.Version == 0 {
		n.Version = 1
	}
	s.nodes[n.ID] = clone(n)
}

func clone(n meta.Node) meta.Node {
	if n.LastCheckAt != nil {
		t := *n.LastCheckAt
		n.LastCheckAt = &t
	}
	if n.LastHealthyAt != nil {
		t := *n.LastHealthyAt
		n.LastHealthyAt = &t
	}
	return n
}

// fakeProber answers per base URL as scripted; unscripted URLs are healthy
// and report no disk identity.
type fakeProber struct {
	mu      sync.Mutex
	down    map[string]error
	hang    map[string]bool
	disks   map[string]string
	calls   map[string]int
	onProbe func(baseURL string) // runs at the start of every probe
}

var _ Prober = (*fakeProber)(nil)

var errDown = errors.New("connection refused")

func newFakeProber() *fakeProber {
	return &fakeProber{down: map[string]error{}, hang: map[string]bool{}, disks: map[string]string{}, calls: map[string]int{}}
}

func (p *fakeProber) Ready(ctx context.Context, baseURL string) (string, error) {
	p.mu.Lock()
	p.calls[baseURL]++
	err, hang, hook := p.down[baseURL], p.hang[baseURL], p.onProbe
	p.mu.Unlock()
	if hook != nil {
		hook(baseURL)
	}
	if hang {
		<-ctx.Done()
		return "", ctx.Err()
	}
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.disks[baseURL], nil
}

// setDisk scripts the disk identity url reports when healthy.
func (p *fakeProber) setDisk(url, disk string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.disks[url] = disk
}

// set scripts the answer for url: nil is healthy.
func (p *fakeProber) set(url string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.down, url)
	} else {
		p.down[url] = err
	}
}

func (p *fakeProber) setHang(url string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang[url] = true
}

func (p *fakeProber) count(url string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[url]
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logRecorder keeps every log record for assertions.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// matching returns the messages at level that contain substr.
func (l *logRecorder) matching(level slog.Level, substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, substr) {
			out = append(out, r.Message)
		}
	}
	return out
}

// eventLog collects events.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (e *eventLog) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, ev)
}

// take returns "KIND node" for every event since the last take.
func (e *eventLog) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.events {
		out = append(out, string(ev.Kind)+" "+ev.Node.ID)
	}
	e.events = nil
	return out
}

// takeEpochs is take with each event's epoch: "KIND node @epoch".
func (e *eventLog) takeEpochs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.events {
		out = append(out, fmt.Sprintf("%s %s @%d", ev.Kind, ev.Node.ID, ev.Epoch))
	}
	e.events = nil
	return out
}

// harness is a Registry over fakes.
type harness struct {
	reg    *Registry
	store  *memStore
	prober *fakeProber
	clock  *fakeClock
	events *eventLog
	logs   *logRecorder
}

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{
		store:  newMemStore(),
		prober: newFakeProber(),
		clock:  &fakeClock{t: epoch},
		events: &eventLog{},
		logs:   &logRecorder{},
	}
	o := Options{
		Store:   h.store,
		Prober:  h.prober,
		VNodes:  10,
		Logger:  slog.New(h.logs),
		Now:     h.clock.now,
		OnEvent: h.events.add,
	}
	if mod != nil {
		mod(&o)
	}
	reg, err := New(o)
	require.NoError(t, err)
	h.reg = reg
	return h
}

// sweep runs one sweep, advancing the clock first so each check has its own time.
func (h *harness) sweep(t *testing.T) []NodeHealth {
	t.Helper()
	h.clock.advance(10 * time.Second)
	out, err := h.reg.Sweep(context.Background())
	require.NoError(t, err)
	return out
}

func (h *harness) register(t *testing.T, id string, port int) meta.Node {
	t.Helper()
	return h.registerDisk(t, id, port, "")
}

// registerDisk registers id reporting the disk identity disk.
func (h *harness) registerDisk(t *testing.T, id string, port int, disk string) meta.Node {
	t.Helper()
	n, err := h.reg.Register(context.Background(), Announcement{NodeID: id, Host: "127.0.0.1", Port: port, DiskID: disk})
	require.NoError(t, err)
	return n
}

// healthyNode registers id and sweeps until it is on the ring.
func (h *harness) healthyNode(t *testing.T, id string, port int) {
	t.Helper()
	h.register(t, id, port)
	for range h.reg.okThresh {
		h.sweep(t)
	}
	require.True(t, h.reg.Ring().Has(id), "%s should be on the ring", id)
	h.events.take()
}

func (h *harness) node(t *testing.T, id string) meta.Node {
	t.Helper()
	n, err := h.store.GetNode(context.Background(), id)
	require.NoError(t, err)
	return n
}

// requireRingMatchesStore asserts the invariant: the ring holds exactly the
// HEALTHY nodes of the store.
func (h *harness) requireRingMatchesStore(t *testing.T) {
	t.Helper()
	requireRingMatches(t, h.reg, h.store)
}

func requireRingMatches(t *testing.T, reg *Registry, s Store) {
	t.Helper()
	nodes, err := s.ListNodes(context.Background())
	require.NoError(t, err)
	var healthy []string
	for _, n := range nodes {
		if n.Status == meta.NodeHealthy {
			healthy = append(healthy, n.ID)
		}
	}
	require.Equal(t, healthy, nonNil(reg.Ring().Nodes()))
}

func nonNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func url(port int) string { return baseURL("127.0.0.1", port) }
