// Package redisx is dfs's use of Redis, which is an optimisation and never a
// dependency: a read-through cache of file records (CachedStore), the Redis
// implementations of lease.Locker that keep background work single-writer
// across coordinators (RedisLocker, and Fallback, which moves to a lease row in
// the metadata store while Redis is away), and a shared view of node health
// with change notices.
//
// Every call has a short timeout (Options.CommandTimeout, 500ms by default),
// so a dead or hung Redis costs each request at most that much, and failures
// degrade: a cache read becomes a miss, a Fallback lease moves to the
// metadata store. CachedStore and Fallback never fail a call because of
// Redis; the lower-level RedisLocker and the node-health calls report Redis
// failures as errs.Unavailable for their caller to shrug off. The metadata
// store stays the truth throughout.
package redisx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/dfs-project/dfs/internal/errs"
)

// Defaults of Options.
const (
	DefaultCommandTimeout = 500 * time.Millisecond
	DefaultKeyPrefix      = "dfs:"
)

// Options configure a Client. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// CommandTimeout bounds every call this package makes, retries and the
	// wait for a pooled connection included. Default 500ms.
	CommandTimeout time.Duration
	// DialTimeout bounds one connection attempt. Default CommandTimeout.
	DialTimeout time.Duration
	// KeyPrefix starts every key and channel name, so that deployments (and
	// parallel tests) can share one Redis database. Default "dfs:".
	KeyPrefix string
	// OnError, when set, is called once per failed Redis call with the
	// operation's name (ping, cache_get, cache_fill, cache_invalidate,
	// lock_acquire, lock_renew, lock_release, node_publish, node_read,
	// subscribe), for an error counter. A call abandoned because the caller's
	// own context ended is not counted.
	OnError func(op string)
}

// Client is a connection pool to one Redis server. It is safe for concurrent
// use. It reconnects by itself: go-redis dials a new connection for a command
// when no pooled one is usable, and after as many failed dials in a row as the
// pool is large it fails fast and probes in the background once a second
// until the server answers again.
type Client struct {
	rdb     *redis.Client
	log     *slog.Logger
	timeout time.Duration
	prefix  string
	onError func(op string)
	// down is true from the first failed call until the next successful
	// one, so that an outage is logged once at each end rather than per call.
	down atomic.Bool

	// What the lock scripts have told about the server: its run_id, and
	// when a server with a run_id other than the previous one started.
	runMu     sync.Mutex
	runID     string
	restarted time.Time
}

// Open returns a client for the redis:// or rediss:// URL. It fails only on a
// malformed URL (errs.Invalid): a Redis that does not answer at start is
// logged and used as soon as it does.
func Open(ctx context.Context, url string, o Options) (*Client, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "REDIS_URL")
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultCommandTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = o.CommandTimeout
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ro.DialTimeout = o.DialTimeout
	ro.ReadTimeout = o.CommandTimeout
	ro.WriteTimeout = o.CommandTimeout
	ro.PoolTimeout = o.CommandTimeout
	// Every call also carries a context deadline of CommandTimeout; letting
	// go-redis honour it bounds the whole call, retries included.
	ro.ContextTimeoutEnabled = true
	// One retry replaces a pooled connection that died with a restarted
	// server; more would only spend the deadline.
	ro.MaxRetries = 1
	// The pool's default is five dial attempts 100ms apart, which would turn
	// a refused connection into half a second of waiting per call.
	ro.DialerRetries = 1
	// Neither handshake extra is needed, and each is one more round trip per
	// new connection (and a rejected command on Redis before 7.2).
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	c := &Client{
		rdb:     redis.NewClient(ro),
		log:     o.Logger,
		timeout: o.CommandTimeout,
		prefix:  o.KeyPrefix,
		onError: o.OnError,
	}
	if err := c.Ping(ctx); err != nil {
		o.Logger.Warn("redis does not answer; running without cache and Redis leases until it does",
			"addr", ro.Addr, "err", err)
	} else {
		o.Logger.Info("redis connected", "addr", ro.Addr, "db", ro.DB, "command_timeout", o.CommandTimeout)
	}
	return c, nil
}

// Ping reports whether Redis answers within the command timeout. An error is
// errs.Unavailable.
func (c *Client) Ping(ctx context.Context) error {
	cctx, cancel := c.cmdCtx(ctx)
	defer cancel()
	return c.check(ctx, "ping", c.rdb.Ping(cctx).Err())
}

// Close closes the pool. Calls made afterwards fail.
func (c *Client) Close() error {
	return c.rdb.Close()
}

// key is name in this client's key space.
func (c *Client) key(name string) string { return c.prefix + name }

// cmdCtx bounds one call to the command timeout.
func (c *Client) cmdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// check classifies the outcome of one call: nil passes (and ends an outage
// in the log), a failure is counted, logged at the start of an outage and
// returned as errs.Unavailable. ctx is the caller's context (not the one
// bounded by the command timeout): when it has ended, the failure is the
// caller's doing and is not counted.
func (c *Client) check(ctx context.Context, op string, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		if c.down.CompareAndSwap(true, false) {
			c.log.Info("redis answers again")
		}
		return err
	}
	if ctx.Err() == nil {
		if c.onError != nil {
			c.onError(op)
		}
		if c.down.CompareAndSwap(false, true) {
			c.log.Warn("redis call failed; degrading until it answers", "op", op, "err", err)
		}
	}
	return errs.Wrap(errs.Unavailable, err, "redis %s", op)
}

// observeRun records the server's run_id and uptime (seconds) as a lock
// script reported them, and notes a restart when the run_id changed.
func (c *Client) observeRun(run string, uptime int64) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if run == c.runID || run == "" {
		return
	}
	if c.runID != "" {
		// uptime is rounded down, so this is the latest the server can
		// have started: the grace is never cut short.
		c.restarted = time.Now().Add(-time.Duration(uptime) * time.Second)
		c.log.Warn("redis restarted and lost its leases; new ones wait for their holders to take them back",
			"uptime", time.Duration(uptime)*time.Second)
	}
	c.runID = run
}

func (c *Client) lastRunID() string {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	return c.runID
}

// restartedWithin reports whether a restart was noticed and the server
// started less than d ago.
func (c *Client) restartedWithin(d time.Duration) bool {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	return !c.restarted.IsZero() && time.Since(c.restarted) < d
}

// newToken returns a random string that no other invalidation will produce.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RouteDriverLogs sends go-redis's own log lines (it prints one per failed
// dial while Redis is down, for instance) to l at debug level instead of
// standard error; Client already logs each outage's start and end. go-redis
// has one logger per process, so main calls this once, before Open.
func RouteDriverLogs(l *slog.Logger) {
	redis.SetLogger(driverLogger{l})
}

type driverLogger struct{ l *slog.Logger }

func (d driverLogger) Printf(ctx context.Context, format string, v ...any) {
	d.l.DebugContext(ctx, "redis driver: "+fmt.Sprintf(format, v...))
}
