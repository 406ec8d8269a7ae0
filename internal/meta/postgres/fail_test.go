package postgres

import (
	"context"
	"io"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/testenv"
)

// TestFailKinds holds the kinds the store gives the errors a failover and
// its neighbours produce: whatever says the database cannot serve now is
// Unavailable (503 METADATA_UNAVAILABLE), never Other (500).
func TestFailKinds(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want errs.Kind
	}{
		{"a write on a standby or a demoted primary", &pgconn.PgError{Code: "25006"}, errs.Unavailable},
		{"terminated by a shutdown", &pgconn.PgError{Code: "57P01"}, errs.Unavailable},
		{"the server is starting up", &pgconn.PgError{Code: "57P03"}, errs.Unavailable},
		{"the connection failed", &pgconn.PgError{Code: "08006"}, errs.Unavailable},
		{"too many connections", &pgconn.PgError{Code: "53300"}, errs.Unavailable},
		{"the connection closed mid-answer", io.ErrUnexpectedEOF, errs.Unavailable},
		{"a duplicate key", &pgconn.PgError{Code: "23505"}, errs.Conflict},
		{"a serialization failure", &pgconn.PgError{Code: "40001"}, errs.Conflict},
		{"a value too long", &pgconn.PgError{Code: "22001"}, errs.Invalid},
		{"an unknown table", &pgconn.PgError{Code: "42P01"}, errs.Other},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, errs.KindOf(fail(context.Background(), tc.err, "op")))
		})
	}
}

// TestConnectRefusedByTheServerIsUnavailable opens a connection the server
// refuses after the handshake began (a database it does not have, as on a
// standby that has not replayed its creation yet): unavailable, not a 500.
func TestConnectRefusedByTheServerIsUnavailable(t *testing.T) {
	u, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	u.Path = "/dfs_no_such_database"
	_, err = pgx.Connect(context.Background(), u.String())
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "3D000", pgErr.Code)
	requireUnavailable(t, fail(context.Background(), err, "connect"))
}
