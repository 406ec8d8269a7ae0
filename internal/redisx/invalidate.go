package redisx

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dfs-project/dfs/internal/errs"
)

// Invalidations is the channel on which coordinators sharing a metadata
// store tell each other which cached entries a write made stale. Each
// message is "<kind> <key> <id>"; a handler registered for the kind drops
// the key from its cache, and each receiver then counts itself in the
// message's acknowledgement counter, so that Publish returns only once every
// subscribed coordinator has dropped the entry. While this coordinator's subscription is not up (Redis
// unreachable, or the subscription not yet re-established) messages from
// others are lost, so Live is false and a cache must not answer from what it
// holds; each time the subscription is (re)established every handler is
// called with "" first, to drop everything it held.
//
// On a cluster the channel is a shard channel (SPUBLISH, SSUBSCRIBE): every
// coordinator subscribes at the master of the channel's slot and publishes
// there, so the count of receivers PUBLISH answers, which on a cluster counts
// only the subscribers of the node that took the message, is every
// subscriber; and when the slot moves, the server ends the subscriptions,
// which are then taken again at the new master.
type Invalidations struct {
	c    *Client
	live atomic.Bool

	mu       sync.Mutex
	handlers map[string]func(key string)
}

func (c *Client) invalidationsChan() string { return c.key("invalidate") }

// invalidationAck is the counter of the receivers of message id. The hash
// tag keeps it on one Redis Cluster shard.
func (c *Client) invalidationAck(id string) string { return c.key("invalidate-ack:{" + id + "}") }

// Acknowledgement timing: how long Publish waits for every receiver, how
// often it looks, and how long a counter outlives its message.
const (
	ackWait   = time.Second
	ackPoll   = time.Millisecond
	ackExpiry = 30 * time.Second
)

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
// stale, and returns once each that received the message has dropped the
// entry. An error means some may not have: Redis did not answer, or a
// receiver did not confirm within a second (its subscription may be dying).
func (v *Invalidations) Publish(ctx context.Context, kind, key string) error {
	id := newToken()
	cctx, cancel := v.c.cmdCtx(ctx)
	var receivers int64
	var err error
	if v.c.cluster != nil {
		receivers, err = v.c.rdb.SPublish(cctx, v.c.invalidationsChan(), kind+" "+key+" "+id).Result()
	} else {
		receivers, err = v.c.rdb.Publish(cctx, v.c.invalidationsChan(), kind+" "+key+" "+id).Result()
	}
	cancel()
	if err := v.c.check(ctx, "invalidate_publish", err); err != nil {
		return err
	}
	deadline := time.Now().Add(ackWait)
	var acked int64
	for {
		cctx, cancel := v.c.cmdCtx(ctx)
		acked, err = v.c.rdb.Get(cctx, v.c.invalidationAck(id)).Int64()
		cancel()
		if errors.Is(err, redis.Nil) {
			acked, err = 0, nil
		}
		if err := v.c.check(ctx, "invalidate_ack", err); err != nil {
			return err
		}
		if acked >= receivers || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(ackPoll):
		}
	}
	if acked < receivers {
		return errs.E(errs.Unavailable, "%d of the %d coordinators that received the invalidation confirmed it within %v", acked, receivers, ackWait)
	}
	return nil
}

// Run holds the subscription until ctx ends, subscribing again with backoff
// after each failure.
func (v *Invalidations) Run(ctx context.Context) {
	wait := subscribeRetryFirst
	for ctx.Err() == nil {
		established := v.c.subscribeOnce(ctx, v.c.invalidationsChan(), v.c.cluster != nil, v.deliver)
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
	f := strings.Fields(payload)
	if len(f) != 3 {
		return
	}
	if fn := v.handlers[f[0]]; fn != nil {
		fn(f[1])
	}
	// Counted whether or not this coordinator caches the kind: the
	// publisher waits for every receiver.
	ctx, cancel := v.c.cmdCtx(context.Background())
	defer cancel()
	ack := v.c.invalidationAck(f[2])
	_, err := v.c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, ack)
		p.PExpire(ctx, ack, ackExpiry)
		return nil
	})
	_ = v.c.check(ctx, "invalidate_ack", err)
}
