//go:build linux

package patronitest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestPrimaryLostKeepsEveryCommit commits rows through the multi-host URL,
// takes the primary away — crashed, or stopped by an operator — and
// requires the standby to be promoted with every committed row, and the same
// URL to reach it for writes.
func TestPrimaryLostKeepsEveryCommit(t *testing.T) {
	cases := []struct {
		name string
		lose func(*Cluster, *Member)
	}{
		{"killed", (*Cluster).Kill},
		{"stopped", (*Cluster).Stop},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Start(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, c.URL())
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `CREATE TABLE t (n int PRIMARY KEY)`)
			require.NoError(t, err)
			for n := range 100 {
				_, err := conn.Exec(ctx, `INSERT INTO t VALUES ($1)`, n)
				require.NoError(t, err)
			}
			require.NoError(t, conn.Close(ctx))

			old := c.Leader()
			require.NotNil(t, old)
			lost := time.Now()
			tc.lose(c, old)
			// A stopped leader hands over before its Patroni exits, so the
			// standby may already lead.
			require.NotSame(t, old, c.Leader(), "a member that is gone does not lead")
			leader := c.WaitLeader(3*TTL, old.Name)
			t.Logf("%s %s; %s promoted %s later", old.Name, tc.name, leader.Name, time.Since(lost).Round(time.Millisecond))

			conn, err = pgx.Connect(ctx, c.URL())
			require.NoError(t, err, "the multi-host URL reaches the new primary")
			defer conn.Close(ctx)
			var count int
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&count))
			require.Equal(t, 100, count, "every committed row survives the failover")
			_, err = conn.Exec(ctx, `INSERT INTO t VALUES (100)`)
			require.NoError(t, err, "the new primary takes writes with no standby left")
		})
	}
}
