// Package contentcache keeps the bytes of small, recently read files in the
// coordinator's memory so that a repeated download of a hot file needs no
// storage node.
//
// An entry holds a file's id, its SHA-256 checksum and bytes that were just
// verified against that checksum. A file's bytes never change under its id
// (an upload always makes a new id), and a lookup names the checksum its
// metadata record holds and is answered only when the entry's matches, so an
// entry can only ever be returned for the exact bytes the record describes.
// That makes the cache safe with any metadata store, including several
// coordinators sharing PostgreSQL: nothing another process does can make an
// entry wrong. Deleted files are refused by the metadata lookup before the
// cache is asked; Remove frees their memory early.
//
// The cache is bounded by the bytes it holds (data plus a fixed overhead per
// entry) and evicts the least recently used entries first.
package contentcache

import (
	"container/list"
	"sync"
)

// entryOverhead approximates what an entry costs besides its data: the map
// slot, the list element, the key strings and the slice header.
const entryOverhead = 256

// Cache is a byte-bounded LRU of verified file contents. The zero value is
// not usable; call New. A nil *Cache is a valid, always-empty cache.
type Cache struct {
	maxBytes int64
	maxFile  int64

	mu      sync.Mutex
	entries map[string]*list.Element // by file id, of *entry; front is most recent
	lru     list.List
	bytes   int64
}

type entry struct {
	id, checksum string
	data         []byte
}

// New returns a cache holding up to maxBytes, of files up to maxFile bytes
// each. maxBytes <= 0 or maxFile <= 0 returns nil: no cache.
func New(maxBytes, maxFile int64) *Cache {
	if maxBytes <= 0 || maxFile <= 0 {
		return nil
	}
	return &Cache{maxBytes: maxBytes, maxFile: min(maxFile, maxBytes-entryOverhead), entries: map[string]*list.Element{}}
}

// Fits reports whether a file of size bytes would be kept.
func (c *Cache) Fits(size int64) bool { return c != nil && size <= c.maxFile }

// Get returns the bytes of file id whose checksum is checksum. The slice is
// shared: callers must not modify it.
func (c *Cache) Get(id, checksum string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok || el.Value.(*entry).checksum != checksum {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*entry).data, true
}

// Put keeps data as the bytes of file id with the given checksum. The caller
// must have verified data against checksum and must not modify it afterwards.
// Data larger than the cache's per-file limit is ignored.
func (c *Cache) Put(id, checksum string, data []byte) {
	if !c.Fits(int64(len(data))) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		if el.Value.(*entry).checksum == checksum {
			c.lru.MoveToFront(el)
			return
		}
		c.drop(el)
	}
	c.entries[id] = c.lru.PushFront(&entry{id: id, checksum: checksum, data: data})
	c.bytes += cost(data)
	for c.bytes > c.maxBytes {
		c.drop(c.lru.Back())
	}
}

// Remove drops file id's entry, if any.
func (c *Cache) Remove(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		c.drop(el)
	}
}

// Usage reports the entries held and the bytes they are accounted at.
func (c *Cache) Usage() (entries int, bytes int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}

func (c *Cache) drop(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.entries, e.id)
	c.bytes -= cost(e.data)
}

func cost(data []byte) int64 { return int64(len(data)) + entryOverhead }
