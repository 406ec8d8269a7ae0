package metastore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta/postgres"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/testenv"
)

func TestOpenEmbeddedCreatesDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "coordinator", "data")
	s, err := Open(context.Background(), "", dir, sqlite.DefaultOptions(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.IsType(t, &sqlite.Store{}, s)
	_, err = os.Stat(filepath.Join(dir, "metadata.db"))
	require.NoError(t, err, "the embedded store lives at <dataDir>/metadata.db")
	require.NoError(t, s.Ping(context.Background()))
}

func TestOpenPostgresWhenURLIsSet(t *testing.T) {
	url := testenv.NewPostgresDB(t)
	s, err := Open(context.Background(), url, t.TempDir(), sqlite.DefaultOptions(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.IsType(t, &postgres.Store{}, s)
	require.NoError(t, s.Ping(context.Background()))
}

func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	cases := []struct {
		name, url, dir string
		kind           errs.Kind
	}{
		{"neither URL nor directory", "", "", errs.Invalid},
		{"data directory is a file", "", file, errs.Unavailable},
		{"malformed URL", "postgres://h:notaport/db", "", errs.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(context.Background(), tc.url, tc.dir, sqlite.DefaultOptions(), nil)
			require.Error(t, err)
			require.Equal(t, tc.kind, errs.KindOf(err), "%v", err)
		})
	}
}
