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
		return openTest(t, testenv.NewPostgresDB(t))
	})
}

func BenchmarkStore(b *testing.B) {
	metatest.RunBenchmarks(b, func(b *testing.B) meta.Store {
		return openTest(b, testenv.NewPostgresDB(b))
	})
}

func TestNamespaceConformance(t *testing.T) {
	metatest.RunNamespace(t, func(t *testing.T) metatest.NamespaceStore {
		return openTest(t, testenv.NewPostgresDB(t))
	})
}
