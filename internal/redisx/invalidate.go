package redisx

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Invalidations is the channel on which coordinators sharing a metadata
// store tell each other which cached entries a write made stale. Each
// message is "<kind> <key>"; a handler registered for the kind drops the
// key from its cache. While this coordinator's subscription is not up (Redis
// unreachable, or the subscription not yet re-established) messages from
// others are lost, so Live is false and a cache must not answer from what it
// holds; each time the subscription is (re)established every handler is
// called with "" first, to drop everything it held.
type Invalidations struct {
	c    *Client
	live atomic.Bool

	mu       sync.Mutex
	handlers map[string]func(key string)
}

func (c *Client) invalidationsChan() string { return c.key("invalidate") }

// Invalidations returns the client's invalidation channel. Register its
// handlers, then Run it.
func (c *Client) Invalidations() *Invalidations {
	return &Invalidations{c: c, handlers: map[string]func(string){}}
}

// Handle sets the handler of kind (no spaces). fn runs on the
// subscription's goroutine and must return quickly.
func (v *Invalidations) Handle(kind string, fn func(key string)) {
	v.mu.Lock()
	v.handlers[kind] = fn
	v.mu.Unlock()
}

// Live reports whether a message another coordinator publishes now reaches
// this one's handlers.
func (v *Invalidations) Live() bool { return v.live.Load() }

// Publish tells every coordinator, this one included, that key of kind is
// stale. An error means the others may not have heard it.
func (v *Invalidations) Publish(ctx context.Context, kind, key string) error {
	cctx, cancel := v.c.cmdCtx(ctx)
	defer cancel()
	return v.c.check(ctx, "invalidate_publish", v.c.rdb.Publish(cctx, v.c.invalidationsChan(), kind+" "+key).Err())
}

// Run holds the subscription until ctx ends, subscribing again with backoff
// after each failure.
func (v *Invalidations) Run(ctx context.Context) {
	wait := subscribeRetryFirst
	for ctx.Err() == nil {
		established := v.c.subscribeOnce(ctx, v.c.invalidationsChan(), v.deliver)
		if v.live.Swap(false) {
			v.c.log.Warn("cache invalidations from other coordinators are not reaching this one; the shared caches are bypassed until the subscription is back")
		}
		if established {
			wait = subscribeRetryFirst
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, subscribeRetryMax)
	}
}

// deliver handles one payload of the subscription; "" is its
// (re)establishment.
func (v *Invalidations) deliver(payload string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if payload == "" {
		for _, fn := range v.handlers {
			fn("")
		}
		if !v.live.Swap(true) {
			v.c.log.Info("cache invalidations subscribed; the shared caches are in use")
		}
		return
	}
	kind, key, ok := strings.Cut(payload, " ")
	if fn := v.handlers[kind]; ok && fn != nil && key != "" {
		fn(key)
	}
}
