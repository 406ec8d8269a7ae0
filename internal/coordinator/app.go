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
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore"
	"github.com/dfs-project/dfs/internal/metrics"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/reconcile"
)

// App is a running coordinator's components.
type App struct {
	cfg        Config
	log        *slog.Logger
	store      meta.Store
	members    *membership.Registry
	rebalancer *rebalance.Rebalancer
	files      *files.Service
	repair     *repairLoop
	handler    http.Handler
	events     chan membership.Event
	transport  *http.Transport // connections to the storage nodes
	metrics    *metrics.Coordinator
	// pending counts membership events queued or being rebalanced.
	pending atomic.Int64
}

// New builds a coordinator from cfg. It opens (and migrates) the metadata
// store and rebuilds the ring from it, so a restart moves no data.
func New(ctx context.Context, cfg Config, log *slog.Logger, reg *prometheus.Registry) (*App, error) {
	store, err := metastore.Open(ctx, cfg.DatabaseURL, cfg.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("open metadata store: %w", err)
	}
	a := &App{cfg: cfg, log: log, store: store, events: make(chan membership.Event, 1024)}
	a.transport = nodeclient.NewTransport()
	nodes := nodeclient.New(nodeclient.Options{Token: cfg.ClusterToken, Transport: a.transport})

	a.members, err = membership.New(membership.Options{
		Store: store, Prober: nodes, VNodes: cfg.VirtualNodes,
		FailureThreshold: cfg.HealthFailureThreshold, SuccessThreshold: cfg.HealthSuccessThreshold,
		Interval: cfg.HealthCheckInterval, ProbeTimeout: cfg.HealthProbeTimeout,
		Logger: log, OnEvent: a.onEvent,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	a.metrics = metrics.NewCoordinator(reg, metrics.Options{Ring: a.members.Ring})
	reg.MustRegister(metrics.NewFilesByStatus(store.CountFilesByStatus, metrics.FilesByStatusOptions{Logger: log}))
	if err := a.members.Load(ctx); err != nil {
		store.Close()
		return nil, fmt.Errorf("load storage nodes: %w", err)
	}
	rec := reconcile.New(reconcile.Options{
		Store: store, Nodes: nodes, Cluster: a.members, ReplicationFactor: cfg.ReplicationFactor, Logger: log,
	})
	a.rebalancer = rebalance.New(rebalance.Options{
		Store: store, Reconciler: rec, Ring: a.members.Ring, ReplicationFactor: cfg.ReplicationFactor,
		DrainTimeout: cfg.DrainTimeout, Logger: log, OnReport: a.metrics.RebalanceDone,
	})
	a.files, err = files.New(files.Options{
		Store: store, Nodes: nodes, Cluster: a.members, Reconciler: rec, Logger: log,
		ReplicationFactor: cfg.ReplicationFactor, MaxFileSize: cfg.MaxFileSize,
		SpoolDir: filepath.Join(cfg.DataDir, "spool"), VerifyOnDownload: cfg.VerifyChecksumOnDownload,
		DownloadBuffer: cfg.DownloadBufferSize, ReplicaConcurrency: cfg.ReplicaWriteConcurrency,
		PendingTouch: max(cfg.PendingUploadTimeout/4, time.Second), Events: a.metrics,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	a.repair = &repairLoop{
		store: store, rebalancer: a.rebalancer, reconciler: rec, nodes: nodes, cluster: a.members,
		interval: cfg.RepairInterval, pendingTimeout: cfg.PendingUploadTimeout, log: log,
	}
	storeKind := "sqlite"
	if cfg.DatabaseURL != "" {
		storeKind = "postgres"
	}
	a.handler = api.New(api.Options{
		Files: a.files, Members: a.members, Rebalancer: a.rebalancer,
		Health:      &health{store: store, storeKind: storeKind, ring: a.members.Ring, rf: cfg.ReplicationFactor},
		Logger:      log,
		Token:       cfg.ClusterToken,
		MaxFileSize: cfg.MaxFileSize,
		Metrics:     promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Observe:     a.metrics.ObserveHTTP,
	})
	return a, nil
}

// Handler is the REST API.
func (a *App) Handler() http.Handler { return a.handler }

// onEvent hands membership changes to the rebalancing goroutine; it must not
// block the registry.
func (a *App) onEvent(e membership.Event) {
	a.metrics.MembershipEvent(e)
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
	if _, err := a.rebalancer.Run(ctx, t, e.Node.ID); err != nil && ctx.Err() == nil {
		a.log.Error("rebalance failed; the repair loop will retry", "trigger", t, "node", e.Node.ID, "err", err)
	}
}

// idle reports whether no membership-triggered rebalance is queued or running.
func (a *App) idle() bool { return a.pending.Load() == 0 }

// Run serves on cfg's address until ctx is cancelled, then shuts down in
// order: stop accepting, finish in-flight requests, stop the background
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
	var wg sync.WaitGroup
	wg.Go(func() { a.members.Run(bg) })
	wg.Go(func() { a.rebalanceOnEvents(bg) })
	wg.Go(func() { a.repair.run(bg) })

	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.log.Info("coordinator listening", "addr", ln.Addr().String(), "replicationFactor", a.cfg.ReplicationFactor,
		"virtualNodes", a.cfg.VirtualNodes, "store", map[bool]string{true: "postgres", false: "embedded sqlite"}[a.cfg.DatabaseURL != ""])

	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		a.log.Info("coordinator shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
	}
	stopBG()
	wg.Wait()
	// Open connections to the nodes would keep their servers waiting at
	// their own shutdown.
	a.transport.CloseIdleConnections()
	if cerr := a.store.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	a.log.Info("coordinator stopped")
	return err
}
