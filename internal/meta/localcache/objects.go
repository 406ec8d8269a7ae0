package localcache

import (
	"container/list"
	"context"
	"slices"
	"sync"

	"github.com/dfs-project/dfs/internal/meta"
)

// Objects keeps recently read object rows (bucket, key → file and stored
// headers) in memory, in front of the embedded store's namespace, for the
// same reason and on the same terms as Store keeps file records: every write
// that can change or remove a row passes through this process.
//
// A row changes or goes by PutObject, PutObjectTags, DeleteObject and
// DeleteBucket, which pass Objects itself, by an upload's final write that
// moves a key (UpdateFileAndPutObject), and by the deletion of the file it
// names (the store cascades the row away with its file row); those two pass
// the meta.Store that WatchFiles returns. Every file delete and final write of
// the coordinator must go through that store, or a key whose file was
// deleted or replaced could still be served.
//
// A miss fills only if no such write started or finished while the store was
// read, as in Store.GetFile.
type Objects struct {
	meta.Namespace
	max int

	mu      sync.Mutex
	entries map[objectKey]*list.Element // of *objectEntry; front is most recent
	// byFile finds the rows held that name a file, for its delete. The
	// store does not forbid two keys naming one file, so it is a list,
	// nearly always of one.
	byFile map[string][]objectKey
	lru    list.List
	writes uint64 // as in Store: a fill is kept only if it has not moved
}

type objectKey struct{ bucket, key string }

// objectEntry is one row held, packed (pack.go); its key and file are
// substrings of the packed row.
type objectEntry struct {
	key    objectKey
	packed string
}

// NewObjects returns a cache of up to entries object rows in front of ns.
func NewObjects(ns meta.Namespace, entries int) *Objects {
	return &Objects{Namespace: ns, max: entries, entries: map[objectKey]*list.Element{}, byFile: map[string][]objectKey{}}
}

// Len is the number of rows held.
func (c *Objects) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// GetObject answers from memory, or reads the store and keeps a copy. A key
// that is absent is not kept: its PutObject would have to find it.
func (c *Objects) GetObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	k := objectKey{bucket, key}
	c.mu.Lock()
	if el, ok := c.entries[k]; ok {
		c.lru.MoveToFront(el)
		packed := el.Value.(*objectEntry).packed
		c.mu.Unlock()
		return unpackObject(packed), nil
	}
	seen := c.writes
	c.mu.Unlock()

	o, err := c.Namespace.GetObject(ctx, bucket, key)
	if err != nil {
		return o, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != seen {
		return o, nil // a write overlapped the read: the row may be stale
	}
	if el, ok := c.entries[k]; ok { // another reader filled it meanwhile
		c.lru.MoveToFront(el)
		return o, nil
	}
	packed, ok := packObject(&o)
	if !ok {
		return o, nil // it would not come back identical
	}
	if pk := packedObjectKey(packed); pk == k {
		k = pk // the map's key then shares the packed row's memory
	}
	c.entries[k] = c.lru.PushFront(&objectEntry{key: k, packed: packed})
	c.index(packedObjectFile(packed), k)
	for c.lru.Len() > c.max {
		c.remove(c.lru.Back())
	}
	return o, nil
}

// PutObject implements meta.Namespace. Like every write here it drops what
// it changes before the store's write and again after it: the first makes a
// read that started earlier discard what it read, the second one that
// started while the write was in flight.
func (c *Objects) PutObject(ctx context.Context, o *meta.Object) (string, error) {
	k := objectKey{o.Bucket, o.Key}
	c.invalidateKey(k)
	defer c.invalidateKey(k)
	return c.Namespace.PutObject(ctx, o)
}

// DeleteObject implements meta.Namespace.
func (c *Objects) DeleteObject(ctx context.Context, bucket, key string) (meta.Object, error) {
	k := objectKey{bucket, key}
	c.invalidateKey(k)
	defer c.invalidateKey(k)
	return c.Namespace.DeleteObject(ctx, bucket, key)
}

// PutObjectTags implements meta.Namespace: the tags are part of the row
// held.
func (c *Objects) PutObjectTags(ctx context.Context, bucket, key string, tags []meta.Tag) error {
	k := objectKey{bucket, key}
	c.invalidateKey(k)
	defer c.invalidateKey(k)
	return c.Namespace.PutObjectTags(ctx, bucket, key, tags)
}

// DeleteBucket implements meta.Namespace. The store removes only an empty
// bucket, so no row should go with it; every row held is dropped all the
// same, since a bucket's delete is rare and this needs no proof that the
// bucket was empty in the cache too.
func (c *Objects) DeleteBucket(ctx context.Context, name string) error {
	c.invalidateAll()
	defer c.invalidateAll()
	return c.Namespace.DeleteBucket(ctx, name)
}

// WatchFiles returns store with its DeleteFile made to drop the rows that
// name the file, whose rows the store deletes with it, and its
// UpdateFileAndPutObject and CreateFileAndPutObject the row of the key it
// moves.
func (c *Objects) WatchFiles(store meta.Store) meta.Store {
	return &fileDeletes{Store: store, c: c}
}

// fileDeletes is a meta.Store that tells Objects of each file delete and
// each key an upload's final write moves. Only DeleteFile deletes a file a
// key can name: the session and part writes delete chunk rows, and a key
// names a whole file or a manifest, never a chunk.
type fileDeletes struct {
	meta.Store
	c *Objects
}

// DeleteFile implements meta.Store.
func (f *fileDeletes) DeleteFile(ctx context.Context, id string) error {
	f.c.invalidateFile(id)
	defer f.c.invalidateFile(id)
	return f.Store.DeleteFile(ctx, id)
}

// UpdateFileAndPutObject implements meta.Store. It drops the key's row as
// PutObject does, before and after the store's write.
func (f *fileDeletes) UpdateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	k := objectKey{o.Bucket, o.Key}
	f.c.invalidateKey(k)
	defer f.c.invalidateKey(k)
	return f.Store.UpdateFileAndPutObject(ctx, rec, o)
}

// CreateFileAndPutObject implements meta.Store, as UpdateFileAndPutObject.
func (f *fileDeletes) CreateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	k := objectKey{o.Bucket, o.Key}
	f.c.invalidateKey(k)
	defer f.c.invalidateKey(k)
	return f.Store.CreateFileAndPutObject(ctx, rec, o)
}

func (c *Objects) invalidateKey(k objectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
}

func (c *Objects) invalidateFile(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	for _, k := range slices.Clone(c.byFile[id]) { // remove edits the list
		c.remove(c.entries[k])
	}
}

func (c *Objects) invalidateAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	c.entries = map[objectKey]*list.Element{}
	c.byFile = map[string][]objectKey{}
	c.lru.Init()
}

// index records that the row held under k names file; c.mu is held.
func (c *Objects) index(file string, k objectKey) {
	c.byFile[file] = append(c.byFile[file], k)
}

// remove drops one row held and its index entry; c.mu is held.
func (c *Objects) remove(el *list.Element) {
	e := c.lru.Remove(el).(*objectEntry)
	delete(c.entries, e.key)
	file := packedObjectFile(e.packed)
	keys := slices.DeleteFunc(c.byFile[file], func(k objectKey) bool { return k == e.key })
	if len(keys) == 0 {
		delete(c.byFile, file)
	} else {
		c.byFile[file] = keys
	}
}
