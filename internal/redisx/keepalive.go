package redisx

import (
	"context"
	"time"
)

// KeepAlive renews l every `every` (a third of the time left on it when every
// is not positive) while the caller works under it, and returns a context for
// that work. The context is cancelled with cause ErrLeaseLost as soon as a
// renewal reports the lease lost, or when l's deadline passes without a
// successful renewal (renewals that fail with an error are retried until
// then), so that a coordinator that lost its lease stops work. stop ends the
// renewals and cancels the context; it does not release the lease.
func KeepAlive(ctx context.Context, l Lease, every time.Duration) (workCtx context.Context, stop func()) {
	if every <= 0 {
		every = max(time.Until(l.Deadline())/3, time.Millisecond)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			expired := time.NewTimer(time.Until(l.Deadline()))
			select {
			case <-wctx.Done():
				expired.Stop()
				return
			case <-expired.C:
				cancel(ErrLeaseLost)
				return
			case <-tick.C:
				expired.Stop()
			}
			// A renewal answered after the deadline is of no use.
			rctx, rcancel := context.WithDeadline(wctx, l.Deadline())
			ok, err := l.Renew(rctx)
			rcancel()
			if err == nil && !ok {
				cancel(ErrLeaseLost)
				return
			}
		}
	}()
	return wctx, func() {
		cancel(context.Canceled)
		<-done
	}
}
