//go:build linux

package pgtest

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func query(ctx context.Context, dsn, sql string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var out string
	return out, conn.QueryRow(ctx, sql).Scan(&out)
}

func TestServerSurvivesStopAndKillWithItsData(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	u, err := url.Parse(s.URL())
	require.NoError(t, err)
	require.Equal(t, "/"+Database, u.Path)
	require.Equal(t, "127.0.0.1", u.Hostname())

	conn, err := pgx.Connect(ctx, s.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('before')`)
	require.NoError(t, err)
	conn.Close(ctx)

	faults := []struct {
		name  string
		fault func()
	}{
		{"stop", s.Stop},
		{"kill", s.Kill},
	}
	for _, f := range faults {
		// A session open across the fault must end with it, as must its
		// backend process.
		open, err := pgx.Connect(ctx, s.URL())
		require.NoError(t, err)
		var backend int
		require.NoError(t, open.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend))

		f.fault()
		require.False(t, s.Running(), f.name)
		short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
		_, err = query(short, s.URL(), `SELECT 'x'`)
		require.Error(t, err, "the server answers after %s", f.name)
		_, err = open.Exec(short, `SELECT 1`)
		require.Error(t, err, "a session outlived the %s server", f.name)
		cancelShort()
		open.Close(ctx)
		if state, _, ok := procStat(backend); ok {
			require.Equal(t, byte('Z'), state, "backend %d outlived the %s server", backend, f.name)
		}

		s.Restart()
		require.True(t, s.Running())
		got, err := query(ctx, s.URL(), `SELECT string_agg(v, ',') FROM kept`)
		require.NoError(t, err, "after %s", f.name)
		require.Equal(t, "before", got, "after %s", f.name)
	}
}

func TestEachServerIsPrivate(t *testing.T) {
	t.Parallel()
	a, b := Start(t), Start(t)
	require.NotEqual(t, a.Port(), b.Port())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	a.Kill()
	got, err := query(ctx, b.URL(), `SELECT current_database()`)
	require.NoError(t, err, "killing one server must not touch another")
	require.Equal(t, Database, got)
	require.True(t, strings.HasPrefix(b.URL(), "postgres://postgres@127.0.0.1:"))
}
