package redisx

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// NodeState is a node's health as last published by any coordinator.
type NodeState struct {
	Status meta.NodeStatus `json:"status"`
	// At is when the publishing coordinator observed the status.
	At time.Time `json:"at"`
}

// nodeState is the stored form: AtMs lets the publish script compare
// observations without parsing times.
type nodeState struct {
	NodeState
	AtMs int64 `json:"atMs"`
}

func (c *Client) nodesKey() string       { return c.key("nodes") }
func (c *Client) membershipChan() string { return c.key("membership") }

// publishScript stores a node's state unless a later observation is already
// stored, and announces it on the membership channel when the status changed.
// KEYS: nodes hash. ARGV: node ID, state JSON, status, observed at (ms),
// channel. Returns 1 when the status changed, 0 otherwise.
var publishScript = redis.NewScript(`
local old = redis.call('HGET', KEYS[1], ARGV[1])
local changed = 1
if old then
	local o = cjson.decode(old)
	if tonumber(o.atMs) > tonumber(ARGV[4]) then
		return 0
	end
	if o.status == ARGV[3] then
		changed = 0
	end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if changed == 1 then
	redis.call('PUBLISH', ARGV[5], ARGV[1])
end
return changed`)

// PublishNodeStatus records that this coordinator observed nodeID in status
// at the given time, for the other coordinators, and notifies them on the
// membership channel when the status differs from the one recorded. An
// observation older than the recorded one is ignored. changed reports
// whether a notice went out. A Redis failure is errs.Unavailable; the
// metadata store stays the truth, so callers log it and go on.
func (c *Client) PublishNodeStatus(ctx context.Context, nodeID string, status meta.NodeStatus, at time.Time) (changed bool, err error) {
	raw, err := json.Marshal(nodeState{NodeState: NodeState{Status: status, At: at.UTC()}, AtMs: at.UnixMilli()})
	if err != nil {
		return false, errs.Wrap(errs.Other, err, "encode node state")
	}
	cctx, cancel := c.cmdCtx(ctx)
	defer cancel()
	n, err := publishScript.Run(cctx, c.rdb, []string{c.nodesKey()},
		nodeID, raw, string(status), at.UnixMilli(), c.membershipChan()).Int()
	if err := c.check(ctx, "node_publish", err); err != nil {
		return false, err
	}
	return n == 1, nil
}

// NotifyMembership tells the other coordinators that nodeID changed in a way
// they should reload (registered, deregistered, rejoined).
func (c *Client) NotifyMembership(ctx context.Context, nodeID string) error {
	cctx, cancel := c.cmdCtx(ctx)
	defer cancel()
	return c.check(ctx, "node_publish", c.rdb.Publish(cctx, c.membershipChan(), nodeID).Err())
}

// NodeStatuses returns every node state published so far, by node ID.
func (c *Client) NodeStatuses(ctx context.Context) (map[string]NodeState, error) {
	cctx, cancel := c.cmdCtx(ctx)
	defer cancel()
	all, err := c.rdb.HGetAll(cctx, c.nodesKey()).Result()
	if err := c.check(ctx, "node_read", err); err != nil {
		return nil, err
	}
	out := make(map[string]NodeState, len(all))
	for id, raw := range all {
		var s nodeState
		if json.Unmarshal([]byte(raw), &s) == nil {
			out[id] = s.NodeState
		}
	}
	return out, nil
}

// The bounds of the wait between attempts to subscribe again.
const (
	subscribeRetryFirst = 100 * time.Millisecond
	subscribeRetryMax   = 2 * time.Second
)

// subscribeQuietFactor times the command timeout is how long a quiet
// subscription waits before it checks its connection with a PING (5s by
// default): a Redis that hangs, or a network that drops packets, sends no
// error that would end the wait.
const subscribeQuietFactor = 10

// SubscribeMembership calls fn with the node ID of every membership notice,
// until ctx ends. Notices sent while Redis was unreachable are lost, so fn is
// also called with "" each time the subscription is (re)established, the
// first time included: the caller then reloads everything from the metadata
// store. Redis outages are survived by subscribing again, with backoff. fn
// runs on the subscription's goroutine and should return quickly.
func (c *Client) SubscribeMembership(ctx context.Context, fn func(nodeID string)) {
	wait := subscribeRetryFirst
	for ctx.Err() == nil {
		if c.subscribeOnce(ctx, c.membershipChan(), false, fn) {
			wait = subscribeRetryFirst
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, subscribeRetryMax)
	}
}

// subscribeOnce holds one subscription to channel (a shard channel when
// sharded) until it fails or ctx ends, and reports whether it was
// established. fn gets "" once the subscription is established and each
// message's payload after that.
func (c *Client) subscribeOnce(ctx context.Context, channel string, sharded bool, fn func(payload string)) (established bool) {
	var ps *redis.PubSub
	if sharded {
		ps = c.rdb.SSubscribe(ctx, channel)
	} else {
		ps = c.rdb.Subscribe(ctx, channel)
	}
	defer ps.Close()
	// A blocked receive watches only its timeout; closing the subscription
	// is what ends it when ctx does.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, subscribeQuietFactor*c.timeout)
		if err != nil {
			if ctx.Err() != nil {
				return established
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged && established {
				// Quiet: a PING tells a healthy connection from a dead
				// one that no error has reached yet.
				pctx, cancel := c.cmdCtx(ctx)
				err = ps.Ping(pctx)
				cancel()
				if err == nil {
					pinged = true
					continue
				}
			}
			_ = c.check(ctx, "subscribe", err)
			return established
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				established = true
				_ = c.check(ctx, "subscribe", nil)
				fn("")
			case "sunsubscribe":
				// The server dropped a shard channel whose slot it no
				// longer serves: subscribe again where it lives now.
				return established
			}
		case *redis.Message:
			fn(m.Payload)
		}
	}
}
