// Package lease is dfs's one notion of a lease: a named lock that expires
// unless renewed, so that a holder that dies cannot wedge the cluster. It
// keeps background work (reconciling a file, a rebalance, the repair pass,
// the anti-entropy sweep, the failure detector's sweep) single-writer across
// coordinators.
//
// The interface lives here with its consumers; so do the implementations that
// need nothing but the metadata store (StoreLocker) or this process
// (LocalLocker). The Redis implementation, and the Locker that falls back from
// Redis to the store, live in redisx: Redis stays optional.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// Locker hands out named leases.
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

// LockerFunc is a Locker written as a function, for tests and adapters.
type LockerFunc func(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error)

// TryLock calls f.
func (f LockerFunc) TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	return f(ctx, name, ttl)
}

var _ Locker = LockerFunc(nil)

// ErrLeaseLost is the cause of a KeepAlive context cancelled because its lease
// could not be renewed in time.
var ErrLeaseLost = errs.E(errs.Conflict, "lease lost")

// DefaultGrace is the default of Options.Grace.
const DefaultGrace = 30 * time.Second

// Options configure the lockers. The zero value is usable.
type Options struct {
	// Owner names this process in lock values and lease rows (followed by a
	// random part per acquisition), for whoever inspects them. Default
	// "<hostname>:<pid>".
	Owner string
	// Grace is how long new Redis leases are withheld after this process
	// notices that Redis restarted, and how long redisx.Fallback withholds
	// metadata-store leases after Redis stops answering, so that the holders
	// of forgotten or unreachable leases have taken them back, moved them
	// over or stopped before anyone else is granted the same name. It must
	// be at least the longest TTL in use: the Redis-based lockers reject a
	// longer TTL. StoreLocker and LocalLocker have no use for it. Default
	// DefaultGrace.
	Grace  time.Duration
	Logger *slog.Logger
}

// WithDefaults fills in the defaults of the zero fields.
func (o Options) WithDefaults() Options {
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

// Check validates a request for a lease: a name, a TTL of at least a
// millisecond and, when grace is positive, no longer than grace. Its errors
// are errs.Invalid.
func Check(name string, ttl, grace time.Duration) error {
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

// Backend is one place leases live. A token identifies one acquisition;
// acquiring with a token that already holds the lease extends it, which is
// how redisx.Fallback moves a lease between backends without letting go.
type Backend interface {
	// Acquire takes name for token, or extends it if token holds it. A
	// migrating holder is not subject to the backend's grace period.
	Acquire(ctx context.Context, name, token string, ttl time.Duration, migrating bool) (bool, error)
	// Renew extends the lease if token holds it or nobody does.
	Renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, name, token string) error
}

// NewToken returns a token for one acquisition by owner: owner's name and a
// random part that no other acquisition will produce.
func NewToken(owner string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return owner + ":" + hex.EncodeToString(b[:])
}

// Take acquires name in b under a new token of owner's, returning the Lease
// that renews and releases it there. It does not validate (see Check).
func Take(ctx context.Context, b Backend, owner, name string, ttl time.Duration) (Lease, bool, error) {
	l := &lease{b: b, name: name, token: NewToken(owner), ttl: ttl}
	start := time.Now()
	ok, err := b.Acquire(ctx, name, l.token, ttl, false)
	if err != nil || !ok {
		return nil, false, err
	}
	l.deadline = start.Add(ttl)
	return l, true, nil
}

// lease is a Lease held in one backend.
type lease struct {
	b     Backend
	name  string
	token string
	ttl   time.Duration

	mu       sync.Mutex
	deadline time.Time
}

var _ Lease = (*lease)(nil)

func (l *lease) Name() string { return l.name }

func (l *lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

func (l *lease) Renew(ctx context.Context) (bool, error) {
	start := time.Now()
	ok, err := l.b.Renew(ctx, l.name, l.token, l.ttl)
	if ok && err == nil {
		l.mu.Lock()
		l.deadline = start.Add(l.ttl)
		l.mu.Unlock()
	}
	return ok, err
}

func (l *lease) Release(ctx context.Context) error {
	return l.b.Release(context.WithoutCancel(ctx), l.name, l.token)
}
