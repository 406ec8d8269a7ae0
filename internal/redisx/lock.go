package redisx

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// Locker hands out named leases: locks that expire unless renewed, so that a
// holder that dies cannot wedge the cluster.
type Locker interface {
	// TryLock takes the lease name for ttl. It never waits for another
	// holder: ok is false, without error, when someone else holds it, and the
	// caller skips the work. An error means the answer is unknown.
	TryLock(ctx context.Context, name string, ttl time.Duration) (l Lease, ok bool, err error)
}

// Lease is one acquisition of a named lease.
type Lease interface {
	Name() string
	// Deadline is the time before which the lease is certainly still held:
	// the moment the last successful acquisition or renewal was sent, plus
	// its TTL. Work under the lease must stop by then unless Renew succeeds.
	Deadline() time.Time
	// Renew extends the lease by its TTL. ok is false, without error, when
	// another owner holds it now. A lease that lapsed (or that a restarted
	// Redis forgot) and that nobody took since is taken back; work done
	// after Deadline was unprotected all the same, which is why KeepAlive
	// stops work at Deadline.
	Renew(ctx context.Context) (ok bool, err error)
	// Release gives the lease up if it is still held. It runs even when ctx
	// has ended (a deferred release after a cancelled run), bounded by the
	// backend's own timeout.
	Release(ctx context.Context) error
}

// ErrLeaseLost is the cause of a KeepAlive context cancelled because its lease
// could not be renewed in time.
var ErrLeaseLost = errs.E(errs.Conflict, "lease lost")

// DefaultGrace is the default of LockOptions.Grace.
const DefaultGrace = 30 * time.Second

// LockOptions configure the lockers. The zero value is usable.
type LockOptions struct {
	// Owner names this process in lock values and lease rows (followed by a
	// random part per acquisition), for whoever inspects them. Default
	// "<hostname>:<pid>".
	Owner string
	// Grace is how long new Redis leases are withheld after this process
	// notices that Redis restarted, and how long Fallback withholds
	// metadata-store leases after Redis stops answering, so that the holders
	// of forgotten or unreachable leases have taken them back, moved them
	// over or stopped before anyone else is granted the same name. It must
	// be at least the longest TTL in use: RedisLocker and Fallback reject a
	// longer TTL. Default DefaultGrace.
	Grace  time.Duration
	Logger *slog.Logger
}

func (o LockOptions) withDefaults() LockOptions {
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func checkLock(name string, ttl, grace time.Duration) error {
	switch {
	case name == "":
		return errs.E(errs.Invalid, "lease name is empty")
	case ttl < time.Millisecond:
		return errs.E(errs.Invalid, "lease %s: ttl %s is below one millisecond", name, ttl)
	case grace > 0 && ttl > grace:
		return errs.E(errs.Invalid, "lease %s: ttl %s exceeds the grace period %s", name, ttl, grace)
	}
	return nil
}

// backend is one place leases live. A token identifies one acquisition;
// acquiring with a token that already holds the lease extends it, which is
// how a Fallback lease moves between backends without letting go.
type backend interface {
	// acquire takes name for token, or extends it if token holds it. A
	// migrating holder is not subject to the backend's grace period.
	acquire(ctx context.Context, name, token string, ttl time.Duration, migrating bool) (bool, error)
	// renew extends the lease if token holds it or nobody does.
	renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error)
	release(ctx context.Context, name, token string) error
}

// lease is a Lease held in one backend.
type lease struct {
	b     backend
	name  string
	token string
	ttl   time.Duration

	mu       sync.Mutex
	deadline time.Time
}

var _ Lease = (*lease)(nil)

func tryLock(ctx context.Context, b backend, owner, name string, ttl time.Duration) (Lease, bool, error) {
	l := &lease{b: b, name: name, token: owner + ":" + newToken(), ttl: ttl}
	start := time.Now()
	ok, err := b.acquire(ctx, name, l.token, ttl, false)
	if err != nil || !ok {
		return nil, false, err
	}
	l.deadline = start.Add(ttl)
	return l, true, nil
}

func (l *lease) Name() string { return l.name }

func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *lease) Renew(ctx context.Context) (bool, error) {
	start := time.Now()
	ok, err := l.b.renew(ctx, l.name, l.token, l.ttl)
	if ok && err == nil {
		l.mu.Lock()
		l.deadline = start.Add(l.ttl)
		l.mu.Unlock()
	}
	return ok, err
}

func (l *lease) Release(ctx context.Context) error {
	return l.b.release(context.WithoutCancel(ctx), l.name, l.token)
}

// RedisLocker keeps leases in Redis: SET NX PX to take one, compare-and-
// PEXPIRE to renew, compare-and-DEL to release, each keyed by a random token
// per acquisition so that only the holder can renew or release.
//
// Redis without persistence forgets every lease when it restarts, while their
// holders are still working. Holders take their lease back at their next
// renewal (a renewal takes a lease nobody holds), so for Grace after a
// restart that this process noticed (the server's run_id changed) it grants
// no new lease. A process that never saw the old server cannot notice, and
// may be granted a lease whose old holder has not renewed yet; that holder
// then finds it taken at its next renewal and stops (see KeepAlive). A first
// start of Redis withholds nothing.
type RedisLocker struct {
	c     *Client
	owner string
	grace time.Duration
}

var _ Locker = (*RedisLocker)(nil)

// NewRedisLocker returns a Locker over c.
func NewRedisLocker(c *Client, o LockOptions) *RedisLocker {
	o = o.withDefaults()
	return &RedisLocker{c: c, owner: o.Owner, grace: o.Grace}
}

// TryLock takes the lease name in Redis. A Redis failure is an errs.Unavailable
// error.
func (r *RedisLocker) TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	if err := checkLock(name, ttl, r.grace); err != nil {
		return nil, false, err
	}
	return tryLock(ctx, r, r.owner, name, ttl)
}

func (r *RedisLocker) lockKey(name string) string { return r.c.key("lock:" + name) }

// acquireScript takes, takes back or extends a lease, and reports the
// server's run_id and uptime so that the client notices restarts.
// KEYS: lock. ARGV: token, ttl ms, grace in seconds, "1" to honour the
// grace, the run_id the client last saw ("" for none).
// Returns {1, run_id, uptime} when token holds the lease, {0, …} when
// another token does, {-1, …} when the lease is free but the server restarted
// (its run_id is not the one the client saw) less than grace ago.
var acquireScript = redis.NewScript(`
local info = redis.call('INFO', 'server')
local run = string.match(info, 'run_id:(%x+)') or ''
local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or 0
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return {1, run, up}
end
if cur then
	return {0, run, up}
end
if ARGV[4] == '1' and ARGV[5] ~= '' and run ~= ARGV[5] and up < tonumber(ARGV[3]) then
	return {-1, run, up}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, run, up}`)

// releaseScript deletes a lease its token holds.
// KEYS: lock. ARGV: token.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0`)

// acquire runs acquireScript. A migrating holder, and a renewal, may take a
// lease nobody holds at any time: either it still held the lease until now
// (its deadline has not passed) or it holds it elsewhere.
func (r *RedisLocker) acquire(ctx context.Context, name, token string, ttl time.Duration, migrating bool) (bool, error) {
	return r.run(ctx, "lock_acquire", name, token, ttl, !migrating)
}

func (r *RedisLocker) renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	return r.run(ctx, "lock_renew", name, token, ttl, false)
}

func (r *RedisLocker) run(ctx context.Context, op, name, token string, ttl time.Duration, honourGrace bool) (bool, error) {
	if honourGrace && r.c.restartedWithin(r.grace) {
		return false, nil
	}
	// uptime counts whole seconds; rounding the grace up keeps it whole.
	graceSecs := int64((r.grace + time.Second - 1) / time.Second)
	honour := "0"
	if honourGrace {
		honour = "1"
	}
	cctx, cancel := r.c.cmdCtx(ctx)
	defer cancel()
	res, err := acquireScript.Run(cctx, r.c.rdb, []string{r.lockKey(name)},
		token, ttl.Milliseconds(), graceSecs, honour, r.c.lastRunID()).Slice()
	if err := r.c.check(ctx, op, err); err != nil {
		return false, err
	}
	n, run, up, err := parseAcquire(res)
	if err != nil {
		return false, errs.Wrap(errs.Other, err, "redis %s", op)
	}
	r.c.observeRun(run, up)
	return n == 1, nil
}

func parseAcquire(res []any) (n int64, run string, up int64, err error) {
	if len(res) == 3 {
		var ok1, ok2, ok3 bool
		n, ok1 = res[0].(int64)
		run, ok2 = res[1].(string)
		up, ok3 = res[2].(int64)
		if ok1 && ok2 && ok3 {
			return n, run, up, nil
		}
	}
	return 0, "", 0, fmt.Errorf("unexpected lock script answer %v", res)
}

func (r *RedisLocker) release(ctx context.Context, name, token string) error {
	cctx, cancel := r.c.cmdCtx(ctx)
	defer cancel()
	return r.c.check(ctx, "lock_release", releaseScript.Run(cctx, r.c.rdb, []string{r.lockKey(name)}, token).Err())
}

// StoreLocker keeps leases as rows of the metadata store (AcquireLease and
// ReleaseLease), timed by the database's clock, so that coordinators sharing
// a database stay single-writer without Redis.
type StoreLocker struct {
	store meta.Store
	owner string
}

var _ Locker = (*StoreLocker)(nil)

// NewStoreLocker returns a Locker over store's lease rows.
func NewStoreLocker(store meta.Store, o LockOptions) *StoreLocker {
	o = o.withDefaults()
	return &StoreLocker{store: store, owner: o.Owner}
}

// TryLock takes the lease name in the metadata store. Store errors keep
// their kind.
func (s *StoreLocker) TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	if err := checkLock(name, ttl, 0); err != nil {
		return nil, false, err
	}
	return tryLock(ctx, s, s.owner, name, ttl)
}

func (s *StoreLocker) acquire(ctx context.Context, name, token string, ttl time.Duration, _ bool) (bool, error) {
	return s.store.AcquireLease(ctx, name, token, ttl)
}

func (s *StoreLocker) renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	return s.store.AcquireLease(ctx, name, token, ttl)
}

func (s *StoreLocker) release(ctx context.Context, name, token string) error {
	return s.store.ReleaseLease(ctx, name, token)
}

// LocalLocker keeps leases in this process only: single-writer among the
// goroutines of one coordinator, nothing more. It is the fallback of a
// coordinator that has Redis but no shared database (the embedded store).
type LocalLocker struct {
	owner string
	now   func() time.Time

	mu   sync.Mutex
	held map[string]localHold
}

type localHold struct {
	token   string
	expires time.Time
}

var _ Locker = (*LocalLocker)(nil)

// localSweepAt is the number of held names at which expired ones are dropped.
const localSweepAt = 1024

// NewLocalLocker returns a process-local Locker.
func NewLocalLocker(o LockOptions) *LocalLocker {
	o = o.withDefaults()
	return &LocalLocker{owner: o.Owner, now: time.Now, held: make(map[string]localHold)}
}

// TryLock takes the lease name in this process.
func (m *LocalLocker) TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	if err := checkLock(name, ttl, 0); err != nil {
		return nil, false, err
	}
	return tryLock(ctx, m, m.owner, name, ttl)
}

func (m *LocalLocker) acquire(ctx context.Context, name, token string, ttl time.Duration, _ bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, errs.Wrap(errs.Unavailable, err, "lock %s", name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if h, ok := m.held[name]; ok && h.token != token && now.Before(h.expires) {
		return false, nil
	}
	if len(m.held) >= localSweepAt {
		// Leases that were never released would otherwise pile up.
		for n, h := range m.held {
			if !now.Before(h.expires) {
				delete(m.held, n)
			}
		}
	}
	m.held[name] = localHold{token: token, expires: now.Add(ttl)}
	return true, nil
}

func (m *LocalLocker) renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	return m.acquire(ctx, name, token, ttl, false)
}

func (m *LocalLocker) release(_ context.Context, name, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.held[name]; ok && h.token == token {
		delete(m.held, name)
	}
	return nil
}
