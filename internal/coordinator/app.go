// Package coordinator wires the coordinator daemon: it builds the metadata
// store, membership, reconciler, rebalancer, file service and REST API from a
// Config, runs the background loops and shuts everything down in order.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dfs-project/dfs/internal/antientropy"
	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/auth"
	"github.com/dfs-project/dfs/internal/debugserver"
	"github.com/dfs-project/dfs/internal/dirlock"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/files/contentcache"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/lease"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/localcache"
	"github.com/dfs-project/dfs/internal/meta/metastore"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/metrics"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/redisx"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/s3"
	"github.com/dfs-project/dfs/internal/signedurl"
	"github.com/dfs-project/dfs/internal/sigv4"
	"github.com/dfs-project/dfs/internal/taskq"
)

// App is a running coordinator's components.
type App struct {
	cfg        Config
	log        *slog.Logger
	dirLock    *dirlock.Lock // DATA_DIRECTORY's, held for the App's life
	store      meta.Store
	members    *membership.Registry
	rebalancer *rebalance.Rebalancer
	files      *files.Service
	repair     *repairLoop
	sweeper    *antientropy.Sweeper
	handler    http.Handler
	s3         http.Handler // nil without S3_PORT
	events     chan membership.Event
	transport  *http.Transport // connections to the storage nodes
	metrics    *metrics.Coordinator
	ops        *ops.Tracker        // this process's rebalances, drains and repairs
	content    *contentcache.Cache // nil without CONTENT_CACHE_SIZE
	redis      *redisx.Client      // nil without REDIS_URL or REDIS_CLUSTER_ADDRS
	// invalidations carries cache invalidations between coordinators
	// sharing a PostgreSQL store; nil with the embedded store or no Redis.
	invalidations *redisx.Invalidations
	// notices publishes membership changes to Redis, off the registry's
	// path; nil without REDIS_URL.
	notices *taskq.Queue
	// pending counts membership events queued or being rebalanced.
	pending atomic.Int64
	// requests is the context of every request and of the work the API
	// starts detached from one (a manual rebalance); cancelRequests ends
	// them when SHUTDOWN_TIMEOUT runs out.
	requests       context.Context
	cancelRequests context.CancelFunc
}

// New builds a coordinator from cfg. It locks the data directory, opens (and
// migrates) the metadata store and rebuilds the ring from it, so a restart
// moves no data.
func New(ctx context.Context, cfg Config, log *slog.Logger, reg *prometheus.Registry) (*App, error) {
	// First of all: the embedded store and the upload spool, which New
	// empties, are this process's alone, with PostgreSQL too.
	dirLock, err := dirlock.Acquire(cfg.DataDir, "coordinator")
	if err != nil {
		return nil, err
	}
	base, err := metastore.Open(ctx, cfg.DatabaseURL, cfg.DataDir, sqlite.Options{CheckpointPages: cfg.SQLiteCheckpointPages}, log)
	if err != nil {
		dirLock.Close()
		return nil, fmt.Errorf("open metadata store: %w", err)
	}
	a := &App{cfg: cfg, log: log, dirLock: dirLock, store: base, events: make(chan membership.Event, 1024), ops: ops.New(ops.Options{})}
	a.requests, a.cancelRequests = context.WithCancel(context.Background())
	// The namespace and the keys are read from the store itself; only the
	// embedded store's object rows are cached, below.
	ns, ok := base.(meta.Namespace)
	if !ok {
		a.close()
		return nil, fmt.Errorf("the metadata store %T keeps no S3 namespace", base)
	}
	a.content = contentcache.New(cfg.ContentCacheSize, cfg.ContentCacheMaxFile)
	a.metrics = metrics.NewCoordinator(reg, metrics.Options{
		Ring: func() *ring.Ring { return a.members.Ring() }, ContentCache: a.content.Usage,
	})
	reg.MustRegister(metrics.NewFilesByStatus(base.CountFilesByStatus, metrics.FilesByStatusOptions{Logger: log}))
	dur := &durability{store: base, rf: cfg.ReplicationFactor, log: log, bg: a.requests}
	reg.MustRegister(metrics.NewDurability(dur.Sample, metrics.DurabilityOptions{
		ReplicationFactor: cfg.ReplicationFactor, Logger: log}))
	reg.MustRegister(metrics.NewZoneDurability(dur.ZoneSample, metrics.ZoneDurabilityOptions{Logger: log}))
	reg.MustRegister(metrics.NewRepairQueue(base.RepairQueue, metrics.RepairQueueOptions{
		ReplicationFactor: cfg.ReplicationFactor, Logger: log}))

	// Redis is an optimisation: a cache in front of the store, leases that
	// fall back to the store, and change notices between coordinators.
	// Grace covers the longest lease in use (see lease.Options).
	lockOpts := lease.Options{Logger: log, Grace: cfg.LeaseTTL}
	var locker lease.Locker = lease.NewStoreLocker(base, lockOpts)
	var redisPing func(context.Context) error
	if cfg.RedisURL != "" || len(cfg.RedisClusterAddrs) > 0 {
		ro := redisx.Options{Logger: log, OnError: a.metrics.RedisError}
		if len(cfg.RedisClusterAddrs) > 0 {
			a.redis, err = redisx.OpenCluster(ctx, cfg.RedisClusterAddrs, ro)
		} else {
			a.redis, err = redisx.Open(ctx, cfg.RedisURL, ro)
		}
		if err != nil {
			a.close()
			return nil, err
		}
		locker = redisx.NewFallback(a.redis, base, lockOpts)
		a.notices = taskq.New(taskq.Options{Name: "membership notices", Size: noticeQueueSize, Logger: log})
		redisPing = a.redis.Ping
		// With the embedded store and its in-memory cache, Redis caches no
		// file record: the in-memory cache sees every write of this
		// coordinator's own store, so it can never be stale, but what it
		// would read from Redis could be (a predecessor killed between a
		// write and its invalidation leaves the old record there for a TTL),
		// and the in-memory cache keeps what it reads for good.
		if cfg.CacheEnabled && !localCacheOn(cfg) {
			a.store = redisx.NewCachedStore(base, a.redis, redisx.CacheOptions{
				TTL: cfg.CacheMetadataTTL, OnHit: a.metrics.CacheHit, OnMiss: a.metrics.CacheMiss,
			})
		}
	}
	if localCacheOn(cfg) {
		// The embedded store is this process's alone, so every write of a
		// file record passes the cache; with PostgreSQL another coordinator
		// could write behind its back.
		a.store = localcache.New(a.store, localcache.Options{
			Entries: cfg.LocalCacheEntries, Hits: a.metrics.LocalCacheHit, Misses: a.metrics.LocalCacheMiss,
		})
		// Object rows too, on the same terms: the namespace's writes pass
		// the cache, and so does every file delete (which takes the file's
		// key with it), since the file service and the repairs delete
		// through a.store.
		objs := localcache.NewObjects(ns, cfg.LocalCacheEntries)
		a.store = objs.WatchFiles(a.store)
		ns = objs
	}
	// No lease lives longer than LEASE_TTL between renewals, so a dead
	// coordinator's leases lapse within it.
	locker = lease.Capped(locker, cfg.LeaseTTL)
	store := a.store

	a.transport = nodeclient.NewTransport()
	nodes := nodeclient.New(nodeclient.Options{Token: cfg.ClusterToken, Transport: a.transport, StallTimeout: cfg.NodeStallTimeout,
		BatchMax: cfg.NodeBatchMax, BatchInflight: cfg.NodeBatchInflight})
	a.members, err = membership.New(membership.Options{
		Store: store, Prober: nodes, VNodes: cfg.VirtualNodes,
		FailureThreshold: cfg.HealthFailureThreshold, SuccessThreshold: cfg.HealthSuccessThreshold,
		Interval: cfg.HealthCheckInterval, ProbeTimeout: cfg.HealthProbeTimeout,
		Logger: log, OnEvent: a.onEvent,
		SweepLock: locker,
	})
	if err != nil {
		a.close()
		return nil, err
	}
	if err := a.members.Load(ctx); err != nil {
		a.close()
		return nil, fmt.Errorf("load storage nodes: %w", err)
	}
	rec := reconcile.New(reconcile.Options{
		Store: store, Nodes: nodes, Cluster: a.members, ReplicationFactor: cfg.ReplicationFactor, Logger: log,
		Lock: locker, LockTTL: cfg.LeaseTTL,
		Throttle: reconcile.NewThrottle(cfg.RebalanceBandwidth, metrics.NewCopyThrottle(reg).Paced),
	})
	a.rebalancer = rebalance.New(rebalance.Options{
		Store: store, Reconciler: rec, Ring: a.members.Ring, ReplicationFactor: cfg.ReplicationFactor,
		DrainTimeout: cfg.DrainTimeout, Logger: log, OnReport: a.metrics.RebalanceDone, Lock: locker,
		Parallelism: cfg.RebalanceParallelism, NodeStatus: a.members.Status, Ops: a.ops, RiskOrder: store.FileIDsByRisk,
		FreeSpace: func(ctx context.Context, id string) (int64, error) {
			base, ok := a.members.BaseURL(id)
			if !ok {
				return 0, fmt.Errorf("node %s has no known address", id)
			}
			st, err := nodes.Stats(ctx, base)
			return st.FreeBytes, err
		},
	})
	a.files, err = files.New(files.Options{
		Store: store, Nodes: nodes, Cluster: a.members, Reconciler: userReconciler{rec}, Logger: log,
		ReplicationFactor: cfg.ReplicationFactor, MaxFileSize: cfg.MaxFileSize,
		SpoolDir: filepath.Join(cfg.DataDir, "spool"), VerifyOnDownload: cfg.VerifyChecksumOnDownload,
		SignedURLKey: signedurl.KeyFrom(cfg.ClusterToken), SignedURLTTL: cfg.SignedURLTTL,
		DownloadBuffer: cfg.DownloadBufferSize, ContentCache: a.content, ReplicaConcurrency: cfg.ReplicaWriteConcurrency,
		MemorySpoolMax: cfg.SpoolMemoryMax, MemorySpoolLimit: cfg.SpoolMemoryLimit,
		PendingTouch: max(cfg.PendingUploadTimeout/4, time.Second), PendingRecordDelay: cfg.PendingRecordDelay, Events: a.metrics,
		ChunkSize: cfg.ChunkSize, ChunkConcurrency: cfg.ChunkUploadConcurrency, ChunkBuffers: cfg.ChunkBuffers, ChunkReadAhead: cfg.ChunkReadAhead, SessionTTL: cfg.UploadSessionTTL,
	})
	if err != nil {
		a.close()
		return nil, err
	}
	// The sweep reads the store itself, not a cache: an orphan is removed
	// only when the store says no file owns it.
	a.sweeper, err = antientropy.New(antientropy.Options{
		Store: base, Nodes: nodes, Cluster: a.members, Reconciler: rec, ReplicationFactor: cfg.ReplicationFactor,
		Interval: cfg.AntiEntropyInterval, Rate: cfg.AntiEntropyRate, OrphanGrace: cfg.AntiEntropyOrphanGrace,
		MoveMisplaced: cfg.RebalanceOnMembershipChange, Lock: locker, Events: metrics.NewAntiEntropy(reg), Logger: log,
	})
	if err != nil {
		a.close()
		return nil, err
	}
	a.repair = &repairLoop{
		store: store, rebalancer: a.rebalancer, uploads: a.files, cluster: a.members,
		interval: cfg.RepairInterval, pendingTimeout: cfg.PendingUploadTimeout, leaseAge: staleLeaseAge, log: log, lock: locker,
		catchUp: cfg.RebalanceOnMembershipChange, busy: func() bool { return !a.idle() }, refresh: a.members.Load,
	}
	keys, err := auth.New(ns, cfg.RootAccessKey, cfg.RootSecretKey, log)
	if err != nil {
		a.close()
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		// Other coordinators may share the database: what they revoke
		// reaches this one's caches through Redis, and without it (or
		// while it is away) those caches are not used.
		if a.redis != nil {
			a.invalidations = a.redis.Invalidations()
			keys.Share(a.invalidations)
		} else {
			keys.Share(nil)
		}
	}
	if keys.Enabled() && cfg.ClusterToken == "" {
		log.Warn("ROOT_ACCESS_KEY is set but CLUSTER_TOKEN is not: node registration and corruption reports, which storage nodes make without an access key, are accepted from anyone who reaches this port; set CLUSTER_TOKEN on the coordinator and every node")
	}
	verifier := &sigv4.Verifier{Region: cfg.S3Region, Secrets: keys.Secret}
	restAuth := keys.REST(verifier)
	if cfg.APIAuth == "open" {
		restAuth = keys.OpenREST(verifier)
	}
	if cfg.S3Port != 0 {
		a.s3 = s3.New(s3.Options{Files: a.files, Namespace: ns, Keys: keys, Region: cfg.S3Region, Domain: cfg.S3Domain,
			Logger: log.With("api", "s3"), Observe: a.metrics.ObserveHTTP, Sessions: s3Sessions{a.files},
			Shared: cfg.DatabaseURL != "", Peers: s3Peers(a.invalidations)})
	}
	storeKind := "sqlite"
	if cfg.DatabaseURL != "" {
		storeKind = "postgres"
	}
	a.handler = api.New(api.Options{
		Files: a.files, Members: a.members, Rebalancer: patient{a.rebalancer, 2 * cfg.LeaseTTL, a.requests},
		Health: &health{store: store, storeKind: storeKind, ring: a.members.Ring, rf: cfg.ReplicationFactor,
			redisPing: redisPing, zones: dur.lastZones},
		Durability:  dur,
		Uploads:     a.files,
		Operations:  a.ops,
		Logger:      log,
		Token:       cfg.ClusterToken,
		MaxFileSize: cfg.MaxFileSize,
		Metrics:     promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Observe:     a.metrics.ObserveHTTP,
		Auth:        restAuth,
		Keys:        keys,
		Namespace:   ns,
		Objects:     &objects.Service{Files: a.files, Namespace: ns, Log: log},
		RootKey:     cfg.RootAccessKey,
		Scrub:       &scrubView{nodes: store.ListNodes, addr: a.members.BaseURL, status: nodes.Scrub, files: a.files},
		NodeStats: func(ctx context.Context, id string) (api.NodeStorage, error) {
			base, ok := a.members.BaseURL(id)
			if !ok {
				return api.NodeStorage{}, fmt.Errorf("node %s has no known address", id)
			}
			st, err := nodes.Stats(ctx, base)
			return api.NodeStorage{BlobCount: st.BlobCount, BytesUsed: st.BytesUsed, FreeBytes: st.FreeBytes}, err
		},
	})
	return a, nil
}

// localCacheOn reports whether file records are cached in this process's
// memory: with the embedded store only, which no other process writes.
func localCacheOn(cfg Config) bool { return cfg.DatabaseURL == "" && cfg.LocalCacheEntries > 0 }

// close releases what New opened, on a failed start.
func (a *App) close() {
	if a.redis != nil {
		a.redis.Close()
	}
	a.closeStore()
}

// closeStore closes the metadata store, then gives up the data directory.
func (a *App) closeStore() error {
	return errors.Join(a.store.Close(), a.dirLock.Close())
}

// Handler is the REST API.
func (a *App) Handler() http.Handler { return a.handler }

// onEvent hands membership changes to the rebalancing goroutine; it must not
// block the registry.
func (a *App) onEvent(e membership.Event) {
	a.metrics.MembershipEvent(e)
	if a.notices != nil {
		// Tell the other coordinators at once rather than at their next
		// refresh; this must not block the registry.
		if !a.notices.Go(func(ctx context.Context) { a.notify(ctx, e) }) {
			a.log.Debug("membership notice queue full; other coordinators see the change at their next refresh", "node", e.Node.ID)
		}
	}
	a.pending.Add(1)
	select {
	case a.events <- e:
	default:
		a.pending.Add(-1)
		a.log.Warn("membership event queue full; the repair loop will pick the change up", "event", e.Kind, "node", e.Node.ID)
	}
}

var triggers = map[membership.EventKind]rebalance.Trigger{
	membership.Joined:       rebalance.Joined,
	membership.Failed:       rebalance.Failed,
	membership.Recovered:    rebalance.Recovered,
	membership.Deregistered: rebalance.Deregistered,
	// A node with a new disk is a recovered node with nothing on it: the
	// RECOVERED rebalance visits every file with a copy row on it, finds
	// the copy absent and rebuilds it at once.
	membership.DiskReplaced:     rebalance.Recovered,
	membership.PlacementChanged: rebalance.PlacementChanged,
}

// s3Peers is the S3 front end's view of the invalidations: nil, not a nil
// pointer in an interface, when there are none.
func s3Peers(v *redisx.Invalidations) s3.Peers {
	if v == nil {
		return nil
	}
	return v
}

// rebalanceOnEvents runs one rebalance per membership change, in order.
func (a *App) rebalanceOnEvents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-a.events:
			a.rebalanceFor(ctx, e)
			a.pending.Add(-1)
		}
	}
}

func (a *App) rebalanceFor(ctx context.Context, e membership.Event) {
	t, ok := triggers[e.Kind]
	if !ok || !a.cfg.RebalanceOnMembershipChange {
		return
	}
	rep, err := (patient{a.rebalancer, 2 * a.cfg.LeaseTTL, nil}).Run(ctx, t, e.Node.ID)
	if err != nil && ctx.Err() == nil {
		a.log.Error("rebalance failed; the repair loop will retry", "trigger", t, "node", e.Node.ID, "err", err)
	}
	if err == nil && rep.Complete {
		a.completeEpoch(ctx, e.Epoch)
	}
}

// completeEpoch records that the rebalance of membership epoch e completed,
// when every earlier epoch has too: a rebalance visits only the files its
// own change affects, so it cannot stand in for an earlier change whose
// rebalance was lost. That one is left to the repair loop's catch-up.
func (a *App) completeEpoch(ctx context.Context, e int64) {
	if e <= 0 {
		return
	}
	ep, err := a.store.Epochs(ctx)
	if err != nil {
		a.log.Warn("could not read the membership epochs; the repair loop will catch up", "epoch", e, "err", err)
		return
	}
	if ep.Rebalanced < e-1 {
		return
	}
	if err := a.store.CompleteRebalance(ctx, e); err != nil {
		a.log.Warn("could not record a completed rebalance; the repair loop will catch up", "epoch", e, "err", err)
	}
}

// userReconciler reconciles for a user's request without waiting for the
// file's lease (see reconcile.Reconciler.ReconcileNow).
type userReconciler struct{ r *reconcile.Reconciler }

func (u userReconciler) Reconcile(ctx context.Context, id string) (reconcile.Outcome, error) {
	return u.r.ReconcileNow(ctx, id)
}

// patient runs rebalances that, when skipped for want of their lease, are
// tried again for a while: the holder may be another coordinator doing the
// same work (then the retry finds nothing left), or leases may be settling
// after Redis failed or restarted, and the work must not wait for the repair
// loop or be refused to the admin who asked for it.
type patient struct {
	*rebalance.Rebalancer
	wait time.Duration
	// stop, when set, also ends the runs: the API's manual rebalance runs
	// detached from its request, and must not outlive the shutdown.
	stop context.Context
}

// skippedRetry is the pause before a skipped rebalance is tried again.
const skippedRetry = time.Second

func (p patient) Run(ctx context.Context, t rebalance.Trigger, node string) (rebalance.Report, error) {
	if p.stop != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(p.stop, cancel)()
	}
	deadline := time.Now().Add(p.wait)
	for {
		rep, err := p.Rebalancer.Run(ctx, t, node)
		if err != nil || !rep.Skipped || time.Now().After(deadline) {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, nil
		case <-time.After(skippedRetry):
		}
	}
}

// idle reports whether no membership-triggered rebalance is queued or running.
func (a *App) idle() bool { return a.pending.Load() == 0 }

// noticeQueueSize bounds the membership notices waiting for Redis, as
// events bounds the changes waiting for a rebalance.
const noticeQueueSize = 1024

// notify publishes a membership change to the other coordinators.
func (a *App) notify(ctx context.Context, e membership.Event) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := a.redis.PublishNodeStatus(ctx, e.Node.ID, e.Node.Status, e.At); err != nil {
		a.log.Debug("could not publish a membership change to Redis", "node", e.Node.ID, "err", err)
	}
}

// Run serves on cfg's address until ctx is cancelled, then shuts down in
// order: stop accepting, finish in-flight requests (cutting off, after
// SHUTDOWN_TIMEOUT, those still running), stop the background
// loops, close the store.
func (a *App) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Addr())
	if err != nil {
		return fmt.Errorf("listen on %s: %w", a.cfg.Addr(), err)
	}
	return a.Serve(ctx, ln)
}

// Serve is Run on an existing listener.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	if a.cfg.PprofAddr != "" {
		if _, err := debugserver.Start(bg, a.cfg.PprofAddr, a.log); err != nil {
			stopBG()
			return errors.Join(err, ln.Close(), a.closeStore())
		}
	}
	var bgLoops loops
	bgLoops.Go("failure detector", func() { a.members.Run(bg) })
	bgLoops.Go("membership rebalances", func() { a.rebalanceOnEvents(bg) })
	bgLoops.Go("repair loop", func() { a.repair.run(bg) })
	bgLoops.Go("anti-entropy sweep", func() { a.sweeper.Run(bg) })
	bgLoops.Go("file service", func() { a.files.Run(bg) })
	if a.notices != nil {
		bgLoops.Go("membership notices", func() { a.notices.Run(bg) })
	}
	if a.invalidations != nil {
		bgLoops.Go("redis cache invalidations", func() { a.invalidations.Run(bg) })
	}
	if a.redis != nil {
		bgLoops.Go("redis membership subscription", func() {
			a.redis.SubscribeMembership(bg, func(string) {
				if err := a.members.Load(bg); err != nil && bg.Err() == nil {
					a.log.Warn("refreshing the ring after a membership notice failed", "err", err)
				}
			})
		})
	}

	rest := newListener("rest", a.handler, a.requests)
	listeners := []*listener{rest}
	errc := make(chan error, 2)
	// The gathering listeners (REST and S3) let a small download leave with
	// its head in one write (httpx.WriteWhole; newListener sets the
	// ConnContext).
	go func() { errc <- rest.srv.Serve(httpx.GatherListener(ln)) }()
	if a.s3 != nil {
		addr := fmt.Sprintf("%s:%d", a.cfg.Host, a.cfg.S3Port)
		s3ln, err := net.Listen("tcp", addr)
		if err != nil {
			stopBG()
			bgLoops.wait(a.log)
			return errors.Join(fmt.Errorf("listen on %s (S3_PORT): %w", addr, err), rest.srv.Close(), a.closeStore())
		}
		s3 := newListener("s3", a.s3, a.requests)
		listeners = append(listeners, s3)
		go func() { errc <- s3.srv.Serve(httpx.GatherListener(s3ln)) }()
		a.log.Info("S3 API listening", "addr", s3ln.Addr().String(), "region", a.cfg.S3Region, "domain", a.cfg.S3Domain)
	}
	a.log.Info("coordinator listening", "addr", ln.Addr().String(), "replication_factor", a.cfg.ReplicationFactor,
		"virtual_nodes", a.cfg.VirtualNodes, "store", map[bool]string{true: "postgres", false: "embedded sqlite"}[a.cfg.DatabaseURL != ""])

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	start := time.Now()
	err = errors.Join(err, a.stopServing(listeners))
	a.cancelRequests()
	stopBG()
	bgLoops.wait(a.log)
	// Open connections to the nodes would keep their servers waiting at
	// their own shutdown.
	a.transport.CloseIdleConnections()
	if a.redis != nil {
		if cerr := a.redis.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	closing := time.Now()
	if cerr := a.closeStore(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if d := time.Since(closing); d > slowStop {
		a.log.Warn("closing the metadata store was slow", "duration_ms", d.Milliseconds())
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	a.log.Info("coordinator stopped", "shutdown_ms", time.Since(start).Milliseconds())
	return err
}
