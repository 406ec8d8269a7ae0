// Shared by every store, Disk and Memory and any layout to come: the hashing
// copy of a write's body, the capacity accounting and the per-id locks.

package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"

	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/errs"
)

// receiveCopy copies src to dst, hashing as it goes, and returns the number of
// bytes written and their SHA-256. size >= 0 is the declared length: a body
// longer or shorter than it is errs.Invalid. A read error from src is
// errs.Invalid (the sender's body broke off); a cancelled ctx stops the copy.
func receiveCopy(ctx context.Context, dst io.Writer, src io.Reader, size int64) (int64, string, error) {
	bufp := bufpool.Get()
	defer bufpool.Put(bufp)
	buf := *bufp
	h := sha256.New()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, "", errs.Wrap(errs.Unavailable, err, "receive stopped")
		}
		m, rerr := src.Read(buf)
		if m > 0 {
			if size >= 0 && n+int64(m) > size {
				return n, "", errs.E(errs.Invalid, "body is longer than the declared %d bytes", size)
			}
			h.Write(buf[:m])
			if _, err := dst.Write(buf[:m]); err != nil {
				return n, "", err
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if err := ctx.Err(); err != nil {
				return n, "", errs.Wrap(errs.Unavailable, err, "receive stopped")
			}
			return n, "", errs.Wrap(errs.Invalid, rerr, "reading the body after %d bytes", n)
		}
	}
	if size >= 0 && n != size {
		return n, "", errs.E(errs.Invalid, "body has %d bytes, %d were declared", n, size)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// hashReader returns the SHA-256 of everything r yields and its length,
// stopping early when ctx is cancelled.
func hashReader(ctx context.Context, r io.Reader) (string, int64, error) {
	bufp := bufpool.Get()
	defer bufpool.Put(bufp)
	buf := *bufp
	h := sha256.New()
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, errs.Wrap(errs.Unavailable, err, "hashing stopped")
		}
		m, err := r.Read(buf)
		h.Write(buf[:m])
		n += int64(m)
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if err != nil {
			return "", n, err
		}
	}
}

// accounting keeps the running totals of a store so that Usage never walks
// it, and enforces the capacity limit. Bytes being written count against the
// limit before they are published (inflight), so concurrent writers cannot
// together overshoot it.
type accounting struct {
	capacity int64

	mu       sync.Mutex
	blobs    int64
	used     int64
	inflight int64
}

// checkRoom fails with errs.NoSpace if n more bytes would exceed the limit,
// without reserving them: an early answer for a write whose size is declared.
func (a *accounting) checkRoom(n int64) error {
	if a.capacity <= 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used+a.inflight+n > a.capacity {
		return errs.E(errs.NoSpace, "capacity of %d bytes reached (%d used, %d being written, %d more asked)", a.capacity, a.used, a.inflight, n)
	}
	return nil
}

// reserve counts n bytes being written, or fails with errs.NoSpace.
func (a *accounting) reserve(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.capacity > 0 && a.used+a.inflight+n > a.capacity {
		return errs.E(errs.NoSpace, "capacity of %d bytes reached (%d used, %d being written)", a.capacity, a.used, a.inflight)
	}
	a.inflight += n
	return nil
}

// release returns n reserved bytes that were not published.
func (a *accounting) release(n int64) {
	a.mu.Lock()
	a.inflight -= n
	a.mu.Unlock()
}

// publish turns n reserved bytes into a stored blob.
func (a *accounting) publish(n int64) {
	a.mu.Lock()
	a.inflight -= n
	a.used += n
	a.blobs++
	a.mu.Unlock()
}

// drop forgets a stored blob of n bytes.
func (a *accounting) drop(n int64) {
	a.mu.Lock()
	a.used -= n
	a.blobs--
	a.mu.Unlock()
}

// add counts blobs already stored, found when a store is opened.
func (a *accounting) add(blobs, used int64) {
	a.mu.Lock()
	a.blobs += blobs
	a.used += used
	a.mu.Unlock()
}

func (a *accounting) snapshot() (blobs, used int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.blobs, a.used
}

// free is what the limit still allows (ignoring the device); -1 if unlimited.
func (a *accounting) free() int64 {
	if a.capacity <= 0 {
		return -1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(0, a.capacity-a.used-a.inflight)
}

// reservingWriter reserves room in the accounting before each write.
type reservingWriter struct {
	w        io.Writer
	acct     *accounting
	reserved int64
}

func (r *reservingWriter) Write(p []byte) (int, error) {
	if err := r.acct.reserve(int64(len(p))); err != nil {
		return 0, err
	}
	r.reserved += int64(len(p))
	return r.w.Write(p)
}

// idLocks serialises writers and removers of one id while letting other ids
// proceed: a slow upload blocks only its own id. Waiting honours ctx.
type idLocks struct {
	mu sync.Mutex
	m  map[string]*idLock
}

type idLock struct {
	ch   chan struct{}
	refs int
}

func (l *idLocks) lock(ctx context.Context, id string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[string]*idLock)
	}
	k := l.m[id]
	if k == nil {
		k = &idLock{ch: make(chan struct{}, 1)}
		l.m[id] = k
	}
	k.refs++
	l.mu.Unlock()

	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; l.release(id, k) }, nil
	case <-ctx.Done():
		l.release(id, k)
		return nil, errs.Wrap(errs.Unavailable, ctx.Err(), "waiting for another write of blob %s", id)
	}
}

// tryLock takes id's lock if no writer or remover holds or waits for it;
// ok is false otherwise.
func (l *idLocks) tryLock(id string) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, busy := l.m[id]; busy {
		return nil, false
	}
	if l.m == nil {
		l.m = make(map[string]*idLock)
	}
	k := &idLock{ch: make(chan struct{}, 1), refs: 1}
	k.ch <- struct{}{}
	l.m[id] = k
	return func() { <-k.ch; l.release(id, k) }, true
}

func (l *idLocks) release(id string, k *idLock) {
	l.mu.Lock()
	k.refs--
	if k.refs == 0 {
		delete(l.m, id)
	}
	l.mu.Unlock()
}
