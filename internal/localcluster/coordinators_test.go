//go:build linux

package localcluster

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

func TestSeveralCoordinatorsNeedPostgreSQL(t *testing.T) {
	_, err := Options{BinDir: "bin", Coordinators: 2}.withDefaults()
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.Contains(t, err.Error(), "DATABASE_URL is not set")
	_, err = Options{BinDir: "bin", Coordinators: 2, CoordinatorEnv: []string{"DATABASE_URL=postgres://x/y"}}.withDefaults()
	require.NoError(t, err)
	_, err = Options{BinDir: "bin", Coordinators: -1}.withDefaults()
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.Equal(t, "coordinator-3", CoordinatorNameOf(3))
	require.Equal(t, CoordinatorName, CoordinatorNameOf(1))
}

// TestThreeCoordinatorsBehindTheFront starts three coordinators over one
// PostgreSQL behind HAProxy: the nodes register through the front, every
// coordinator has its own port and data directory, the S3 listeners are
// fronted too, and the front answers while one coordinator is killed.
func TestThreeCoordinatorsBehindTheFront(t *testing.T) {
	bin := binaries(t)
	ports, err := FreePorts(DefaultHost, 1)
	require.NoError(t, err)
	s3Front := strconv.Itoa(ports[0])
	data := t.TempDir()
	c, err := Start(t.Context(), Options{
		BinDir: bin, DataDir: data, Nodes: 3, Coordinators: 3,
		CoordinatorEnv: []string{"DATABASE_URL=" + pgtest.Start(t).URL(), "HEALTH_CHECK_INTERVAL=1s", "S3_PORT=" + s3Front,
			"ROOT_ACCESS_KEY=FRONTROOT", "ROOT_SECRET_KEY=front-root-secret", "API_AUTH=open"},
		NodeEnv:     []string{"REGISTRATION_INTERVAL=1s"},
		StopTimeout: 5 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, c.WaitAdmitted(ctx))

	names := c.Coordinators()
	require.Equal(t, []string{CoordinatorName, "coordinator-2", "coordinator-3"}, names)
	for _, name := range names {
		require.Equal(t, http.StatusOK, readyStatus(c.NodeURL(name)), name)
		require.Equal(t, filepath.Join(data, name), procEnv(t, c.PID(name), "DATA_DIRECTORY"))
		require.NotEqual(t, c.CoordinatorURL(), c.NodeURL(name), "each coordinator has a port of its own")
		require.NotEqual(t, s3Front, procEnv(t, c.PID(name), "S3_PORT"))
	}
	require.NotZero(t, c.PID(HAProxyName))
	for _, name := range c.Nodes() {
		require.Equal(t, c.CoordinatorURL(), procEnv(t, c.PID(name), "COORDINATOR_URL"), "nodes register through the front")
	}

	// The S3 front reaches a coordinator's S3 listener: an unsigned
	// ListBuckets gets S3's refusal.
	resp, err := probe.Get("http://" + DefaultHost + ":" + s3Front + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "<Code>AccessDenied</Code>", "status %d", resp.StatusCode)

	require.NoError(t, c.KillNode("coordinator-2"))
	for range 20 {
		require.Equal(t, http.StatusOK, readyStatus(c.CoordinatorURL()), "the front answers through the others")
	}
	require.NoError(t, c.Stop())
}
