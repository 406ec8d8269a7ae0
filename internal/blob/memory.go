package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
)

// Memory is a Store held in memory, for tests elsewhere that need a node whose
// blobs they can corrupt or whose failures they can script. It behaves like
// Disk (the same conformance suite runs on both) except that it holds every
// blob in memory.
type Memory struct {
	acct     accounting
	locks    idLocks
	closed   atomic.Bool
	identity string

	mu    sync.RWMutex
	blobs map[string]memBlob
	// failCheck, when set, is what Check answers.
	failCheck error
}

type memBlob struct {
	data []byte // never modified in place: readers may hold it
	sum  string
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store with an identity of its own:
// a new Memory is a new, empty disk.
func NewMemory(opts Options) *Memory {
	return &Memory{acct: accounting{capacity: opts.CapacityBytes}, blobs: make(map[string]memBlob), identity: uuid.NewString()}
}

// Identity implements Identifier.
func (m *Memory) Identity() string { return m.identity }

// Corrupt flips one byte of id's stored bytes (an empty blob gains a byte),
// keeping its recorded checksum, as bit rot would. It reports whether id was
// held.
func (m *Memory) Corrupt(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[id]
	if !ok {
		return false
	}
	data := slices.Clone(b.data)
	if len(data) == 0 {
		data = []byte{0}
	} else {
		data[len(data)/2] ^= 0xff
	}
	m.blobs[id] = memBlob{data: data, sum: b.sum}
	return true
}

// SetCheckError makes Check answer err (nil restores the normal answer), to
// script a node whose storage became unusable.
func (m *Memory) SetCheckError(err error) {
	m.mu.Lock()
	m.failCheck = err
	m.mu.Unlock()
}

func (m *Memory) get(id string) (memBlob, error) {
	if err := ValidateID(id); err != nil {
		return memBlob{}, err
	}
	if m.closed.Load() {
		return memBlob{}, errClosed()
	}
	m.mu.RLock()
	b, ok := m.blobs[id]
	m.mu.RUnlock()
	if !ok {
		return memBlob{}, errNotFound(id)
	}
	return b, nil
}

// Receive implements Receiver.
func (m *Memory) Receive(ctx context.Context, id, checksum string, size int64, r io.Reader) (Info, bool, error) {
	if err := ValidateID(id); err != nil {
		return Info{}, false, err
	}
	sum, err := ValidateChecksum(checksum)
	if err != nil {
		return Info{}, false, err
	}
	if m.closed.Load() {
		return Info{}, false, errClosed()
	}
	unlock, err := m.locks.lock(ctx, id)
	if err != nil {
		return Info{}, false, err
	}
	defer unlock()

	m.mu.RLock()
	cur, held := m.blobs[id]
	m.mu.RUnlock()
	if held && hashBytes(cur.data) == cur.sum {
		if cur.sum == sum {
			return Info{ID: id, Size: int64(len(cur.data)), Checksum: sum}, false, nil
		}
		return Info{}, false, errs.E(errs.Conflict, "blob %s is already stored with checksum %s, not %s", id, cur.sum, sum)
	}
	if size >= 0 {
		if err := m.acct.checkRoom(size); err != nil {
			return Info{}, false, err
		}
	}
	var buf bytes.Buffer
	w := &reservingWriter{w: &buf, acct: &m.acct}
	n, actual, err := receiveCopy(ctx, w, r, size)
	if err == nil && actual != sum {
		err = errs.E(errs.Corrupt, "blob %s: body hashes to %s but %s was declared", id, actual, sum)
	}
	if err != nil {
		m.acct.release(w.reserved)
		return Info{}, false, err
	}
	m.mu.Lock()
	m.blobs[id] = memBlob{data: buf.Bytes(), sum: sum}
	m.mu.Unlock()
	if held {
		m.acct.drop(int64(len(cur.data)))
	}
	m.acct.publish(w.reserved)
	return Info{ID: id, Size: n, Checksum: sum}, true, nil
}

// Stat implements Statter.
func (m *Memory) Stat(_ context.Context, id string) (Info, error) {
	b, err := m.get(id)
	if err != nil {
		return Info{}, err
	}
	return Info{ID: id, Size: int64(len(b.data)), Checksum: b.sum}, nil
}

// Fetch implements Fetcher.
func (m *Memory) Fetch(_ context.Context, id string) (io.ReadSeekCloser, Info, error) {
	b, err := m.get(id)
	if err != nil {
		return nil, Info{}, err
	}
	return nopCloser{bytes.NewReader(b.data)}, Info{ID: id, Size: int64(len(b.data)), Checksum: b.sum}, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// Remove implements Remover.
func (m *Memory) Remove(ctx context.Context, id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if m.closed.Load() {
		return errClosed()
	}
	unlock, err := m.locks.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	b, ok := m.blobs[id]
	delete(m.blobs, id)
	m.mu.Unlock()
	if ok {
		m.acct.drop(int64(len(b.data)))
	}
	return nil
}

// Enumerate implements Enumerator.
func (m *Memory) Enumerate(_ context.Context, after string, limit int) ([]Info, error) {
	if err := ValidateCursor(after); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, errs.E(errs.Invalid, "limit %d must be positive", limit)
	}
	if m.closed.Load() {
		return nil, errClosed()
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Info
	for id, b := range m.blobs {
		if id > after {
			out = append(out, Info{ID: id, Size: int64(len(b.data)), Checksum: b.sum})
		}
	}
	slices.SortFunc(out, func(x, y Info) int { return strings.Compare(x.ID, y.ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Rehash implements Rehasher.
func (m *Memory) Rehash(_ context.Context, id string) (Check, error) {
	b, err := m.get(id)
	if err != nil {
		return Check{}, err
	}
	return Check{ID: id, Size: int64(len(b.data)), Stored: b.sum, Actual: hashBytes(b.data)}, nil
}

// Usage implements UsageReporter. Without a capacity limit, FreeBytes and
// TotalBytes are 0: memory has no meaningful device size.
func (m *Memory) Usage(context.Context) (Usage, error) {
	u := Usage{CapacityBytes: m.acct.capacity, TotalBytes: max(m.acct.capacity, 0)}
	u.Blobs, u.BytesUsed = m.acct.snapshot()
	u.FreeBytes = max(m.acct.free(), 0)
	return u, nil
}

// Check implements Checker.
func (m *Memory) Check(context.Context) error {
	if m.closed.Load() {
		return errClosed()
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.failCheck != nil {
		return errs.Wrap(errs.Unavailable, m.failCheck, "memory store")
	}
	return nil
}

// Close marks the store closed.
func (m *Memory) Close() error {
	m.closed.Store(true)
	return nil
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
