package lease

import (
	"context"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// Rows is what StoreLocker needs of the metadata store (meta.Store has it):
// lease rows timed by the database's clock.
type Rows interface {
	AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, owner string) error
}

// StoreLocker keeps leases as rows of the metadata store, timed by the
// database's clock, so that coordinators sharing a database stay
// single-writer without Redis.
type StoreLocker struct {
	rows  Rows
	owner string
}

var (
	_ Locker  = (*StoreLocker)(nil)
	_ Backend = (*StoreLocker)(nil)
)

// NewStoreLocker returns a Locker over rows.
func NewStoreLocker(rows Rows, o Options) *StoreLocker {
	o = o.WithDefaults()
	return &StoreLocker{rows: rows, owner: o.Owner}
}

// TryLock takes the lease name in the metadata store. Store errors keep
// their kind.
func (s *StoreLocker) TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	if err := Check(name, ttl, 0); err != nil {
		return nil, false, err
	}
	return Take(ctx, s, s.owner, name, ttl)
}

// Acquire takes or extends the lease row for token.
func (s *StoreLocker) Acquire(ctx context.Context, name, token string, ttl time.Duration, _ bool) (bool, error) {
	return s.rows.AcquireLease(ctx, name, token, ttl)
}

// Renew extends the lease row for token.
func (s *StoreLocker) Renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	return s.rows.AcquireLease(ctx, name, token, ttl)
}

// Release drops the lease row if token holds it.
func (s *StoreLocker) Release(ctx context.Context, name, token string) error {
	return s.rows.ReleaseLease(ctx, name, token)
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

var (
	_ Locker  = (*LocalLocker)(nil)
	_ Backend = (*LocalLocker)(nil)
)

// localSweepAt is the number of held names at which expired ones are dropped.
const localSweepAt = 1024

// NewLocalLocker returns a process-local Locker.
func NewLocalLocker(o Options) *LocalLocker {
	o = o.WithDefaults()
	return &LocalLocker{owner: o.Owner, now: time.Now, held: make(map[string]localHold)}
}

// TryLock takes the lease name in this process.
func (m *LocalLocker) TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	if err := Check(name, ttl, 0); err != nil {
		return nil, false, err
	}
	return Take(ctx, m, m.owner, name, ttl)
}

// Acquire takes or extends the lease for token.
func (m *LocalLocker) Acquire(ctx context.Context, name, token string, ttl time.Duration, _ bool) (bool, error) {
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

// Renew extends the lease for token.
func (m *LocalLocker) Renew(ctx context.Context, name, token string, ttl time.Duration) (bool, error) {
	return m.Acquire(ctx, name, token, ttl, false)
}

// Release drops the lease if token holds it.
func (m *LocalLocker) Release(_ context.Context, name, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.held[name]; ok && h.token == token {
		delete(m.held, name)
	}
	return nil
}
