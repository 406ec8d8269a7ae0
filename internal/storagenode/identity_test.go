package storagenode_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/storagenode"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// TestDiskIdentityAcrossRestarts follows one data directory through a
// restart (same identity) and a wipe (a new one), as the node reports it.
func TestDiskIdentityAcrossRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	start := func() *node {
		return &node{nodetest.Start(t, nodetest.Options{Env: map[string]string{"STORAGE_DATA_DIRECTORY": dir}})}
	}
	reported := func(n *node) string {
		t.Helper()
		resp, body := n.request(t, http.MethodGet, wire.PathReady, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return decode[wire.Health](t, body).DiskID
	}

	first := start()
	id := reported(first)
	_, err := uuid.Parse(id)
	require.NoError(t, err)
	require.Equal(t, first.DiskID, id)
	b, err := os.ReadFile(filepath.Join(dir, "disk-id"))
	require.NoError(t, err)
	require.Equal(t, id+"\n", string(b), "the identity lives in the data directory")
	require.Equal(t, id, first.Logs("data directory opened")[0]["disk_id"])
	require.NoError(t, first.Stop())

	again := start()
	require.Equal(t, id, reported(again), "a restart keeps the identity")
	require.NoError(t, again.Stop())

	require.NoError(t, os.RemoveAll(dir))
	wiped := start()
	require.NotEqual(t, id, reported(wiped), "a wiped directory is a new disk")
}

func TestMalformedDiskIdentityRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "disk-id"), []byte("not-a-uuid\n"), 0o640))
	cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{"STORAGE_DATA_DIRECTORY": dir}))
	require.NoError(t, err)
	_, err = storagenode.New(cfg, slog.New(slog.DiscardHandler), nil)
	require.Equal(t, errs.Invalid, errs.KindOf(err))
	require.ErrorContains(t, err, "disk-id is malformed")
}

func TestBinaryRefusesAMalformedDiskIdentity(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "disk-id"), []byte("garbage"), 0o640))
	// A node that started anyway would serve until killed: bound the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t))
	cmd.Env = []string{"SERVER_HOST=127.0.0.1", "SERVER_PORT=" + strconv.Itoa(freePort(t)), "STORAGE_DATA_DIRECTORY=" + dir}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the node must not start: %v\n%s", err, out)
	require.NoError(t, ctx.Err(), "the node started and had to be killed:\n%s", out)
	require.NotZero(t, exit.ExitCode())
	require.Contains(t, string(out), filepath.Join(dir, "disk-id")+" is malformed")
}
