package rebalance

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/ring"
)

func TestRunsReconcileInRiskOrderAndFallBackToTheListedOne(t *testing.T) {
	rg := ring.New(100, "n1", "n2", "n3")
	cases := []struct {
		name  string
		order func(context.Context, []string) ([]string, error)
		want  []string
	}{
		// "a" and "b" are on the node (FileIDsOnNode); the store knows only
		// "b" still exists, so "a" comes last (its reconcile finds it gone).
		{"ordered, gone files last", func(_ context.Context, ids []string) ([]string, error) {
			require.Equal(t, []string{"a", "b"}, ids)
			return []string{"b"}, nil
		}, []string{"b", "a"}},
		{"the order given is the order taken", func(_ context.Context, ids []string) ([]string, error) {
			out := slices.Clone(ids)
			slices.Reverse(out)
			return out, nil
		}, []string{"b", "a"}},
		{"ordering failed", func(context.Context, []string) ([]string, error) {
			return nil, errors.New("metadata store down")
		}, []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &countingReconciler{}
			b := New(Options{Store: &recordingStore{}, Reconciler: rec, Ring: func() *ring.Ring { return rg },
				Parallelism: 1, RiskOrder: tc.order})
			rep, err := b.Run(context.Background(), Failed, "n2")
			require.NoError(t, err)
			require.True(t, rep.Complete)
			require.Equal(t, tc.want, rec.seen, "reconciled one at a time, in this order")
			require.Equal(t, len(tc.want), rep.FilesScanned)
		})
	}
}
