package redisx

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

func TestOpenRejectsABadURL(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:6379", "redis://127.0.0.1:6379/notanumber", "::"} {
		t.Run(url, func(t *testing.T) {
			_, err := Open(ctxT(t), url, Options{})
			require.Error(t, err)
			require.Equal(t, errs.Invalid, errs.KindOf(err))
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestOpenSucceedsWithRedisDown(t *testing.T) {
	var n counters
	c, err := Open(ctxT(t), "redis://"+closedPort(t)+"/0", Options{OnError: n.onError})
	require.NoError(t, err, "a Redis that is down at start is not a reason to fail")
	defer c.Close()

	err = c.Ping(ctxT(t))
	require.Error(t, err)
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.Equal(t, int64(2), n.errors.Load(), "the ping in Open and this one are counted")
}

func TestPingDoesNotCountTheCallersCancellation(t *testing.T) {
	var n counters
	c, err := Open(ctxT(t), "redis://"+closedPort(t)+"/0", Options{OnError: n.onError})
	require.NoError(t, err)
	defer c.Close()
	before := n.errors.Load()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.Error(t, c.Ping(ctx))
	require.Equal(t, before, n.errors.Load())
}

// TestReconnectsAfterRestart checks what the package relies on from go-redis
// with its options: after the server is killed every call fails (and fast,
// the pool's dial breaker trips), and once it is back the same client answers
// again without being reopened.
func TestReconnectsAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	var n counters
	c := openClient(t, srv.URL(), Options{OnError: n.onError})
	ctx := ctxT(t)
	require.NoError(t, c.Ping(ctx))
	require.NoError(t, c.rdb.Set(ctx, c.key("x"), "1", 0).Err(), "a pooled connection exists")

	srv.Kill()
	// More failed calls than the pool has connections, so that the dial
	// breaker trips and its background probe is what must notice the return.
	for range c.rdb.(*redis.Client).Options().PoolSize + 5 {
		require.Error(t, c.Ping(ctx))
	}
	require.Positive(t, n.errors.Load())

	srv.Restart()
	require.Eventually(t, func() bool { return c.Ping(ctx) == nil }, 10*time.Second, 50*time.Millisecond,
		"the client reconnects by itself")
}

// TestHungRedisFailsWithinTheCommandTimeout pauses the server: connections
// are accepted and never answered. Every call must still come back (with an
// error) rather than hang, which is what keeps requests alive.
func TestHungRedisFailsWithinTheCommandTimeout(t *testing.T) {
	srv := redistest.Start(t)
	c := openClient(t, srv.URL(), Options{CommandTimeout: 100 * time.Millisecond})
	require.NoError(t, c.Ping(ctxT(t)))
	srv.Pause()
	defer srv.Resume()

	done := make(chan error, 1)
	go func() { done <- c.Ping(context.Background()) }()
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, errors.Is(err, context.DeadlineExceeded) || isTimeout(err), "a timeout: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("a ping to a hung Redis did not return")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
