package reconcile

import (
	"context"
	"io"
	"time"

	"golang.org/x/time/rate"
)

// maxThrottleChunk bounds the bytes one read of a throttled copy takes, and
// so the limiter's burst: small enough that concurrent copies share the
// bandwidth in turns, large enough that a fast limit costs few waits.
const maxThrottleChunk = 256 << 10

// Throttle paces the bytes of the copies reconciliation makes — rebalance,
// drain and repair — with one token bucket shared by every copy of the
// coordinator (REBALANCE_BANDWIDTH). Uploads and downloads of clients never
// pass through it: they do not go through the reconciler's copies. A nil
// Throttle is unlimited.
type Throttle struct {
	lim   *rate.Limiter
	chunk int
	// onPaced, when set, is told of every chunk paced: its bytes and how
	// long it had to wait for them.
	onPaced func(bytes int, wait time.Duration)
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
}

// NewThrottle returns a Throttle of bytesPerSecond, or nil (unlimited) when
// it is not positive. onPaced may be nil.
func NewThrottle(bytesPerSecond int64, onPaced func(bytes int, wait time.Duration)) *Throttle {
	if bytesPerSecond <= 0 {
		return nil
	}
	chunk := int(min(bytesPerSecond, maxThrottleChunk))
	return &Throttle{
		lim: rate.NewLimiter(rate.Limit(bytesPerSecond), chunk), chunk: chunk,
		onPaced: onPaced, now: time.Now, sleep: sleepCtx,
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Reader paces r: each read takes at most one chunk and returns once the
// bucket has had the tokens for what it read. Waiting ends with ctx.
func (t *Throttle) Reader(ctx context.Context, r io.Reader) io.Reader {
	if t == nil {
		return r
	}
	return &pacedReader{ctx: ctx, r: r, t: t}
}

type pacedReader struct {
	ctx context.Context
	r   io.Reader
	t   *Throttle
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(b) > p.t.chunk {
		b = b[:p.t.chunk]
	}
	n, err := p.r.Read(b)
	if n > 0 {
		if werr := p.t.take(p.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}

// take waits until the bucket has n tokens for the caller (n is at most
// the burst, so a reservation always succeeds).
func (t *Throttle) take(ctx context.Context, n int) error {
	now := t.now()
	res := t.lim.ReserveN(now, n)
	wait := res.DelayFrom(now)
	if wait > 0 {
		if err := t.sleep(ctx, wait); err != nil {
			res.CancelAt(t.now()) // give back what was not used
			return err
		}
	}
	if t.onPaced != nil {
		t.onPaced(n, wait)
	}
	return nil
}
