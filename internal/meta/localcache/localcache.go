// Package localcache keeps recently read file records in the coordinator's
// own memory, in front of a metadata store that no other process writes: the
// embedded SQLite store, which belongs to exactly one coordinator. Every
// write of a file record goes through this process, so dropping the record
// on each write keeps the cache exact; with PostgreSQL, where several
// coordinators write, the shared Redis cache (package redisx) is the one to
// use, since this one would not hear of another coordinator's writes.
//
// A lookup that misses reads the store and keeps what it read only if no
// write of any file record started or finished meanwhile, so a read that
// overlapped a write can never cache what the write replaced. PENDING
// records are not kept: they change while their upload runs.
package localcache

import (
	"container/list"
	"context"
	"slices"
	"sync"

	"github.com/dfs-project/dfs/internal/meta"
)

// Store is a meta.Store whose GetFile answers from memory when it can.
type Store struct {
	meta.Store
	max int

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry; front is most recent
	lru     list.List
	// writes counts invalidations: a fill is kept only when it has not
	// moved since the store was read.
	writes uint64

	hits, misses func()
}

type entry struct {
	id  string
	rec meta.FileRecord
}

// Options configure a Store. Hits and Misses, when set, are told of each
// lookup (for metrics).
type Options struct {
	Entries      int
	Hits, Misses func()
}

// New returns store with a cache of up to o.Entries file records in front of
// it. o.Entries <= 0 returns store itself.
func New(store meta.Store, o Options) meta.Store {
	if o.Entries <= 0 {
		return store
	}
	nop := func() {}
	s := &Store{Store: store, max: o.Entries, entries: map[string]*list.Element{}, hits: o.Hits, misses: o.Misses}
	if s.hits == nil {
		s.hits = nop
	}
	if s.misses == nil {
		s.misses = nop
	}
	return s
}

// Len is the number of records held.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// GetFile answers from memory, or reads the store and keeps a copy.
func (s *Store) GetFile(ctx context.Context, id string) (meta.FileRecord, error) {
	s.mu.Lock()
	if el, ok := s.entries[id]; ok {
		s.lru.MoveToFront(el)
		rec := clone(el.Value.(*entry).rec)
		s.mu.Unlock()
		s.hits()
		return rec, nil
	}
	seen := s.writes
	s.mu.Unlock()
	s.misses()

	rec, err := s.Store.GetFile(ctx, id)
	if err != nil || rec.Status == meta.FilePending {
		return rec, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writes != seen {
		return rec, nil // a write overlapped the read: what was read may be stale
	}
	if el, ok := s.entries[id]; ok { // another reader filled it meanwhile
		el.Value.(*entry).rec = clone(rec)
		s.lru.MoveToFront(el)
		return rec, nil
	}
	s.entries[id] = s.lru.PushFront(&entry{id: id, rec: clone(rec)})
	for s.lru.Len() > s.max {
		oldest := s.lru.Back()
		s.lru.Remove(oldest)
		delete(s.entries, oldest.Value.(*entry).id)
	}
	return rec, nil
}

// invalidate drops id and marks that a write happened. Writes call it both
// before and after the store's write: the first makes a read that started
// earlier discard what it read, the second one that started while the write
// was in flight.
func (s *Store) invalidate(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	if el, ok := s.entries[id]; ok {
		s.lru.Remove(el)
		delete(s.entries, id)
	}
}

// CreateFile implements meta.Store.
func (s *Store) CreateFile(ctx context.Context, rec *meta.FileRecord) error {
	s.invalidate(rec.ID)
	defer s.invalidate(rec.ID)
	return s.Store.CreateFile(ctx, rec)
}

// UpdateFile implements meta.Store.
func (s *Store) UpdateFile(ctx context.Context, rec *meta.FileRecord) error {
	s.invalidate(rec.ID)
	defer s.invalidate(rec.ID)
	// A chunk's write moves its file's stored status too.
	if parent := rec.Chunk.ParentID; parent != "" {
		s.invalidate(parent)
		defer s.invalidate(parent)
	}
	return s.Store.UpdateFile(ctx, rec)
}

// TouchFile implements meta.Store.
func (s *Store) TouchFile(ctx context.Context, id string) error {
	s.invalidate(id)
	defer s.invalidate(id)
	return s.Store.TouchFile(ctx, id)
}

// DeleteFile implements meta.Store. Deleting a manifest also changes its
// chunks' records, so then every record held is dropped.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	if rec, err := s.Store.GetFile(ctx, id); err == nil && rec.Manifest() {
		s.invalidateAll()
		defer s.invalidateAll()
		return s.Store.DeleteFile(ctx, id)
	}
	s.invalidate(id)
	defer s.invalidate(id)
	return s.Store.DeleteFile(ctx, id)
}

// FinishPart implements meta.Store; it changes the records of the chunks
// of the attempts it replaces.
func (s *Store) FinishPart(ctx context.Context, p *meta.UploadPart) ([]string, error) {
	s.invalidateAll()
	defer s.invalidateAll()
	return s.Store.FinishPart(ctx, p)
}

// CompleteSession implements meta.Store; it changes the records of every
// chunk of the session.
func (s *Store) CompleteSession(ctx context.Context, sessionID string, manifest *meta.FileRecord, partIDs []string) ([]string, error) {
	s.invalidateAll()
	defer s.invalidateAll()
	return s.Store.CompleteSession(ctx, sessionID, manifest, partIDs)
}

// DeleteSession implements meta.Store; it changes the records of every
// chunk of the session.
func (s *Store) DeleteSession(ctx context.Context, id string) ([]string, error) {
	s.invalidateAll()
	defer s.invalidateAll()
	return s.Store.DeleteSession(ctx, id)
}

// MarkNodeCopiesLost implements meta.Store. It changes records it cannot
// name in advance, so every record held is dropped, before and after, the
// way invalidate drops one.
func (s *Store) MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error) {
	s.invalidateAll()
	defer s.invalidateAll()
	return s.Store.MarkNodeCopiesLost(ctx, nodeID, reason)
}

func (s *Store) invalidateAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	s.entries = map[string]*list.Element{}
	s.lru.Init()
}

// clone copies rec so that neither the caller nor the cache can change the
// other's copy through the shared replica slice.
func clone(rec meta.FileRecord) meta.FileRecord {
	rec.Replicas = slices.Clone(rec.Replicas)
	return rec
}
