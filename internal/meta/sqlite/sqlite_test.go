package sqlite

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metatest"
)

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openTest(t testing.TB) *Store {
	return openAt(t, filepath.Join(t.TempDir(), "metadata.db"))
}

func TestConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store { return openTest(t) })
}

// BenchmarkStore runs the shared benchmarks. They write from one goroutine,
// so each write should have a COMMIT of its own (writes/commit 1, counted
// over the whole run, setup included): the committer never holds a lone
// writer back to wait for company.
func BenchmarkStore(b *testing.B) {
	metatest.RunBenchmarks(b, func(b *testing.B) meta.Store {
		s := openTest(b)
		b.Cleanup(func() {
			if d := countsOf(s); d.commits > 0 {
				b.ReportMetric(float64(d.ran)/float64(d.commits), "writes/commit")
			}
		})
		return s
	})
}
