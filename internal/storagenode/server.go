// Package storagenode is the dfs storage node: a keyed blob store on local
// disk behind an internal HTTP API, with health endpoints, Prometheus metrics
// and a loop that registers the node with the coordinator. The node knows
// nothing of the cluster: no ring, no peers, no replication.
//
// The HTTP contract (paths, headers, bodies) is in package wire; the blobs
// are kept by package blob.
package storagenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/debugserver"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/scrub"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Server is one storage node.
type Server struct {
	cfg     Config
	log     *slog.Logger
	store   blob.Store
	metrics *metrics
	reg     *registrar
	handler http.Handler
	// scrubber re-hashes every blob once per SCRUB_PERIOD while Serve runs.
	scrubber *scrub.Scrubber
	// corrupt are the blobs a read found damaged, refused until written
	// again.
	corrupt corruptSet
}

// New opens the data directory named by cfg (creating it, cleaning up after
// a crash and counting its blobs) and builds a node whose metrics go to
// registry. A nil registry gets a fresh one.
func New(cfg Config, logger *slog.Logger, registry *prometheus.Registry) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "storage node config")
	}
	store, err := openStore(cfg, logger)
	if err != nil {
		return nil, err
	}
	s, err := NewWithStore(cfg, store, logger, registry)
	if err != nil {
		store.Close()
		return nil, err
	}
	return s, nil
}

// DefaultLayout is the layout of a new data directory when STORAGE_LAYOUT
// is unset.
const DefaultLayout = blob.LayoutVolumes

// openStore opens the data directory in the configured layout and logs what
// it found. A directory holding another layout is an error naming
// STORAGE_LAYOUT. With none configured, a directory keeps its own layout
// and a new one gets DefaultLayout.
func openStore(cfg Config, logger *slog.Logger) (blob.Store, error) {
	from := "STORAGE_LAYOUT"
	if cfg.Layout == "" {
		l, err := blob.DirectoryLayout(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		from = "the data directory"
		if l == "" {
			l, from = DefaultLayout, "the default for a new data directory"
		}
		cfg.Layout = l
	}
	opts := blob.Options{
		CapacityBytes: cfg.CapacityBytes, SyncMode: cfg.SyncMode, BatchSyncMax: cfg.SyncBatchMax, Owner: "storage node",
		VolumeSize: cfg.VolumeSize, InlineMax: cfg.InlineMax, CompactThreshold: cfg.CompactThreshold, Logger: logger.With("node_id", cfg.NodeID),
	}
	logRecovery := func(dir, id string, rec blob.Recovery, attrs ...any) {
		logger.Info("data directory opened", append([]any{"dir", dir, "disk_id", id, "layout", cfg.Layout, "layout_from", from, "blobs", rec.Blobs, "bytes", rec.Bytes,
			"temp_files_removed", rec.TempFilesRemoved, "orphans_removed", rec.OrphansRemoved, "sync_mode", cfg.SyncMode,
			"sync_batch_max", cfg.SyncBatchMax}, attrs...)...)
	}
	if cfg.Layout == blob.LayoutVolumes {
		v, err := blob.OpenVolumes(cfg.DataDir, opts)
		if err != nil {
			return nil, layoutError(err)
		}
		rec := v.Recovery()
		logRecovery(v.Dir(), v.Identity(), rec.Files, "volumes", rec.Volumes, "volume_blobs", rec.Blobs, "volume_bytes", rec.Bytes,
			"records_scanned", rec.Records, "from_checkpoint", rec.Checkpoint, "torn_bytes_cut", rec.TornBytes,
			"quarantined", rec.Quarantined, "quarantined_bytes", rec.QuarantinedBytes, "volume_size", cfg.VolumeSize, "inline_max", cfg.InlineMax)
		return v, nil
	}
	d, err := blob.OpenDisk(cfg.DataDir, opts)
	if err != nil {
		return nil, layoutError(err)
	}
	logRecovery(d.Dir(), d.Identity(), d.Recovery())
	return d, nil
}

// layoutError names the variable behind a layout mismatch.
func layoutError(err error) error {
	var le *blob.LayoutError
	if errors.As(err, &le) {
		return errs.Wrap(errs.Invalid, err, "STORAGE_LAYOUT=%s", le.Wanted)
	}
	return err
}

// NewWithStore builds a node over an already open store, which the node
// closes when it stops. Tests elsewhere use it to serve a blob.Memory whose
// blobs they can corrupt.
func NewWithStore(cfg Config, store blob.Store, logger *slog.Logger, registry *prometheus.Registry) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "storage node config")
	}
	if registry == nil {
		registry = prometheus.NewRegistry()
	}
	m, err := newMetrics(registry, cfg.NodeID, store)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: logger.With("node_id", cfg.NodeID), store: store, metrics: m}
	if cfg.WeightAuto {
		cfg.Weight = s.autoWeight(store)
		s.cfg = cfg
	}
	if cfg.CoordinatorURL != "" {
		s.reg = newRegistrar(cfg, store.Identity(), s.log, m.registrations)
	}
	if s.scrubber, err = s.newScrubber(); err != nil {
		return nil, err
	}
	if err := registerScrubMetrics(registry, s.scrubber); err != nil {
		return nil, err
	}
	s.handler = s.routes(registry)
	return s, nil
}

func (s *Server) routes(registry *prometheus.Registry) http.Handler {
	r := chi.NewRouter()
	r.NotFound(httpx.NotFoundHandler)
	r.MethodNotAllowed(httpx.MethodNotAllowedHandler)
	r.Use(withRequestID, s.observe, s.recoverPanic)

	r.Get(wire.PathLive, s.live)
	r.Get(wire.PathReady, s.ready)
	r.Handle(wire.PathMetrics, promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	r.Group(func(r chi.Router) {
		r.Use(s.requireToken)
		r.Put(wire.PathBlobs+"/{id}", s.putBlob)
		r.Post(wire.PathBlobBatch, s.putBlobBatch)
		r.Get(wire.PathBlobs+"/{id}", s.getBlob)
		r.Head(wire.PathBlobs+"/{id}", s.headBlob)
		r.Delete(wire.PathBlobs+"/{id}", s.deleteBlob)
		r.Get(wire.PathBlobs+"/{id}/checksum", s.rehashBlob)
		r.Get(wire.PathBlobs, s.listBlobs)
		r.Get(wire.PathStats, s.stats)
		r.Get(wire.PathScrub, s.scrubStatus)
	})
	return r
}

// autoWeight works out STORAGE_WEIGHT=auto: from STORAGE_CAPACITY_BYTES when
// set, else from the size of the device under the data directory.
func (s *Server) autoWeight(store blob.Store) float64 {
	capacity, from := s.cfg.CapacityBytes, "STORAGE_CAPACITY_BYTES"
	if capacity == 0 {
		from = "the data directory's device"
		if ur, ok := store.(blob.UsageReporter); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if u, err := ur.Usage(ctx); err == nil {
				capacity = u.TotalBytes
			}
			cancel()
		}
	}
	w := AutoWeight(capacity)
	s.log.Info(fmt.Sprintf("STORAGE_WEIGHT=auto: weight %v from %d bytes of %s (1 per TiB, at least %v)", w, capacity, from, AutoWeightFloor),
		"weight", w, "capacity_bytes", capacity)
	return w
}

// DiskID is the identity of the store the node serves, which it reports in
// its registration, its health answers and its stats.
func (s *Server) DiskID() string { return s.store.Identity() }

// Handler returns the node's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Close closes the store. Run and Serve do it themselves; Close is for
// callers that use only Handler.
func (s *Server) Close() error { return s.store.Close() }

// Run listens on the configured address and serves until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	addr := net.JoinHostPort(s.cfg.BindHost, strconv.Itoa(s.cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.store.Close()
		return errs.Wrap(errs.Unavailable, err, "listen on %s", addr)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln and registers with the coordinator until ctx is
// cancelled, then shuts down in order: stop registering, stop accepting,
// let requests in flight finish (for at most the shutdown timeout), close
// the store.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.cfg.PprofAddr != "" {
		if _, err := debugserver.Start(ctx, s.cfg.PprofAddr, s.log); err != nil {
			return errors.Join(err, ln.Close(), s.store.Close())
		}
	}
	srv := &http.Server{
		Handler: s.handler,
		// No read or write timeout: a blob transfer may rightly take minutes.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// A small read leaves with its head in one write (sendBlob).
		ConnContext: httpx.GatherContext,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(httpx.GatherListener(ln)) }()
	s.log.Info("storage node serving", "addr", ln.Addr().String(),
		"advertised", net.JoinHostPort(s.cfg.AdvertisedHost, strconv.Itoa(s.cfg.AdvertisedPort)),
		"capacity_bytes", s.cfg.CapacityBytes, "auth", s.cfg.ClusterToken != "")

	regCtx, stopRegistering := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.scrubber.Run(regCtx) })
	if s.reg != nil {
		wg.Go(func() { s.reg.run(regCtx) })
	} else {
		s.log.Info("COORDINATOR_URL is not set: the node will not register with a coordinator")
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stopRegistering()
	wg.Wait()

	s.log.Info("storage node stopping", "grace", s.cfg.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		s.log.Warn("requests still running at the end of the grace period were cut off", "err", err)
		srv.Close()
	}
	closeErr := s.store.Close()
	s.log.Info("storage node stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return errs.Wrap(errs.Unavailable, serveErr, "serve")
	}
	return closeErr
}
