package api

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"

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

// ScrubTrigger is the trigger of a scrub pass: each begins when the node's
// SCRUB_PERIOD comes round.
const ScrubTrigger = "SCRUB_PERIOD"

// ScrubPassReport is the report of a scrub pass in the operations list,
// shown while it runs too: the copies and bytes it has hashed and the
// corrupt copies (checksum mismatches) it has found.
type ScrubPassReport struct {
	CopiesScrubbed   int64 `json:"copiesScrubbed"`
	BytesScrubbed    int64 `json:"bytesScrubbed"`
	CorruptionsFound int64 `json:"corruptionsFound"`
	// Behind: the rest of a running pass cannot be read within the period
	// at the node's bandwidth.
	Behind bool `json:"behind"`
}

// operations lists the tracker's operations with the nodes' scrub passes.
// The passes are the nodes' own record, asked for now: a node that does not
// answer lists none.
func (s *server) operations(w http.ResponseWriter, r *http.Request) {
	snap := ops.Snapshot{Running: []ops.Operation{}, Recent: []ops.Operation{}}
	if s.Operations != nil {
		snap = s.Operations.List()
	}
	if s.Scrub != nil {
		rep, err := s.Scrub.Scrub(r.Context())
		if err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		running, recent := scrubOperations(rep, time.Now())
		snap.Running = append(snap.Running, running...)
		snap.Recent = append(snap.Recent, recent...)
		slices.SortStableFunc(snap.Running, func(a, b ops.Operation) int { return a.StartedAt.Compare(b.StartedAt) })
		slices.SortStableFunc(snap.Recent, func(a, b ops.Operation) int {
			return cmp.Compare(finished(b), finished(a))
		})
	}
	httpx.WriteJSON(w, http.StatusOK, snap)
}

func finished(o ops.Operation) int64 {
	if o.FinishedAt == nil {
		return 0
	}
	return o.FinishedAt.UnixNano()
}

// scrubOperations turns the nodes' scrubbers into operations: each
// reachable node's running pass and its last complete one. A pass's id is
// the node and the time it began, so it stays the same from one answer to
// the next.
func scrubOperations(rep ScrubReport, now time.Time) (running, recent []ops.Operation) {
	for _, n := range rep.Nodes {
		if !n.Reachable {
			continue
		}
		if n.Running && n.PeriodStart != nil {
			op := scrubOp(n.NodeID, *n.PeriodStart, ops.Running, n.CopiesScrubbed, max(n.CopiesTotal, n.CopiesScrubbed), n.BytesScrubbed)
			elapsed := now.Sub(*n.PeriodStart).Seconds()
			if elapsed > 0 {
				op.BytesPerSecond = float64(op.BytesDone) / elapsed
			}
			if op.Done > 0 {
				eta := max(0, elapsed*float64(op.Total-op.Done)/float64(op.Done))
				op.EtaSeconds = &eta
			}
			op.Report = ScrubPassReport{CopiesScrubbed: n.CopiesScrubbed, BytesScrubbed: n.BytesScrubbed,
				CorruptionsFound: n.CorruptionsFound, Behind: n.Behind}
			running = append(running, op)
		}
		if p := n.LastPass; p != nil {
			op := scrubOp(n.NodeID, p.StartedAt, ops.Done, p.Copies, p.Copies, p.Bytes)
			end := p.FinishedAt.UTC()
			op.FinishedAt = &end
			if took := end.Sub(p.StartedAt).Seconds(); took > 0 {
				op.BytesPerSecond = float64(p.Bytes) / took
			}
			op.Report = ScrubPassReport{CopiesScrubbed: p.Copies, BytesScrubbed: p.Bytes, CorruptionsFound: p.CorruptionsFound}
			recent = append(recent, op)
		}
	}
	return running, recent
}

func scrubOp(node string, start time.Time, state ops.State, done, total, bytes int64) ops.Operation {
	return ops.Operation{
		ID:   "scrub-" + node + "-" + strconv.FormatInt(start.UnixMilli(), 36),
		Kind: ops.Scrub, Trigger: ScrubTrigger, NodeID: node, State: state,
		Done: done, Total: total, BytesDone: bytes, StartedAt: start.UTC(),
	}
}
