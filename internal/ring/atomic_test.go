package ring

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAtomicLoadStore(t *testing.T) {
	var a Atomic
	require.Zero(t, a.Load().Len(), "zero value loads an empty ring")
	r := New(10, "a")
	a.Store(r)
	require.Same(t, r, a.Load())
	require.Same(t, r, NewAtomic(r).Load())
}

func TestAtomicConcurrentUpdatesLoseNothing(t *testing.T) {
	const writers, perWriter = 8, 10
	a := NewAtomic(New(10))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for i := 0; i < 4; i++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// A reader sees a whole snapshot: every node's points present.
				r := a.Load()
				if r.Len() != len(r.Nodes())*r.VNodes() {
					t.Errorf("torn snapshot: %d points for %d nodes", r.Len(), len(r.Nodes()))
					return
				}
				r.Preference("k", 3)
			}
		}()
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				name := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				a.Update(func(r *Ring) *Ring { return r.With(name) })
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	require.Len(t, a.Load().Nodes(), writers*perWriter)
}
