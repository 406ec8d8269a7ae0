package api

import (
	"context"
	"net/http"

	"github.com/dfs-project/dfs/internal/httpx"
)

// Durability answers GET /api/cluster/durability.
type Durability interface {
	Durability(ctx context.Context) (DurabilityReport, error)
}

// DurabilityReport is how safe the readable files are right now (API.md,
// "Durability"). A healthy copy is an ACTIVE copy on a HEALTHY node.
type DurabilityReport struct {
	// FilesByCopies maps a number of healthy copies, as a decimal string, to
	// the number of readable files with exactly that many (a chunked file
	// once, by its chunk with the fewest). Every count from
	// "0" to the replication factor is present; a larger one only while
	// some file has it (a copy being moved).
	FilesByCopies     map[string]int `json:"filesByCopies"`
	Files             int            `json:"files"`
	BytesAtRisk       int64          `json:"bytesAtRisk"`
	FailureHeadroom   int            `json:"failureHeadroom"`
	ReplicationFactor int            `json:"replicationFactor"`
	HealthyNodes      int            `json:"healthyNodes"`
	Nodes             []NodeRisk     `json:"nodes"`
}

// NodeRisk is what one node's failure would do now. A node that is not
// HEALTHY holds no healthy copy, so its numbers are 0.
type NodeRisk struct {
	NodeID               string `json:"nodeId"`
	Status               string `json:"status"`
	FilesLeftWithOneCopy int    `json:"filesLeftWithOneCopy"`
	FilesLeftWithNoCopy  int    `json:"filesLeftWithNoCopy"`
}

func (s *server) durability(w http.ResponseWriter, r *http.Request) {
	rep, err := s.Durability.Durability(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, rep)
}
