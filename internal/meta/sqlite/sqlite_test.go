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

func BenchmarkStore(b *testing.B) {
	metatest.RunBenchmarks(b, func(b *testing.B) meta.Store { return openTest(b) })
}
