package api

import (
	"context"
	"net/http"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/httpx"
)

// Durability answers GET /api/cluster/durability.
type Durability interface {
	Durability(ctx context.Context) (DurabilityReport, error)
}

// The answer of GET /api/cluster/durability, defined with the client's in
// apiwire.
type (
	DurabilityReport = apiwire.DurabilityReport
	NodeRisk         = apiwire.NodeRisk
	ZoneRisk         = apiwire.ZoneRisk
)

func (s *server) durability(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Durability.Durability(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
}
