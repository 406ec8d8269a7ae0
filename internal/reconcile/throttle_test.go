package reconcile

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakePace is a Throttle's clock: sleeping moves it, so waits are exact and
// take no time.
type fakePace struct {
	mu    sync.Mutex
	at    time.Time
	slept []time.Duration
	bytes int
	wait  time.Duration
}

func newPacedThrottle(t *testing.T, bytesPerSecond int64) (*Throttle, *fakePace) {
	t.Helper()
	p := &fakePace{at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	th := NewThrottle(bytesPerSecond, func(n int, wait time.Duration) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.bytes += n
		p.wait += wait
	})
	th.now = func() time.Time {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.at
	}
	th.sleep = func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.slept = append(p.slept, d)
		p.at = p.at.Add(d)
		return nil
	}
	return th, p
}

func TestThrottlePacesCopiesAtItsRate(t *testing.T) {
	th, p := newPacedThrottle(t, 1000)
	data := bytes.Repeat([]byte("x"), 5000)
	got, err := io.ReadAll(th.Reader(context.Background(), bytes.NewReader(data)))
	require.NoError(t, err)
	require.Equal(t, data, got, "pacing changes no byte")
	// A burst of one second's worth, then one second per further 1000
	// bytes, however the reads are cut.
	var slept time.Duration
	for _, d := range p.slept {
		slept += d
	}
	require.Equal(t, 4*time.Second, slept)
	require.Equal(t, 5000, p.bytes)
	require.Equal(t, 4*time.Second, p.wait)
}

func TestThrottleIsSharedByConcurrentCopies(t *testing.T) {
	th, p := newPacedThrottle(t, 1<<20)
	// Every read reserves at the same instant and sleeping moves no clock, so
	// each wait is how far into the future the shared bucket has promised its
	// tokens, whatever order the copies' reads come in.
	start := p.at
	th.now = func() time.Time { return start }
	th.sleep = func(ctx context.Context, d time.Duration) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.slept = append(p.slept, d)
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := io.Copy(io.Discard, th.Reader(context.Background(), bytes.NewReader(make([]byte, 1<<20))))
			require.NoError(t, err)
		})
	}
	wg.Wait()
	// 4 MiB at 1 MiB/s with a 256 KiB burst: the last bytes are due 3.75 s
	// after the start. A bucket per copy would have made it 0.75 s.
	require.Equal(t, 4<<20, p.bytes)
	require.Equal(t, 3750*time.Millisecond, slices.Max(p.slept))
}

func TestThrottleWaitEndsWithTheContext(t *testing.T) {
	th, p := newPacedThrottle(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	r := th.Reader(ctx, bytes.NewReader(make([]byte, 1000)))
	buf := make([]byte, 1000)
	n, err := r.Read(buf)
	require.NoError(t, err)
	require.Equal(t, 100, n, "a read takes at most the burst")
	cancel()
	_, err = r.Read(buf)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Equal(t, 100, p.bytes, "a cancelled wait paced nothing")
}

func TestNoBandwidthIsNoThrottle(t *testing.T) {
	require.Nil(t, NewThrottle(0, nil))
	src := bytes.NewReader([]byte("as is"))
	require.Same(t, src, (*Throttle)(nil).Reader(context.Background(), src))
}
