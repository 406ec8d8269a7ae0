package lease

import (
	"context"
	"log/slog"
	"sync"
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

// Hold takes the lease name from locker for one piece of work and keeps it
// alive while the work runs: work is the context to do it in, which ends if
// the lease is lost, and release stops the renewals and gives the lease back.
// ok is false when another holder has the lease, or when the answer is
// unknown (logged to log): skipping is the safe choice, and the work is
// retried by its next trigger or repair pass. When ok is false, work is ctx
// and release does nothing.
func Hold(ctx context.Context, locker Locker, name string, ttl time.Duration, log *slog.Logger) (work context.Context, release func(), ok bool) {
	l, ok, err := locker.TryLock(ctx, name, ttl)
	if err != nil {
		if log != nil {
			log.Warn("could not take a lease; skipping the work it guards", "lease", name, "err", err)
		}
		return ctx, func() {}, false
	}
	if !ok {
		return ctx, func() {}, false
	}
	work, stop := KeepAlive(ctx, l, 0)
	return work, func() {
		stop()
		if err := l.Release(context.WithoutCancel(ctx)); err != nil && log != nil {
			log.Warn("could not release a lease; it will lapse", "lease", name, "err", err)
		}
	}, true
}

// Capped returns a Locker that takes locker's leases for at most maxTTL
// between renewals, whatever its callers ask for, so that a dead holder's
// leases lapse within maxTTL.
func Capped(locker Locker, maxTTL time.Duration) Locker {
	return LockerFunc(func(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
		return locker.TryLock(ctx, name, min(ttl, maxTTL))
	})
}

// Held is a lease kept across rounds of periodic work, renewed each round,
// so that only its holder does the work. The zero value is not usable; see
// NewHeld.
type Held struct {
	locker Locker
	name   string
	ttl    time.Duration

	mu  sync.Mutex
	cur Lease
}

// NewHeld returns a Held for the lease name, taken from locker for ttl at a
// time.
func NewHeld(locker Locker, name string, ttl time.Duration) *Held {
	return &Held{locker: locker, name: name, ttl: ttl}
}

// Hold renews the lease or takes it, and reports whether this process holds
// it now.
func (h *Held) Hold(ctx context.Context) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur != nil {
		if ok, err := h.cur.Renew(ctx); err == nil && ok {
			return true
		}
		h.cur = nil
	}
	l, ok, err := h.locker.TryLock(ctx, h.name, h.ttl)
	if err != nil || !ok {
		return false
	}
	h.cur = l
	return true
}

// Valid reports whether the lease the last successful Hold took or renewed
// is certainly still held now: its deadline has not passed. Work begun after
// Hold checks it before each write, so that a process paused past the
// deadline, whose lease another may hold by now, writes nothing it decided
// before the pause.
func (h *Held) Valid() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur != nil && time.Now().Before(h.cur.Deadline())
}
