// Package api is the coordinator's REST API: routing, request decoding,
// response encoding and the edge middleware (request ids, access logs,
// internal-call authentication). It holds no cluster logic; every handler
// delegates to a service and turns its error into the one error shape
// through httpx.
package api

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/console"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/membership"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/openapi"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/ring"
)

// Files is the file service as the API uses it.
type Files interface {
	Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error)
	Open(ctx context.Context, id string, q byterange.Request) (*files.Download, error)
	Metadata(ctx context.Context, id string) (meta.FileRecord, error)
	Locations(ctx context.Context, id string) (files.Locations, error)
	List(ctx context.Context, statuses []meta.FileStatus, page, size int, visibleTo string) ([]meta.File, int, error)
	Delete(ctx context.Context, id string) (files.DeleteResult, error)
	Verify(ctx context.Context, id string) (files.VerifyResult, error)
}

// Members is membership as the API uses it.
type Members interface {
	Ring() *ring.Ring
	Register(ctx context.Context, a membership.Announcement) (meta.Node, error)
	Node(ctx context.Context, id string) (meta.Node, error)
	Nodes(ctx context.Context) ([]meta.Node, error)
	Deregister(ctx context.Context, id string) (meta.Node, error)
	Rejoin(ctx context.Context, id string) (meta.Node, error)
	SetPlacement(ctx context.Context, id string, e membership.PlacementEdit) (meta.Node, error)
	Sweep(ctx context.Context) ([]membership.NodeHealth, error)
}

// Rebalancer runs rebalances and drains.
type Rebalancer interface {
	Run(ctx context.Context, trigger rebalance.Trigger, node string) (rebalance.Report, error)
	Drain(ctx context.Context, node string) (rebalance.DrainReport, error)
	DrainProgress(ctx context.Context, node string) (rebalance.DrainReport, error)
	PlanDrain(ctx context.Context, node string) (rebalance.DrainPlan, error)
}

// Health reports the cluster's health.
type Health interface {
	Cluster(ctx context.Context) HealthReport
	Ready(ctx context.Context) error
}

// Options wires the API to its services.
type Options struct {
	Files Files
	// Uploads serves the upload sessions under /api/uploads; nil leaves
	// those routes out.
	Uploads    Uploads
	Members    Members
	Rebalancer Rebalancer
	Health     Health
	Durability Durability
	Scrub      Scrub
	// Operations, when set, answers GET /api/cluster/operations and adds a
	// running drain to its node.
	Operations Operations
	Logger     *slog.Logger
	// Token, when set, must accompany node-facing calls (registration).
	Token string
	// MaxFileSize bounds an upload's file part; the whole body may exceed it
	// by the multipart framing allowance.
	MaxFileSize int64
	// Metrics serves /metrics; nil leaves the route out.
	Metrics http.Handler
	// NodeStats, when set, asks a node for what it stores; GET /api/nodes
	// and /api/nodes/{id} show the answer when it comes within a second.
	NodeStats func(ctx context.Context, nodeID string) (NodeStorage, error)
	// Observe wraps every request, for metrics; nil means none.
	Observe func(route, method string, status int, seconds float64)
	// Auth, when set, checks every request's key (see auth.Keys.REST).
	Auth func(http.Handler) http.Handler
	// Keys serves /api/admin/keys; nil leaves the routes out.
	Keys Keys
	// Namespace and Objects, when set, serve the named objects under
	// /api/buckets, and the metadata of a file names the object it holds.
	Namespace meta.Namespace
	Objects   Objects
	// RootKey owns the buckets created through an open API.
	RootKey string
}

type server struct{ Options }

// New returns the coordinator's HTTP handler.
func New(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{o}
	r := chi.NewRouter()
	r.NotFound(httpx.NotFoundHandler)
	r.MethodNotAllowed(httpx.MethodNotAllowedHandler)
	r.Use(httpx.RequestID, httpx.AccessLog(o.Logger, o.Observe), httpx.Recover(o.Logger))
	if o.Auth != nil {
		r.Use(o.Auth)
	}

	// The version lets an operator see which build each replica runs
	// without a shell on its host.
	r.Get("/health/live", func(w http.ResponseWriter, _ *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "UP", "version": buildinfo.Version()})
	})
	r.Get("/health/ready", s.ready)
	if o.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", o.Metrics)
	}
	// The API's own description and Swagger UI, served from the binary.
	docs := openapi.Handler()
	r.Method(http.MethodGet, openapi.DocumentPath, docs)
	r.Method(http.MethodGet, "/swagger-ui", docs)
	r.Method(http.MethodGet, openapi.UIPath+"*", docs)
	// The console, on this router so that whatever guards the API guards
	// it too.
	ui := console.Handler()
	r.Method(http.MethodGet, strings.TrimSuffix(console.Path, "/"), ui)
	r.Method(http.MethodGet, console.Path+"*", ui)
	r.Get("/", home)

	r.Route("/api", func(r chi.Router) {
		r.Post("/files", s.upload)
		r.Get("/files", s.listFiles)
		r.Get("/files/{fileId}", s.download)
		r.Get("/files/{fileId}/metadata", s.metadata)
		r.Get("/files/{fileId}/locations", s.locations)
		r.Delete("/files/{fileId}", s.deleteFile)
		r.Post("/files/{fileId}/verify", s.verify)
		if o.Uploads != nil {
			s.routeUploads(r)
		}

		r.With(s.requireToken).Post("/nodes/register", s.register)
		r.Get("/nodes", s.listNodes)
		r.Get("/nodes/ring", s.ringInfo)
		r.Get("/nodes/{nodeId}", s.getNode)
		r.Delete("/nodes/{nodeId}", s.deregister)
		r.Post("/nodes/{nodeId}/rejoin", s.rejoin)
		r.Put("/nodes/{nodeId}/placement", s.setPlacement)
		r.With(s.requireToken).Post("/nodes/{nodeId}/corrupt", s.reportCorrupt)

		r.Get("/health", s.clusterHealth)
		r.Get("/cluster/durability", s.durability)
		r.Get("/cluster/scrub", s.scrub)
		r.Get("/cluster/operations", s.operations)
		r.Post("/admin/rebalance", s.rebalance)
		r.Post("/admin/health-check", s.healthCheck)
		if o.Namespace != nil && o.Objects != nil {
			r.Get("/buckets", s.listBuckets)
			r.Put("/buckets/{bucket}", s.createBucket)
			r.Get("/buckets/{bucket}/objects", s.listObjects)
			r.Put("/buckets/{bucket}/object", s.putObject)
			r.Get("/buckets/{bucket}/object", s.getObject)
			r.Delete("/buckets/{bucket}/object", s.deleteObject)
		}
		if o.Keys != nil {
			r.Post("/admin/keys", s.createKey)
			r.Get("/admin/keys", s.listKeys)
			r.Delete("/admin/keys/{accessKey}", s.deleteKey)
		}
	})
	return r
}

// home sends a browser that opens the coordinator to the console. Only
// exactly / is redirected; any other unknown path stays the router's JSON
// 404.
//
// 302 Found, a temporary redirect: a 301 or 308 would be cached by browsers,
// and / has led elsewhere before (to Swagger UI) and may again. The Location
// is relative, so it also works behind a proxy that adds a path prefix.
func home(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Location", strings.TrimPrefix(console.Path, "/"))
	w.WriteHeader(http.StatusFound)
}

// requireToken enforces CLUSTER_TOKEN as a bearer token.
func (s *server) requireToken(next http.Handler) http.Handler {
	if s.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			httpx.WriteError(w, r, errs.E(errs.Unauthorized, "missing or wrong cluster token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.Health.Ready(r.Context()); err != nil {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "DOWN", "reason": err.Error()})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "UP"})
}

// decodeJSON reads a small JSON body into v.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(v); err != nil {
		return errs.Wrap(errs.Invalid, err, "malformed JSON body")
	}
	return nil
}

// asKind gives reader errors of the request body a kind: an oversized body is
// TooLarge, anything else while reading the client's bytes is Invalid.
type kindReader struct{ r io.Reader }

func (k kindReader) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if err != nil && err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return n, errs.Wrap(errs.TooLarge, err, "request body exceeds the limit")
		}
		if errs.KindOf(err) == errs.Other {
			return n, errs.Wrap(errs.Invalid, err, "read request body")
		}
	}
	return n, err
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
