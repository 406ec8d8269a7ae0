package nodeclient_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
)

// TestLargeBlobStreamsInBoundedMemory writes and reads back a 256 MiB blob
// made by a generator, and checks that neither the client nor the node (both
// in this process) held it in memory: the bytes allocated during the whole
// round trip, and the growth of the heap, stay a small fraction of its size.
func TestLargeBlobStreamsInBoundedMemory(t *testing.T) {
	const (
		size  = 256 << 20
		bound = 32 << 20 // an eighth of the blob
	)
	generate := func() io.Reader {
		return io.LimitReader(rand.NewChaCha8([32]byte{'d', 'f', 's'}), size)
	}
	h := sha256.New()
	_, err := io.Copy(h, generate())
	require.NoError(t, err)
	sum := hex.EncodeToString(h.Sum(nil))

	n := nodetest.Start(t, nodetest.Options{})
	c := nodeclient.New(nodeclient.Options{})
	ctx := context.Background()
	id := uuid.NewString()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := watchHeap(t)

	info, created, err := c.Put(ctx, n.URL, id, sum, size, generate())
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, int64(size), info.Size)

	obj, err := c.Get(ctx, n.URL, id, nil)
	require.NoError(t, err)
	h.Reset()
	read, err := io.Copy(h, obj.Body)
	require.NoError(t, err)
	require.NoError(t, obj.Body.Close())
	require.Equal(t, int64(size), read)
	require.Equal(t, sum, hex.EncodeToString(h.Sum(nil)), "the blob comes back intact")

	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	grown := int64(peak()) - int64(before.HeapInuse)
	t.Logf("round trip of %d MiB: %d KiB allocated, heap in use grew by at most %d KiB", size>>20, allocated>>10, grown>>10)
	require.Less(t, allocated, uint64(bound), "bytes allocated during the round trip")
	require.Less(t, grown, int64(bound), "growth of the heap in use")
}

// watchHeap samples HeapInuse until the test ends and returns a function
// that reports the highest value seen.
func watchHeap(t *testing.T) func() uint64 {
	var (
		mu   sync.Mutex
		high uint64
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		high = max(high, m.HeapInuse)
		mu.Unlock()
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	var once sync.Once
	finish := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(finish)
	return func() uint64 {
		finish()
		sample()
		mu.Lock()
		defer mu.Unlock()
		return high
	}
}
