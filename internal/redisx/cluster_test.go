//go:build unix

package redisx

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/lease/leasetest"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv"
)

// clusterFixture is a three-master Redis Cluster and coordinators' clients
// on it, each given the nodes in another order, with one key prefix.
type clusterFixture struct {
	rc      *redistest.Cluster
	prefix  string
	clients []*Client
	logs    []*testenv.SyncBuffer // each client's log, and its lockers'
}

func newClusterFixture(t *testing.T, clients int) *clusterFixture {
	t.Helper()
	f := &clusterFixture{rc: redistest.StartCluster(t, 3), prefix: "dfstest:" + newToken() + ":"}
	for i := range clients {
		addrs := f.rc.Addrs()
		for range i {
			addrs = append(addrs[1:], addrs[0])
		}
		log := &testenv.SyncBuffer{}
		// A dead master refuses connections at once; a longer command
		// timeout than the default only keeps a loaded machine's stalls
		// from failing calls to the live ones.
		c, err := OpenCluster(ctxT(t), addrs, Options{
			KeyPrefix: f.prefix, CommandTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(log, nil)),
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.Ping(ctxT(t)))
		f.clients = append(f.clients, c)
		f.logs = append(f.logs, log)
	}
	return f
}

// node is the address of the master that holds key.
func (f *clusterFixture) node(t testing.TB, key string) string {
	t.Helper()
	n, err := f.clients[0].nodeOf(ctxT(t), key)
	require.NoError(t, err)
	return n
}

func TestOpenClusterRefusesABadList(t *testing.T) {
	for _, addrs := range [][]string{nil, {"redis-a"}, {"redis-a:7000", "redis-a:7000"}, {"redis-a:70000"}} {
		_, err := OpenCluster(ctxT(t), addrs, Options{})
		require.ErrorContains(t, err, "REDIS_CLUSTER_ADDRS", "%q", addrs)
	}
}

// TestClusterLeasesCachesAndInvalidations runs what dfs keeps in Redis on a
// three-master cluster: the lease conformance suite, the record cache with
// its multi-key scripts and MGET (whose keys share a hash tag), and invalidations confirmed by receivers that
// reached the cluster through different nodes.
func TestClusterLeasesCachesAndInvalidations(t *testing.T) {
	f := newClusterFixture(t, 3)
	a, b := f.clients[0], f.clients[1]

	t.Run("keys of one file share a slot", func(t *testing.T) {
		s := NewCachedStore(openSQLite(t), a, CacheOptions{})
		nodes := map[string]bool{}
		for i := range 30 {
			id := "file-" + strconv.Itoa(i)
			require.Equal(t, f.node(t, s.recordKey(id)), f.node(t, s.genKey(id)), id)
			nodes[f.node(t, s.recordKey(id))] = true
		}
		require.Len(t, nodes, 3, "files are spread over every shard")
	})

	t.Run("leases", func(t *testing.T) {
		leasetest.Run(t, map[string]leasetest.Pair{
			"redis-cluster": func(t *testing.T) (lease.Locker, lease.Locker) {
				// A key space of the case's own: the cases share lease names.
				prefix := "dfstest:" + newToken() + ":"
				var ls []lease.Locker
				for i, addrs := range [][]string{f.rc.Addrs(), {f.rc.Addrs()[2]}} {
					c, err := OpenCluster(ctxT(t), addrs, Options{KeyPrefix: prefix})
					require.NoError(t, err)
					t.Cleanup(func() { _ = c.Close() })
					ls = append(ls, NewRedisLocker(c, lease.Options{Owner: string(rune('a' + i))}))
				}
				return ls[0], ls[1]
			},
		})
		// Names spread over every shard, each held once.
		la, lb := NewRedisLocker(a, lease.Options{Owner: "a"}), NewRedisLocker(b, lease.Options{Owner: "b"})
		nodes := map[string]bool{}
		for i := range 20 {
			name := "spread-" + strconv.Itoa(i)
			nodes[f.node(t, la.lockKey(name))] = true
			held := leasetest.MustLock(t, la, name, 10*time.Second)
			leasetest.RequireTaken(t, lb, name)
			require.NoError(t, held.Release(ctxT(t)))
			leasetest.MustLock(t, lb, name, 10*time.Second)
		}
		require.Len(t, nodes, 3)
	})

	t.Run("caches", func(t *testing.T) {
		store := openSQLite(t)
		addNodes(t, store, "node-1", "node-2", "node-3")
		var na, nb counters
		ca := NewCachedStore(store, a, CacheOptions{OnHit: na.onHit, OnMiss: na.onMiss})
		cb := NewCachedStore(store, b, CacheOptions{OnHit: nb.onHit, OnMiss: nb.onMiss})
		ctx := ctxT(t)
		for range 12 { // enough files to land on every shard
			rec := newFile(t, ca)
			_, err := cb.GetFile(ctx, rec.ID)
			require.NoError(t, err)
			got, err := cb.GetFile(ctx, rec.ID)
			require.NoError(t, err)
			require.Equal(t, rec.Version, got.Version)
			rec.Name = "renamed"
			require.NoError(t, ca.UpdateFile(ctx, rec))
			got, err = cb.GetFile(ctx, rec.ID)
			require.NoError(t, err)
			require.Equal(t, "renamed", got.Name, "a write through one coordinator drops the record the other cached")
		}
		require.Equal(t, int64(12), nb.hits.Load(), "the second read of each file is a hit")
		require.False(t, a.down.Load() || b.down.Load(), "no call failed")
	})

	t.Run("membership notices", func(t *testing.T) {
		// An ordinary channel: PUBLISH goes to any node, and the cluster
		// passes it to the subscribers at the others.
		chs := make([]chan string, len(f.clients))
		for i, c := range f.clients {
			chs[i] = make(chan string, 64)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { c.SubscribeMembership(ctx, func(id string) { chs[i] <- id }) })
			t.Cleanup(func() { cancel(); wg.Wait() })
			require.Equal(t, "", nextKey(t, chs[i]), "subscribed")
		}
		for n := range 6 {
			id := "node-" + strconv.Itoa(n)
			if n%2 == 0 {
				require.NoError(t, f.clients[n%3].NotifyMembership(ctxT(t), id))
			} else {
				changed, err := f.clients[n%3].PublishNodeStatus(ctxT(t), id, meta.NodeHealthy, time.Now())
				require.NoError(t, err)
				require.True(t, changed)
			}
			for i := range chs {
				require.Equal(t, id, nextKey(t, chs[i]), "receiver %d", i)
			}
		}
		states, err := b.NodeStatuses(ctxT(t))
		require.NoError(t, err)
		require.Len(t, states, 3)
	})

	t.Run("invalidations", func(t *testing.T) {
		var mu sync.Mutex
		got := map[int][]string{}
		vs := make([]*Invalidations, len(f.clients))
		for i, c := range f.clients {
			vs[i] = c.Invalidations()
			vs[i].Handle("file", func(key string) {
				mu.Lock()
				got[i] = append(got[i], key)
				mu.Unlock()
			})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { vs[i].Run(ctx) })
			t.Cleanup(func() { cancel(); wg.Wait() })
		}
		require.Eventually(t, func() bool {
			return vs[0].Live() && vs[1].Live() && vs[2].Live()
		}, 10*time.Second, 10*time.Millisecond)
		for n := range 5 {
			key := "f" + strconv.Itoa(n)
			require.NoError(t, vs[n%3].Publish(ctxT(t), "file", key))
			// Publish returned: every receiver has run its handler.
			mu.Lock()
			for i := range vs {
				require.Contains(t, got[i], key, "receiver %d", i)
			}
			mu.Unlock()
		}
	})
}

// holding is who holds a lease in TestClusterMasterKilledUnderLoad, and
// until when it may act on it.
type holding struct {
	who   string
	until time.Time
}

// TestClusterMasterKilledUnderLoad kills the master that carries the
// invalidation channel (and some files' records and some leases) with
// SIGKILL while two coordinators take leases, write files and read them, and
// starts it again, empty, a few seconds later. Throughout: no lease has two
// holders, and no read answers a record older than the last write that
// returned before it began. While the shard is dead its files are read from
// the store, the invalidations are not live and its leases wait or move to
// the store; once it is back the invalidations are live again, its leases
// are held in Redis again, and the caches answer from Redis again.
func TestClusterMasterKilledUnderLoad(t *testing.T) {
	f := newClusterFixture(t, 3)
	a, b, probe := f.clients[0], f.clients[1], f.clients[2]
	victim := f.node(t, a.invalidationsChan())
	victimIdx := slices.Index(f.rc.Addrs(), victim)
	require.GreaterOrEqual(t, victimIdx, 0)

	store := openSQLite(t)
	addNodes(t, store, "node-1", "node-2", "node-3")
	const ttl = 2 * time.Second // the record cache's
	var na, nb, np counters
	stores := []*CachedStore{
		NewCachedStore(store, a, CacheOptions{TTL: ttl, OnHit: na.onHit, OnMiss: na.onMiss}),
		NewCachedStore(store, b, CacheOptions{TTL: ttl, OnHit: nb.onHit, OnMiss: nb.onMiss}),
	}
	// The probe coordinator writes nothing, so it never stops trusting the
	// cache; check, read only by the test itself, shows by its hits and
	// misses which shard answers.
	probeStore := NewCachedStore(store, probe, CacheOptions{TTL: ttl, OnHit: np.onHit, OnMiss: np.onMiss})
	var nc counters
	check := NewCachedStore(store, probe, CacheOptions{TTL: ttl, OnHit: nc.onHit, OnMiss: nc.onMiss})

	// Files and lease names on the victim and elsewhere.
	var files, victimFiles []string
	for len(victimFiles) < 4 || len(files) < 12 {
		rec := newFile(t, store)
		files = append(files, rec.ID)
		if f.node(t, stores[0].recordKey(rec.ID)) == victim {
			victimFiles = append(victimFiles, rec.ID)
		}
	}
	// The grace, counted from the restarted master's start, must also cover
	// the holders' reconnection to it, which go-redis's dial breaker delays
	// by a second or more, and a loaded machine by seconds.
	const leaseTTL, grace = 600 * time.Millisecond, 4 * time.Second
	lockers := []*Fallback{
		NewFallback(a, store, lease.Options{Owner: "a", Grace: grace, Logger: slog.New(slog.NewTextHandler(f.logs[0], nil))}),
		NewFallback(b, store, lease.Options{Owner: "b", Grace: grace, Logger: slog.New(slog.NewTextHandler(f.logs[1], nil))}),
	}
	rl := NewRedisLocker(a, lease.Options{})
	var names, victimNames []string
	for i := 0; len(victimNames) < 3 || len(names) < 9; i++ {
		name := "work-" + strconv.Itoa(i)
		names = append(names, name)
		if f.node(t, rl.lockKey(name)) == victim {
			victimNames = append(victimNames, name)
		}
	}

	vs := []*Invalidations{a.Invalidations(), b.Invalidations()}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }()
	for _, v := range vs {
		v.Handle("file", func(string) {})
		wg.Go(func() { v.Run(loadCtx) })
	}
	require.Eventually(t, func() bool { return vs[0].Live() && vs[1].Live() }, 10*time.Second, 10*time.Millisecond)

	var (
		mu        sync.Mutex
		committed = map[string]int64{}   // file → version of the last write that returned
		holder    = map[string]holding{} // lease name → who holds it now, and until when
		acquired  = map[string]int{}     // lease name → acquisitions since the mark
		problems  []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
		}
	}

	// Writers: one per coordinator, each on its own half of the files.
	for w, s := range stores {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				id := files[(2*i+w)%len(files)]
				rec, err := store.GetFile(loadCtx, id)
				if err != nil {
					continue
				}
				rec.Name = "v" + strconv.FormatInt(rec.Version+1, 10)
				if s.UpdateFile(loadCtx, &rec) == nil {
					mu.Lock()
					committed[id] = max(committed[id], rec.Version)
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	// Readers: every coordinator's cache, the probe's included.
	for r, s := range append(stores, probeStore) {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				id := files[(i*7+r)%len(files)]
				mu.Lock()
				floor := committed[id]
				mu.Unlock()
				rec, err := s.GetFile(loadCtx, id)
				if err == nil && rec.Version < floor {
					problem("reader %d: file %s answered version %d after version %d was written", r, id, rec.Version, floor)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	// Lease workers: every name contended by both coordinators.
	for _, name := range names {
		for w, l := range lockers {
			who := string(rune('a' + w))
			wg.Go(func() {
				for loadCtx.Err() == nil {
					held, ok, err := l.TryLock(loadCtx, name, leaseTTL)
					if err != nil || !ok {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					now := time.Now()
					mu.Lock()
					if other, ok := holder[name]; ok && other.until.After(now) {
						mu.Unlock()
						problem("lease %s granted to %s while %s holds it for %v more", name, who, other.who, other.until.Sub(now))
						mu.Lock()
					}
					holder[name] = holding{who, held.Deadline()}
					acquired[name]++
					mu.Unlock()
					// Hold it for a few renewals, and let go as soon as it is
					// not known to be held.
					for range 3 {
						time.Sleep(leaseTTL / 3)
						if ok, err := held.Renew(loadCtx); err != nil || !ok {
							break
						}
						mu.Lock()
						holder[name] = holding{who, held.Deadline()}
						mu.Unlock()
					}
					mu.Lock()
					if holder[name].who == who {
						delete(holder, name)
					}
					mu.Unlock()
					_ = held.Release(context.Background())
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
	}

	time.Sleep(time.Second)
	mu.Lock()
	clear(acquired)
	mu.Unlock()
	f.rc.Nodes[victimIdx].Kill()
	killed := time.Now()
	t.Logf("killed %s, which holds %d of %d files and %d of %d lease names", victim, len(victimFiles), len(files), len(victimNames), len(names))

	ctx := ctxT(t)
	require.Error(t, a.Ping(ctx), "a dead master fails the cluster's ping")
	require.Eventually(t, func() bool { return !vs[0].Live() && !vs[1].Live() }, 10*time.Second, 10*time.Millisecond,
		"the invalidations are not live while their shard is dead")
	for _, id := range victimFiles {
		misses := nc.misses.Load()
		for range 2 {
			rec, err := check.GetFile(ctx, id)
			require.NoError(t, err, "a dead shard's file is read from the store")
			require.Equal(t, id, rec.ID)
		}
		require.Equal(t, misses+2, nc.misses.Load(), "a dead shard's file is a miss every time")
	}

	time.Sleep(grace + 1500*time.Millisecond - time.Since(killed))
	mu.Lock()
	for _, name := range victimNames {
		require.Positive(t, acquired[name], "lease %s, whose key the dead master held, was taken in the store", name)
	}
	clear(acquired)
	mu.Unlock()
	// One outage, logged at its start and not again for each failure that
	// follows an answer of a live master (which would be hundreds of lines;
	// a loaded machine may add a stall of its own).
	log := f.logs[0].String()
	require.LessOrEqual(t, strings.Count(log, "redis call failed; degrading"), 2, log)
	require.LessOrEqual(t, strings.Count(log, "redis answers again"), 1, log)
	require.LessOrEqual(t, strings.Count(log, "leases move to the fallback"), 2, log)
	f.rc.Restart(victimIdx)
	mu.Lock()
	clear(acquired)
	mu.Unlock()
	restarted := time.Now()
	t.Logf("%s serves its slots again %v after the kill", victim, restarted.Sub(killed).Round(time.Millisecond))

	require.Eventually(t, func() bool { return a.Ping(ctx) == nil }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return vs[0].Live() && vs[1].Live() }, 10*time.Second, 10*time.Millisecond,
		"the invalidations are live again")
	require.NoError(t, vs[0].Publish(ctx, "file", "x"), "and every receiver confirms them")
	require.Eventually(t, func() bool {
		for _, name := range victimNames {
			if a.rdb.Exists(ctx, rl.lockKey(name)).Val() == 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "the dead shard's leases are held in Redis again")
	// The writers' caches trust Redis again one TTL and a fill window after
	// their last failed invalidation; then a second read is a hit.
	for i, s := range append(stores, check) {
		hits := []*counters{&na, &nb, &nc}[i]
		require.Eventually(t, func() bool {
			before := hits.hits.Load()
			_, err1 := s.GetFile(ctx, victimFiles[0])
			_, err2 := s.GetFile(ctx, victimFiles[0])
			return err1 == nil && err2 == nil && hits.hits.Load() > before
		}, 3*ttl+5*time.Second, 50*time.Millisecond, "cache %d answers a restarted shard's file from Redis again", i)
	}
	time.Sleep(time.Second)
	stopLoad()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, problems, "victim names %v, restart at %s\na's log:\n%s\nb's log:\n%s", victimNames, restarted.Format("15:04:05.000"), f.logs[0], f.logs[1])
	for _, name := range victimNames {
		require.Positive(t, acquired[name], "lease %s was taken again after the restart", name)
	}
	var writes int64
	for _, v := range committed {
		writes += v
	}
	t.Logf("file versions written: %d; cache hits a=%d b=%d probe=%d, misses a=%d b=%d probe=%d",
		writes, na.hits.Load(), nb.hits.Load(), np.hits.Load(), na.misses.Load(), nb.misses.Load(), np.misses.Load())
}
