package contentcache

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetNeedsTheSameChecksum(t *testing.T) {
	c := New(1<<20, 1<<10)
	c.Put("f1", "sum-a", []byte("alpha"))
	got, ok := c.Get("f1", "sum-a")
	require.True(t, ok)
	require.Equal(t, "alpha", string(got))
	_, ok = c.Get("f1", "sum-b")
	require.False(t, ok, "an entry answers only for the checksum it was verified against")
	_, ok = c.Get("f2", "sum-a")
	require.False(t, ok)

	// A Put under another checksum replaces the entry rather than adding one.
	c.Put("f1", "sum-b", []byte("beta"))
	_, ok = c.Get("f1", "sum-a")
	require.False(t, ok)
	got, ok = c.Get("f1", "sum-b")
	require.True(t, ok)
	require.Equal(t, "beta", string(got))
	n, b := c.Usage()
	require.Equal(t, 1, n)
	require.Equal(t, int64(4+entryOverhead), b)
}

func TestEvictsLeastRecentlyUsedByBytes(t *testing.T) {
	per := int64(100 + entryOverhead)
	c := New(3*per, 1<<10)
	data := bytes.Repeat([]byte("x"), 100)
	for _, id := range []string{"a", "b", "c"} {
		c.Put(id, "s", data)
	}
	_, ok := c.Get("a", "s") // a is now the most recent
	require.True(t, ok)
	c.Put("d", "s", data)
	_, ok = c.Get("b", "s")
	require.False(t, ok, "b was the least recently used")
	for _, id := range []string{"a", "c", "d"} {
		_, ok := c.Get(id, "s")
		require.True(t, ok, id)
	}
	n, b := c.Usage()
	require.Equal(t, 3, n)
	require.Equal(t, 3*per, b)
}

func TestLimits(t *testing.T) {
	c := New(1<<20, 10)
	require.True(t, c.Fits(10))
	require.False(t, c.Fits(11))
	c.Put("big", "s", make([]byte, 11))
	_, ok := c.Get("big", "s")
	require.False(t, ok, "a file over the per-file limit is not kept")

	// The per-file limit never exceeds what the whole cache can hold.
	small := New(entryOverhead+8, 1<<20)
	require.True(t, small.Fits(8))
	require.False(t, small.Fits(9))

	require.Nil(t, New(0, 10))
	require.Nil(t, New(10, 0))
}

func TestNilCacheIsEmpty(t *testing.T) {
	var c *Cache
	c.Put("f", "s", []byte("x"))
	_, ok := c.Get("f", "s")
	require.False(t, ok)
	require.False(t, c.Fits(0))
	c.Remove("f")
	n, b := c.Usage()
	require.Zero(t, n)
	require.Zero(t, b)
}

func TestRemove(t *testing.T) {
	c := New(1<<20, 1<<10)
	c.Put("f", "s", []byte("x"))
	c.Put("g", "s", []byte("y"))
	c.Remove("f")
	c.Remove("absent")
	_, ok := c.Get("f", "s")
	require.False(t, ok)
	n, b := c.Usage()
	require.Equal(t, 1, n)
	require.Equal(t, int64(1+entryOverhead), b)
}

func TestConcurrentUse(t *testing.T) {
	c := New(50*(8+entryOverhead), 1<<10)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				id := fmt.Sprintf("f%d", (i*7+w)%80)
				want := []byte(fmt.Sprintf("%08d", (i*7+w)%80))
				if got, ok := c.Get(id, "s"); ok {
					require.Equal(t, want, got)
				} else {
					c.Put(id, "s", want)
				}
				if i%50 == 0 {
					c.Remove(id)
				}
			}
		})
	}
	wg.Wait()
	n, b := c.Usage()
	require.LessOrEqual(t, b, int64(50*(8+entryOverhead)))
	require.Equal(t, int64(n)*(8+entryOverhead), b, "the byte count matches the entries held")
}
