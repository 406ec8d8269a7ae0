package postgres

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metatest"
	"github.com/dfs-project/dfs/internal/testenv"
)

func openTest(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	metatest.Run(t, func(t *testing.T) meta.Store {
		return openCounted(t, testenv.NewPostgresDB(t))
	})
}

// openCounted is openTest whose test ends by checking every file's
// active_copies against its copies: no trigger keeps the column (migration
// 8), the writes that change copies set it, and every conformance case is a
// mix of such writes.
func openCounted(t *testing.T, url string) *Store {
	s := openTest(t, url)
	t.Cleanup(func() { // runs before openTest's Close
		var wrong int
		require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM files f WHERE f.active_copies <>
			(SELECT count(*) FROM file_replicas r WHERE r.file_id = f.id AND r.status = 'ACTIVE')`).Scan(&wrong))
		require.Zero(t, wrong, "files whose active_copies is not their count of ACTIVE copies")
	})
	return s
}

func BenchmarkStore(b *testing.B) {
	metatest.RunBenchmarks(b, func(b *testing.B) meta.Store {
		return openTest(b, testenv.NewPostgresDB(b))
	})
}

func TestNamespaceConformance(t *testing.T) {
	metatest.RunNamespace(t, func(t *testing.T) metatest.NamespaceStore {
		return openCounted(t, testenv.NewPostgresDB(t))
	})
}
