package redisx

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

func TestPublishNodeStatus(t *testing.T) {
	c := sharedClient(t, Options{})
	ctx := ctxT(t)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	steps := []struct {
		status      meta.NodeStatus
		at          time.Time
		wantChanged bool
		wantStatus  meta.NodeStatus
		wantAt      time.Time
	}{
		{meta.NodeHealthy, t0, true, meta.NodeHealthy, t0},                                               // first sight
		{meta.NodeHealthy, t0.Add(time.Second), false, meta.NodeHealthy, t0.Add(time.Second)},            // same status, newer
		{meta.NodeUnhealthy, t0, false, meta.NodeHealthy, t0.Add(time.Second)},                           // older: ignored
		{meta.NodeUnhealthy, t0.Add(2 * time.Second), true, meta.NodeUnhealthy, t0.Add(2 * time.Second)}, // a change
	}
	for i, s := range steps {
		changed, err := c.PublishNodeStatus(ctx, "node-1", s.status, s.at)
		require.NoError(t, err)
		require.Equal(t, s.wantChanged, changed, "step %d", i)
		all, err := c.NodeStatuses(ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]NodeState{"node-1": {Status: s.wantStatus, At: s.wantAt}}, all, "step %d", i)
	}
}

// notices collects what SubscribeMembership delivers.
func subscribe(t *testing.T, c *Client) (<-chan string, func()) {
	t.Helper()
	ch := make(chan string, 100)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.SubscribeMembership(ctx, func(id string) { ch <- id }) })
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return ch, stop
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no membership notice")
		return ""
	}
}

func TestMembershipNotices(t *testing.T) {
	c := sharedClient(t, Options{})
	ctx := ctxT(t)
	ch, stop := subscribe(t, c)
	require.Equal(t, "", next(t, ch), "subscribed: reload everything")

	now := time.Now()
	_, err := c.PublishNodeStatus(ctx, "node-1", meta.NodeHealthy, now)
	require.NoError(t, err)
	require.Equal(t, "node-1", next(t, ch))
	_, err = c.PublishNodeStatus(ctx, "node-1", meta.NodeHealthy, now.Add(time.Second)) // unchanged: no notice
	require.NoError(t, err)
	require.NoError(t, c.NotifyMembership(ctx, "node-2"))
	require.Equal(t, "node-2", next(t, ch), "the unchanged status sent nothing before it")

	stop() // returns: the subscriber ended with its context
}

func TestMembershipNoticesSurviveARedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := openClient(t, srv.URL(), Options{})
	ctx := ctxT(t)
	ch, _ := subscribe(t, c)
	require.Equal(t, "", next(t, ch))

	srv.Kill()
	_, err := c.PublishNodeStatus(ctx, "node-1", meta.NodeUnhealthy, time.Now())
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	srv.Restart()
	require.Equal(t, "", next(t, ch), "subscribed again: notices may have been missed, reload")
	require.NoError(t, c.NotifyMembership(ctx, "node-3"))
	require.Equal(t, "node-3", next(t, ch))
}

func TestRouteDriverLogs(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	RouteDriverLogs(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer RouteDriverLogs(slog.New(slog.DiscardHandler))
	c, err := Open(ctxT(t), "redis://"+closedPort(t)+"/0", Options{})
	require.NoError(t, err)
	defer c.Close()
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, buf.String(), "redis driver:")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestMembershipNoticesSurviveAHungRedis: a paused Redis sends no error; the
// subscriber must find out by itself and subscribe again once Redis answers.
func TestMembershipNoticesSurviveAHungRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := openClient(t, srv.URL(), Options{CommandTimeout: 20 * time.Millisecond})
	ch, _ := subscribe(t, c)
	require.Equal(t, "", next(t, ch))

	srv.Pause()
	// Long enough for the quiet wait, the unanswered PING and a failed
	// attempt to subscribe again.
	time.Sleep(4 * subscribeQuietFactor * c.timeout)
	srv.Resume()
	require.Equal(t, "", next(t, ch), "subscribed again after the hang")
	require.NoError(t, c.NotifyMembership(ctxT(t), "node-4"))
	require.Equal(t, "node-4", next(t, ch))
}
