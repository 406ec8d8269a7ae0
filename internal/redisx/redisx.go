// Package redisx is dfs's use of Redis, one server or a Redis Cluster, which is
// an optimisation and never a dependency: a read-through cache of file records
// (CachedStore), the Redis implementations of lease.Locker that keep background
// work single-writer across coordinators (RedisLocker, and Fallback, which
// moves to a lease row in the metadata store while Redis is away), and a shared
// view of node health with change notices.
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
	"net"
	"strconv"
	"strings"
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

// clusterQuiet is how long a cluster's calls must have gone without a
// failure before a success ends an outage in the log.
const clusterQuiet = time.Second

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

// Client is a connection pool to one Redis server or to a Redis Cluster. It
// is safe for concurrent use. It reconnects by itself: go-redis dials a new
// connection for a command when no pooled one is usable, and after as many
// failed dials in a row as the pool is large it fails fast and probes in the
// background once a second until the server answers again. On a cluster,
// go-redis follows the slot map and its redirections; a shard that does not
// answer fails the calls whose keys live on it, and the others go on.
type Client struct {
	rdb redis.UniversalClient
	// cluster is rdb on a Redis Cluster, nil on one server.
	cluster *redis.ClusterClient
	log     *slog.Logger
	timeout time.Duration
	prefix  string
	onError func(op string)
	// down is true from the first failed call until the next successful
	// one, so that an outage is logged once at each end rather than per call.
	// On a cluster, the successful call must also come clusterQuiet after
	// the last failure (lastFailure, Unix nanoseconds): while one master is
	// dead, calls to the others succeed between the failures.
	down        atomic.Bool
	lastFailure atomic.Int64

	// What the lock scripts have told about each server, by its address
	// ("" on one server): see observeRun.
	runMu sync.Mutex
	runs  map[string]*serverRun
}

// serverRun is what the lock scripts told about one server: its run_id, and
// when a server with a run_id other than the previous one started.
type serverRun struct {
	id        string
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
	o = o.withDefaults()
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

	c := newClient(redis.NewClient(ro), nil, o)
	if err := c.Ping(ctx); err != nil {
		o.Logger.Warn("redis does not answer; running without cache and Redis leases until it does",
			"addr", ro.Addr, "err", err)
	} else {
		o.Logger.Info("redis connected", "addr", ro.Addr, "db", ro.DB, "command_timeout", o.CommandTimeout)
	}
	return c, nil
}

// OpenCluster returns a client for the Redis Cluster that any of addrs
// (host:port, at least one) belongs to; go-redis learns the rest of the
// cluster from whichever answers. It fails only on an empty or malformed
// list (errs.Invalid): a cluster that does not answer at start is logged and
// used as soon as it does.
func OpenCluster(ctx context.Context, addrs []string, o Options) (*Client, error) {
	if err := ValidateClusterAddrs(addrs); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	co := &redis.ClusterOptions{
		Addrs:        addrs,
		DialTimeout:  o.DialTimeout,
		ReadTimeout:  o.CommandTimeout,
		WriteTimeout: o.CommandTimeout,
		PoolTimeout:  o.CommandTimeout,
		// As in Open: the context deadline bounds the whole call, and one
		// retry and one dial attempt are all it has room for.
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	}
	cc := redis.NewClusterClient(co)
	c := newClient(cc, cc, o)
	if err := c.Ping(ctx); err != nil {
		o.Logger.Warn("redis cluster does not answer in full; running without cache and Redis leases where it does not",
			"addrs", addrs, "err", err)
	} else {
		o.Logger.Info("redis cluster connected", "addrs", addrs, "command_timeout", o.CommandTimeout)
	}
	return c, nil
}

// ValidateClusterAddrs checks a list of cluster node addresses
// (REDIS_CLUSTER_ADDRS): at least one, each host:port with a port from 1 to
// 65535, none twice. The error is errs.Invalid and names the bad entry.
func ValidateClusterAddrs(addrs []string) error {
	if len(addrs) == 0 {
		return errs.E(errs.Invalid, "REDIS_CLUSTER_ADDRS: no address")
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return errs.E(errs.Invalid, "REDIS_CLUSTER_ADDRS: %q is not host:port", a)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return errs.E(errs.Invalid, "REDIS_CLUSTER_ADDRS: %q: the port must be a number from 1 to 65535", a)
		}
		if seen[a] {
			return errs.E(errs.Invalid, "REDIS_CLUSTER_ADDRS: %q is listed twice", a)
		}
		seen[a] = true
	}
	return nil
}

// ParseClusterAddrs splits a comma-separated REDIS_CLUSTER_ADDRS value,
// ignoring spaces around each entry and empty entries, and validates it.
func ParseClusterAddrs(s string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs, ValidateClusterAddrs(addrs)
}

func (o Options) withDefaults() Options {
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
	return o
}

func newClient(rdb redis.UniversalClient, cluster *redis.ClusterClient, o Options) *Client {
	return &Client{
		rdb:     rdb,
		cluster: cluster,
		log:     o.Logger,
		timeout: o.CommandTimeout,
		prefix:  o.KeyPrefix,
		onError: o.OnError,
		runs:    map[string]*serverRun{},
	}
}

// Ping reports whether Redis answers within the command timeout: on a
// cluster, every master, since a shard that does not answer takes its part
// of the caches and leases with it. An error is errs.Unavailable.
func (c *Client) Ping(ctx context.Context) error {
	cctx, cancel := c.cmdCtx(ctx)
	defer cancel()
	if c.cluster != nil {
		return c.check(ctx, "ping", c.cluster.ForEachMaster(cctx, func(ctx context.Context, m *redis.Client) error {
			if err := m.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", m.Options().Addr, err)
			}
			return nil
		}))
	}
	return c.check(ctx, "ping", c.rdb.Ping(cctx).Err())
}

// Close closes the pool. Calls made afterwards fail.
func (c *Client) Close() error {
	return c.rdb.Close()
}

// key is name in this client's key space.
func (c *Client) key(name string) string { return c.prefix + name }

// taggedKey is kind+id in this client's key space. On a cluster, id is a
// hash tag: every key of one id (a file's record and its generation token)
// lands in one slot, so the scripts and MGET that touch them together do not
// fail with CROSSSLOT. On one server the key stays as it always was, so that
// coordinators of different versions sharing that server agree on it.
func (c *Client) taggedKey(kind, id string) string {
	if c.cluster != nil {
		return c.prefix + kind + "{" + id + "}"
	}
	return c.prefix + kind + id
}

// nodeOf names the server that holds key: its address on a cluster (from
// go-redis's slot map), "" on one server.
func (c *Client) nodeOf(ctx context.Context, key string) (string, error) {
	if c.cluster == nil {
		return "", nil
	}
	// Answered from the slot map go-redis holds, which it loads first if
	// it has none.
	cctx, cancel := c.cmdCtx(ctx)
	defer cancel()
	m, err := c.cluster.MasterForKey(cctx, key)
	if err != nil {
		return "", err
	}
	return m.Options().Addr, nil
}

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
		if c.down.Load() && (c.cluster == nil || time.Since(time.Unix(0, c.lastFailure.Load())) >= clusterQuiet) &&
			c.down.CompareAndSwap(true, false) {
			c.log.Info("redis answers again")
		}
		return err
	}
	if ctx.Err() == nil {
		c.lastFailure.Store(time.Now().UnixNano())
		if c.onError != nil {
			c.onError(op)
		}
		if c.down.CompareAndSwap(false, true) {
			c.log.Warn("redis call failed; degrading until it answers", "op", op, "err", err)
		}
	}
	return errs.Wrap(errs.Unavailable, err, "redis %s", op)
}

// observeRun records the run_id and uptime (seconds) that a lock script
// reported for node (see nodeOf), and notes a restart when the run_id
// changed. Each node of a cluster restarts, and forgets its leases, on its
// own.
func (c *Client) observeRun(node, run string, uptime int64) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	r := c.runs[node]
	if r == nil {
		r = &serverRun{}
		c.runs[node] = r
	}
	if run == r.id || run == "" {
		return
	}
	if r.id != "" {
		// uptime is rounded down, so this is the latest the server can
		// have started: the grace is never cut short.
		r.restarted = time.Now().Add(-time.Duration(uptime) * time.Second)
		attrs := []any{"uptime", time.Duration(uptime) * time.Second}
		if node != "" {
			attrs = append(attrs, "node", node)
		}
		c.log.Warn("redis restarted and lost its leases; new ones wait for their holders to take them back", attrs...)
	}
	r.id = run
}

func (c *Client) lastRunID(node string) string {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if r := c.runs[node]; r != nil {
		return r.id
	}
	return ""
}

// restartedWithin reports whether a restart of node was noticed and the
// server started less than d ago.
func (c *Client) restartedWithin(node string, d time.Duration) bool {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	r := c.runs[node]
	return r != nil && !r.restarted.IsZero() && time.Since(r.restarted) < d
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
