package ring

import "sync/atomic"

// Atomic publishes the current ring to concurrent readers. Load never blocks:
// a reader gets whichever complete snapshot was stored last, and a writer
// replaces the snapshot instead of changing it.
type Atomic struct {
	p atomic.Pointer[Ring]
}

// NewAtomic returns an Atomic holding r.
func NewAtomic(r *Ring) *Atomic {
	a := &Atomic{}
	a.Store(r)
	return a
}

// Load returns the current snapshot. Before the first Store it returns an
// empty ring with DefaultVNodes, so callers need no nil check.
func (a *Atomic) Load() *Ring {
	if r := a.p.Load(); r != nil {
		return r
	}
	return New(DefaultVNodes)
}

// Store publishes r as the current snapshot.
func (a *Atomic) Store(r *Ring) { a.p.Store(r) }

// Update replaces the snapshot with change(current) and returns the result.
// Concurrent updates do not lose each other's changes: if another writer
// stored a ring in between, change runs again on the newer one, so change
// must be free of side effects.
func (a *Atomic) Update(change func(*Ring) *Ring) *Ring {
	for {
		old := a.p.Load()
		cur := old
		if cur == nil {
			cur = New(DefaultVNodes)
		}
		next := change(cur)
		if a.p.CompareAndSwap(old, next) {
			return next
		}
	}
}
