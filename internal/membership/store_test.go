package membership

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/postgres"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/testenv"
)

func TestRegistryOverPostgres(t *testing.T) {
	s, err := postgres.Open(context.Background(), testenv.NewPostgresDB(t), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	runOverStore(t, s)
}

func TestRegistryOverSQLite(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "meta.db"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	runOverStore(t, s)
}

// runOverStore drives the node lifecycle against a real store, including two
// coordinators writing the same rows at once, which is where optimistic
// locking meets real conflicts.
func runOverStore(t *testing.T, s Store) {
	ctx := context.Background()
	prober := newFakeProber()
	events := &eventLog{}
	newReg := func() *Registry {
		r, err := New(Options{Store: s, Prober: prober, VNodes: 10, OnEvent: events.add})
		require.NoError(t, err)
		return r
	}
	a, b := newReg(), newReg()

	for i := 1; i <= 3; i++ {
		_, err := a.Register(ctx, Announcement{NodeID: fmt.Sprint("node-", i), Host: "127.0.0.1", Port: 9000 + i})
		require.NoError(t, err)
	}
	// Both coordinators sweep at once: every probe of either is counted
	// (none is lost to a stale write) and both end with the same ring.
	var wg sync.WaitGroup
	sweepErrs := make([]error, 4)
	for i := range sweepErrs {
		reg := a
		if i%2 == 1 {
			reg = b
		}
		wg.Go(func() { _, sweepErrs[i] = reg.Sweep(ctx) })
	}
	wg.Wait()
	for _, err := range sweepErrs {
		require.NoError(t, err)
	}
	nodes, err := s.ListNodes(ctx)
	require.NoError(t, err)
	for _, n := range nodes {
		require.Equal(t, meta.NodeHealthy, n.Status, n.ID)
		require.Equal(t, 4, n.ConsecutiveSuccesses, n.ID)
	}
	require.ElementsMatch(t, []string{"JOINED node-1", "JOINED node-2", "JOINED node-3"}, events.take())
	require.NoError(t, a.Load(ctx))
	require.NoError(t, b.Load(ctx))
	requireRingMatches(t, a, s)
	requireRingMatches(t, b, s)

	prober.set(url(9002), errDown)
	for range 2 {
		_, err := a.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"FAILED node-2"}, events.take())
	_, err = a.Deregister(ctx, "node-3")
	require.NoError(t, err)
	require.Equal(t, []string{"DEREGISTERED node-3"}, events.take())
	requireRingMatches(t, a, s)

	// A coordinator starting now rebuilds the same ring.
	c := newReg()
	require.NoError(t, c.Load(ctx))
	require.Equal(t, []string{"node-1"}, c.Ring().Nodes())
	require.Equal(t, a.Ring().Points(), c.Ring().Points())
	u, ok := c.BaseURL("node-3")
	require.True(t, ok)
	require.Equal(t, url(9003), u)

	n, err := c.Register(ctx, Announcement{NodeID: "node-3", Host: "127.0.0.1", Port: 9003})
	require.NoError(t, err)
	require.Equal(t, meta.NodeDeregistered, n.Status)
	_, err = c.Rejoin(ctx, "node-3")
	require.NoError(t, err)
	_, err = c.Node(ctx, "ghost")
	require.ErrorContains(t, err, "node ghost is not registered")
}
