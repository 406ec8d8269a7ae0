//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
	"github.com/dfs-project/dfs/internal/testenv/pgtest"
)

// exercise runs one of every kind of call a user makes and returns the files
// still stored: uploads, reads, a delete, a verify and a manual rebalance,
// each of which must do its whole work now.
func (c *cluster) exercise(phase string, files []stored) []stored {
	c.t.Helper()
	for i := range 3 {
		files = append(files, c.mustUpload(fmt.Sprintf("%s-%d.bin", phase, i), randomBytes(16<<10)))
	}
	for _, f := range files {
		c.mustRead(f)
	}
	ctx, cancel := callCtx()
	defer cancel()
	gone := files[0]
	del, err := c.api.Delete(ctx, gone.res.FileID)
	require.NoError(c.t, err, "%s: delete", phase)
	require.True(c.t, del.Complete, "%s: every holder is up, yet the delete is not complete: %+v", phase, del)
	_, err = c.api.Metadata(ctx, gone.res.FileID)
	requireAPIError(c.t, err, 404, "FILE_NOT_FOUND")
	files = files[1:]
	v, err := c.api.Verify(ctx, files[0].res.FileID)
	require.NoError(c.t, err, "%s: verify", phase)
	require.Equal(c.t, 3, v.HealthyCopies, "%s: %+v", phase, v)
	rep := c.rebalanceNow()
	require.Zero(c.t, rep["failures"], "%s: %v", phase, rep)
	require.Equal(c.t, float64(len(c.files())), rep["filesScanned"], "%s: the rebalance did not visit every file: %v", phase, rep)
	return files
}

// rebalanceNow runs POST /api/admin/rebalance and returns the report as the
// coordinator wrote it, fields the typed client does not know included.
func (c *cluster) rebalanceNow() map[string]any {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.lc.CoordinatorURL()+"/api/admin/rebalance", nil)
	require.NoError(c.t, err)
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	var rep map[string]any
	require.NoError(c.t, json.NewDecoder(resp.Body).Decode(&rep))
	require.Equal(c.t, http.StatusOK, resp.StatusCode, "%v", rep)
	require.NotEqual(c.t, true, rep["skipped"], "the rebalance was skipped: %v", rep)
	return rep
}

// requireRedisDown checks the cluster health's view of a Redis that is down:
// the cluster is never DOWN for it, and a coordinator that reports Redis
// says it is down and the cluster DEGRADED.
func (c *cluster) requireRedisDown() {
	c.t.Helper()
	ctx, cancel := callCtx()
	defer cancel()
	h, err := c.api.Health(ctx)
	require.NoError(c.t, err)
	require.NotEqual(c.t, client.HealthDown, h.Status, "Redis never takes the cluster down: %+v", h)
	if h.Redis.Status != "DISABLED" {
		require.Equal(c.t, "DOWN", h.Redis.Status, "%+v", h)
		require.Equal(c.t, client.HealthDegraded, h.Status, "%+v", h)
	}
}

func TestRedisKilledUploadsReadsAndHealthGoOn(t *testing.T) {
	t.Parallel()
	rd := redistest.Start(t)
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"REDIS_URL=" + rd.URL()}})
	files := c.exercise("redis-up", c.uploadRandom(3, 16<<10))

	rd.Kill()
	for i := range 3 {
		files = append(files, c.mustUpload(fmt.Sprintf("redis-down-%d.bin", i), randomBytes(16<<10)))
	}
	for _, f := range files {
		c.mustRead(f)
		require.Equal(t, client.FileActive, c.metadata(f.res.FileID).Status)
	}
	ctx, cancel := callCtx()
	defer cancel()
	v, err := c.api.Verify(ctx, files[0].res.FileID)
	require.NoError(t, err)
	require.Equal(t, 3, v.HealthyCopies, "%+v", v)
	c.requireRedisDown()

	rd.Restart()
	eventually(t, settleTimeout, "Redis seen back", func() (bool, string) {
		h, err := c.api.Health(ctx)
		require.NoError(t, err)
		return h.Redis.Status == "UP" || h.Redis.Status == "DISABLED", fmt.Sprintf("%+v", h.Redis)
	})
	for i := range 3 {
		files = append(files, c.mustUpload(fmt.Sprintf("redis-back-%d.bin", i), randomBytes(16<<10)))
	}
	for _, f := range files {
		c.mustRead(f)
	}
}

// readyStatus is the status of the coordinator's readiness probe.
func (c *cluster) readyStatus() int {
	c.t.Helper()
	resp, err := c.http.Get(c.lc.CoordinatorURL() + "/health/ready")
	require.NoError(c.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestPostgresDownFailsFastAndServiceResumesWithoutARestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"DATABASE_URL=" + pg.URL()}})
	all := c.lc.Nodes()
	files := c.uploadRandom(6, 16<<10)
	pid := c.lc.PID(localcluster.CoordinatorName)

	for _, fault := range []struct {
		name string
		do   func()
	}{
		{"killed", pg.Kill},
		{"stopped", pg.Stop},
	} {
		held := c.heldBlobs(all...)
		writes := map[string]map[string]string{}
		for _, n := range all {
			writes[n] = c.writes(n)
		}
		fault.do()

		// Every call that needs metadata fails at once with the one clear
		// answer; none waits for a database that is not there.
		f := files[0].res.FileID
		calls := []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"metadata", func(ctx context.Context) error { _, err := c.api.Metadata(ctx, f); return err }},
			{"list", func(ctx context.Context) error { _, err := c.api.List(ctx, 0, 20, nil); return err }},
			{"download", func(ctx context.Context) error { _, _, err := c.download(ctx, f); return err }},
			{"upload", func(ctx context.Context) error {
				_, err := c.api.Upload(ctx, "x.bin", bytes.NewReader(randomBytes(4096)), 4096, client.UploadOptions{})
				return err
			}},
			{"delete", func(ctx context.Context) error { _, err := c.api.Delete(ctx, f); return err }},
			{"verify", func(ctx context.Context) error { _, err := c.api.Verify(ctx, f); return err }},
			{"node", func(ctx context.Context) error { _, err := c.api.Node(ctx, all[0]); return err }},
		}
		for _, call := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			err := call.call(ctx)
			took := time.Since(start)
			cancel()
			requireAPIError(t, err, 503, "METADATA_UNAVAILABLE", "%s with PostgreSQL %s", call.name, fault.name)
			t.Logf("PostgreSQL %s: %s answered 503 METADATA_UNAVAILABLE in %v", fault.name, call.name, took.Round(time.Millisecond))
		}
		require.Equal(t, http.StatusServiceUnavailable, c.readyStatus())
		ctx, cancel := callCtx()
		h, err := c.api.Health(ctx)
		cancel()
		require.NoError(t, err)
		require.Equal(t, client.HealthDown, h.Status, "%+v", h)
		require.Equal(t, "DOWN", h.MetadataStore.Status, "%+v", h)

		// Nothing must change on the nodes while the metadata is away: a
		// window of several repair passes and health sweeps.
		time.Sleep(3 * time.Second)
		require.Equal(t, held, c.heldBlobs(all...), "blobs changed while PostgreSQL was %s", fault.name)
		for _, n := range all {
			require.Equal(t, writes[n], c.writes(n), "blobs on %s rewritten while PostgreSQL was %s", n, fault.name)
		}
		spool, err := os.ReadDir(filepath.Join(c.lc.DataDir(localcluster.CoordinatorName), "spool"))
		require.NoError(t, err)
		require.Empty(t, spool, "a refused upload left its spool file")

		pg.Restart()
		eventually(t, settleTimeout, "the coordinator ready again", func() (bool, string) {
			s := c.readyStatus()
			return s == http.StatusOK, fmt.Sprint(s)
		})
		require.Equal(t, pid, c.lc.PID(localcluster.CoordinatorName), "the coordinator was restarted")
		for _, f := range files {
			c.mustRead(f)
			require.Equal(t, client.FileActive, c.metadata(f.res.FileID).Status)
		}
		files = append(files, c.mustUpload("after-"+fault.name+".bin", randomBytes(8<<10)))
		c.waitOnRing(all...)
	}
}
