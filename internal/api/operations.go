package api

import (
	"net/http"

	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/ops"
)

// Operations is the coordinator's record of its rebalances, drains, repairs
// and scrubs.
type Operations interface {
	List() ops.Snapshot
	RunningOn(kind ops.Kind, node string) (ops.Operation, bool)
}

var _ Operations = (*ops.Tracker)(nil)

func (s *server) operations(w http.ResponseWriter, _ *http.Request) {
	snap := ops.Snapshot{Running: []ops.Operation{}, Recent: []ops.Operation{}}
	if s.Operations != nil {
		snap = s.Operations.List()
	}
	httpx.WriteJSON(w, http.StatusOK, snap)
}
