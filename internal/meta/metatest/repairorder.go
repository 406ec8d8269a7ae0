package metatest

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// riskFixture holds files at every level of risk, named by what they are.
type riskFixture struct {
	failed, oneOlder, one, two, active, deleted, pending string
}

func newRiskFixture(t *testing.T, s meta.Store) riskFixture {
	t.Helper()
	addNodes(t, s, "n1", "n2", "n3")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const act, fail, del, pend = meta.ReplicaActive, meta.ReplicaFailed, meta.ReplicaDeleting, meta.ReplicaPending
	mk := func(st meta.FileStatus, updated time.Duration, copies map[string]meta.ReplicaStatus) string {
		rec := newFile(1, copies)
		rec.Status, rec.CreatedAt, rec.UpdatedAt = st, t0, t0.Add(updated)
		return createFile(t, s, rec).ID
	}
	return riskFixture{
		// The youngest of all, yet first: it has no copy left.
		failed:   mk(meta.FileFailed, 5*time.Minute, map[string]meta.ReplicaStatus{"n1": fail}),
		oneOlder: mk(meta.FileDegraded, time.Minute, map[string]meta.ReplicaStatus{"n1": act, "n2": fail}),
		one:      mk(meta.FileDegraded, 2*time.Minute, map[string]meta.ReplicaStatus{"n2": act}),
		// The oldest, yet after both: it has two copies.
		two:     mk(meta.FileDegraded, 0, map[string]meta.ReplicaStatus{"n1": act, "n3": act}),
		active:  mk(meta.FileActive, 0, map[string]meta.ReplicaStatus{"n1": act, "n2": act, "n3": act}),
		deleted: mk(meta.FileDeleted, 0, map[string]meta.ReplicaStatus{"n1": del}),
		pending: mk(meta.FilePending, time.Minute, map[string]meta.ReplicaStatus{"n1": pend}),
	}
}

// testRepairOrder: the repair loop's selection and a rebalance's order put
// the files with the fewest ACTIVE copies first, then the oldest, and follow
// every change of a copy.
func testRepairOrder(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	f := newRiskFixture(t, s)
	repairable := []meta.FileStatus{meta.FileDegraded, meta.FileFailed}
	later := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	got, err := s.FileIDsByStatus(ctx, repairable, later, 10)
	require.NoError(t, err)
	require.Equal(t, []string{f.failed, f.oneOlder, f.one, f.two}, got)
	got, err = s.FileIDsByStatus(ctx, repairable, later, 2)
	require.NoError(t, err)
	require.Equal(t, []string{f.failed, f.oneOlder}, got, "a bounded pass takes the files closest to loss")

	unknown := uuid.NewString()
	all := []string{f.pending, f.two, f.active, f.deleted, f.one, unknown, f.failed, f.oneOlder, f.one}
	got, err = s.FileIDsByRisk(ctx, all)
	require.NoError(t, err)
	require.Equal(t, []string{f.failed, f.oneOlder, f.one, f.two, f.active, f.deleted, f.pending}, got,
		"readable files by copies then age, each once, the unknown left out, deleted and pending last")

	// A second copy of "one" puts it behind "two", older with as many.
	rec, err := s.GetFile(ctx, f.one)
	require.NoError(t, err)
	rec.Replicas = append(rec.Replicas, meta.Replica{FileID: f.one, NodeID: "n3", Status: meta.ReplicaActive})
	require.NoError(t, s.UpdateFile(ctx, &rec))
	got, err = s.FileIDsByRisk(ctx, []string{f.two, f.one, f.oneOlder})
	require.NoError(t, err)
	require.Equal(t, []string{f.oneOlder, f.two, f.one}, got)

	got, err = s.FileIDsByRisk(ctx, nil)
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Empty(t, got)
	_, err = s.FileIDsByRisk(ctx, []string{f.one, "not-a-file-id"})
	requireKind(t, err, errs.Invalid)
}

// testRepairQueue: the files waiting for repair, by ACTIVE copies, following
// the copies' changes.
func testRepairQueue(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	q, err := s.RepairQueue(ctx)
	require.NoError(t, err)
	require.Empty(t, q)

	f := newRiskFixture(t, s)
	q, err = s.RepairQueue(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int]int{0: 1, 1: 2, 2: 1}, q, "DEGRADED and FAILED only")

	rec, err := s.GetFile(ctx, f.two)
	require.NoError(t, err)
	rec.Replicas[0].Status = meta.ReplicaFailed
	require.NoError(t, s.UpdateFile(ctx, &rec))
	q, err = s.RepairQueue(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int]int{0: 1, 1: 3}, q)
}
