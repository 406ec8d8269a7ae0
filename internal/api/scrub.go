package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Scrub is the coordinator's side of the nodes' scrubbers: it gathers their
// progress and takes the corrupt copies they report.
type Scrub interface {
	Scrub(ctx context.Context) (ScrubReport, error)
	ReportCorrupt(ctx context.Context, id, node string) (files.CorruptReportResult, error)
}

// ScrubReport answers GET /api/cluster/scrub (API.md, "Scrubbing").
type ScrubReport struct {
	Nodes []NodeScrub `json:"nodes"`
}

// NodeScrub is one node's scrubber as the coordinator saw it. A node that did
// not answer has Reachable false, Error set and its figures zero.
type NodeScrub struct {
	NodeID    string `json:"nodeId"`
	Status    string `json:"status"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	wire.ScrubProgress
	// LastPass is the node's last complete pass; GET /api/cluster/operations
	// lists it, this answer does not.
	LastPass *wire.ScrubPass `json:"-"`
}

func (s *server) scrub(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Scrub.Scrub(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
}

// reportCorrupt takes a node's report of a corrupt copy (cluster token).
func (s *server) reportCorrupt(w http.ResponseWriter, r *http.Request) {
	node := chi.URLParam(r, "nodeId")
	var rep wire.CorruptReport
	if err := decodeJSON(r, &rep); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if rep.BlobID == "" {
		httpx.WriteError(w, r, errs.E(errs.Invalid, "blobId is required"))
		return
	}
	if _, err := s.Members.Node(r.Context(), node); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res, err := s.Scrub.ReportCorrupt(r.Context(), rep.BlobID, node)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}
