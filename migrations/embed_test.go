package migrations

import (
	"embed"
	"io/fs"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

var migrationName = regexp.MustCompile(`^(\d{6})_([a-z0-9_]+)\.(up|down)\.sql$`)

// versions lists dir's migrations as version → title and checks that every
// file is well named, that every up has its down, and that versions run 1, 2,
// 3… without gaps, so a lost or misnumbered file fails here rather than on a
// database that has already recorded a version.
func versions(t *testing.T, fsys embed.FS, dir string) map[int]string {
	t.Helper()
	entries, err := fs.ReadDir(fsys, dir)
	require.NoError(t, err)
	titles := map[int]string{}
	halves := map[int]map[string]bool{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		require.NotNil(t, m, "%s/%s is not named NNNNNN_title.(up|down).sql", dir, e.Name())
		v, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		if old, ok := titles[v]; ok {
			require.Equal(t, old, m[2], "%s: version %d has two titles", dir, v)
		}
		titles[v] = m[2]
		if halves[v] == nil {
			halves[v] = map[string]bool{}
		}
		halves[v][m[3]] = true
		body, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		require.NoError(t, err)
		require.NotEmpty(t, body, "%s/%s is empty", dir, e.Name())
	}
	require.NotEmpty(t, titles, "%s holds no migrations", dir)
	for v := 1; v <= len(titles); v++ {
		require.Contains(t, titles, v, "%s: version %d is missing", dir, v)
		require.True(t, halves[v]["up"] && halves[v]["down"], "%s: version %d needs both an up and a down file", dir, v)
	}
	return titles
}

func TestMigrationsArePairedAndContiguous(t *testing.T) {
	versions(t, Postgres, PostgresDir)
	versions(t, SQLite, SQLiteDir)
}

func TestDialectsHaveTheSameVersions(t *testing.T) {
	require.Equal(t, versions(t, Postgres, PostgresDir), versions(t, SQLite, SQLiteDir),
		"a version number must name the same schema in both dialects")
}
