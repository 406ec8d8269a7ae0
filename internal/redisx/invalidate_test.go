package redisx

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/redisx/redistest"
)

// runInvalidations runs v until the test ends and sends every key its
// handler of kind gets ("" for a (re)subscription) to the channel returned.
func runInvalidations(t *testing.T, v *Invalidations, kind string) <-chan string {
	t.Helper()
	ch := make(chan string, 16)
	v.Handle(kind, func(key string) { ch <- key })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { v.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ch
}

func nextKey(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case k := <-ch:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no invalidation arrived")
		return ""
	}
}

func TestInvalidationsReachEveryCoordinatorAndSayWhenTheyCannot(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "dfstest:" + newToken() + ":"
	a := openClient(t, srv.URL(), Options{KeyPrefix: prefix})
	b := openClient(t, srv.URL(), Options{KeyPrefix: prefix})
	va, vb := a.Invalidations(), b.Invalidations()
	require.False(t, vb.Live(), "not live before it has subscribed")
	cha := runInvalidations(t, va, "access-key")
	chb := runInvalidations(t, vb, "access-key")
	require.Equal(t, "", nextKey(t, cha), "subscribed: drop everything held")
	require.Equal(t, "", nextKey(t, chb))
	require.True(t, va.Live())
	require.True(t, vb.Live())

	ctx := ctxT(t)
	require.NoError(t, va.Publish(ctx, "access-key", "AKIA1"))
	for name, ch := range map[string]<-chan string{"the other coordinator": chb, "the publisher": cha} {
		select {
		case k := <-ch:
			require.Equal(t, "AKIA1", k)
		default:
			t.Fatalf("%s had not dropped the key when Publish returned", name)
		}
	}
	require.NoError(t, va.Publish(ctx, "bucket", "photos"), "a kind with no handler here is ignored")
	require.NoError(t, va.Publish(ctx, "access-key", "AKIA2"))
	require.Equal(t, "AKIA2", nextKey(t, chb))

	srv.Kill()
	require.Eventually(t, func() bool { return !vb.Live() }, 10*time.Second, 10*time.Millisecond,
		"a lost subscription is not live")
	require.Error(t, va.Publish(ctx, "access-key", "AKIA3"))
	srv.Restart()
	require.Equal(t, "", nextKey(t, chb), "subscribed again: what was missed is dropped")
	require.Eventually(t, vb.Live, 10*time.Second, 10*time.Millisecond)
	// The publisher's own subscription may still be coming back.
	require.Eventually(t, va.Live, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, va.Publish(ctx, "access-key", "AKIA4"))
	for k := nextKey(t, chb); k != "AKIA4"; k = nextKey(t, chb) {
		require.Equal(t, "", k)
	}
}
