//go:build linux

package patronitest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestKilledPrimaryIsReplacedWithEveryCommit commits rows through the
// multi-host URL, kills the primary, and requires the standby to be promoted
// with every committed row, and the same URL to reach it for writes.
func TestKilledPrimaryIsReplacedWithEveryCommit(t *testing.T) {
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
	killed := time.Now()
	c.Kill(old)
	require.Nil(t, c.Leader(), "a killed member does not lead")
	leader := c.WaitLeader(3*TTL, old.Name)
	t.Logf("%s killed; %s promoted %s later", old.Name, leader.Name, time.Since(killed).Round(time.Millisecond))

	conn, err = pgx.Connect(ctx, c.URL())
	require.NoError(t, err, "the multi-host URL reaches the new primary")
	defer conn.Close(ctx)
	var count int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&count))
	require.Equal(t, 100, count, "every committed row survives the failover")
	_, err = conn.Exec(ctx, `INSERT INTO t VALUES (100)`)
	require.NoError(t, err, "the new primary takes writes with no standby left")
}
