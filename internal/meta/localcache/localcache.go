// Package localcache keeps recently read file records in the coordinator's
// own memory, in front of a metadata store that no other process writes: the
// embedded SQLite store, which belongs to exactly one coordinator. Every
// write of a file record goes through this process, so the cache can stay
// exact by hearing of each one; with PostgreSQL, where several coordinators
// write, the shared Redis cache (package redisx) is the one to use, since
// this one would not hear of another coordinator's writes.
//
// A write drops the record when it starts, and when it has succeeded keeps
// the record the store returned (write-through), so the first download after
// an upload does not read the store. It keeps it only if no other write of
// that record, and no write that changes records it cannot name, overlapped
// it: two writes of one record whose calls overlap may return in either
// order, and the one returning last need not hold what the store holds.
//
// A lookup that misses reads the store and keeps what it read only if no
// write of any file record started or finished meanwhile, so a read that
// overlapped a write can never cache what the write replaced. PENDING
// records are not kept: they change while their upload runs.
package localcache

import (
	"container/list"
	"context"
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
	// writes counts the starts and ends of writes: a fill is kept only when
	// it has not moved since the store was read.
	writes uint64
	// wholesale counts the starts of writes that change records they cannot
	// name (beginAll), wholesaleInflight those in progress: a write-through
	// is kept only when none began during the write and none is in progress
	// at its end (one that began earlier may commit after it).
	wholesale         uint64
	wholesaleInflight int
	// inflight holds the writes in progress, by the id of the record.
	inflight map[string]*flight

	hits, misses func()
}

// flight is the writes of one record in progress.
type flight struct {
	n int
	// crossed: a write of the record began while another was in progress,
	// so none of them knows whether its own result is the latest.
	crossed bool
}

// entry is one record held, packed (pack.go).
type entry struct {
	id     string
	packed string
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
	s := &Store{
		Store: store, max: o.Entries, entries: map[string]*list.Element{}, inflight: map[string]*flight{},
		hits: o.Hits, misses: o.Misses,
	}
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
		packed := el.Value.(*entry).packed
		s.mu.Unlock()
		rec := unpack(packed)
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
	s.put(id, rec)
	return rec, nil
}

// put keeps a copy of rec as id's record, the most recent; s.mu is held.
// A record pack cannot hold exactly is not kept, and drops what was held.
func (s *Store) put(id string, rec meta.FileRecord) {
	packed, ok := pack(&rec)
	if !ok {
		s.remove(id)
		return
	}
	if pid := packedID(packed); pid == id {
		id = pid // the map key then shares the packed string's memory
	}
	if el, ok := s.entries[id]; ok { // another reader or a write filled it meanwhile
		el.Value.(*entry).packed = packed
		s.lru.MoveToFront(el)
		return
	}
	s.entries[id] = s.lru.PushFront(&entry{id: id, packed: packed})
	for s.lru.Len() > s.max {
		oldest := s.lru.Back()
		s.lru.Remove(oldest)
		delete(s.entries, oldest.Value.(*entry).id)
	}
}

// drop forgets id's record and marks that a write started or ended, so that
// a read in progress discards what it read; s.mu is held.
func (s *Store) drop(id string) {
	s.writes++
	s.remove(id)
}

// remove forgets id's record; s.mu is held.
func (s *Store) remove(id string) {
	if el, ok := s.entries[id]; ok {
		s.lru.Remove(el)
		delete(s.entries, id)
	}
}

// write is one write of a record, from begin to end.
type write struct {
	s         *Store
	id        string
	wholesale uint64
}

// begin drops id's record before the store's write and notes the write as
// in progress.
func (s *Store) begin(id string) write {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(id)
	if f, ok := s.inflight[id]; ok {
		f.n++
		f.crossed = true
	} else {
		s.inflight[id] = &flight{n: 1}
	}
	return write{s: s, id: id, wholesale: s.wholesale}
}

// end follows the store's write. It drops id's record again, for a read
// that started while the write was in progress, then keeps rec when the
// write succeeded (rec is non-nil) and nothing could have overtaken it:
// no other write of id overlapped it, and no write of records it cannot
// name (beginAll) did.
// rec must be what the store returned, which is what its GetFile would.
func (w write) end(rec *meta.FileRecord) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(w.id)
	f := s.inflight[w.id]
	f.n--
	if f.n == 0 {
		delete(s.inflight, w.id)
	}
	overtaken := f.crossed || s.wholesale != w.wholesale || s.wholesaleInflight > 0
	if rec == nil || overtaken || rec.Status == meta.FilePending {
		return
	}
	kept := *rec
	kept.Chunks = nil // the file service's, not the store's (meta.FileRecord)
	s.put(w.id, kept)
}

// finish ends w, keeping rec when err is nil.
func (w write) finish(rec *meta.FileRecord, err error) error {
	if err != nil {
		rec = nil
	}
	w.end(rec)
	return err
}

// CreateFile implements meta.Store.
func (s *Store) CreateFile(ctx context.Context, rec *meta.FileRecord) error {
	w := s.begin(rec.ID)
	return w.finish(rec, s.Store.CreateFile(ctx, rec))
}

// UpdateFile implements meta.Store.
func (s *Store) UpdateFile(ctx context.Context, rec *meta.FileRecord) error {
	w := s.begin(rec.ID)
	// A chunk's write moves its file's stored status too, to a value only
	// the store knows.
	if parent := rec.Chunk.ParentID; parent != "" {
		pw := s.begin(parent)
		defer pw.end(nil)
	}
	return w.finish(rec, s.Store.UpdateFile(ctx, rec))
}

// UpdateFileAndPutObject implements meta.Store: for the file record it is
// UpdateFile. The object row is Objects' to drop (WatchFiles).
func (s *Store) UpdateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	w := s.begin(rec.ID)
	if parent := rec.Chunk.ParentID; parent != "" { // as in UpdateFile
		pw := s.begin(parent)
		defer pw.end(nil)
	}
	replaced, err := s.Store.UpdateFileAndPutObject(ctx, rec, o)
	return replaced, w.finish(rec, err)
}

// CreateFileAndPutObject implements meta.Store: for the file record it is
// CreateFile. The object row is Objects' to drop (WatchFiles).
func (s *Store) CreateFileAndPutObject(ctx context.Context, rec *meta.FileRecord, o *meta.Object) (string, error) {
	w := s.begin(rec.ID)
	replaced, err := s.Store.CreateFileAndPutObject(ctx, rec, o)
	return replaced, w.finish(rec, err)
}

// TouchFile implements meta.Store. The time it stores is not returned, so
// the record is dropped, not kept.
func (s *Store) TouchFile(ctx context.Context, id string) error {
	w := s.begin(id)
	defer w.end(nil)
	return s.Store.TouchFile(ctx, id)
}

// DeleteFile implements meta.Store. Deleting a manifest also changes its
// chunks' records, so then every record held is dropped.
func (s *Store) DeleteFile(ctx context.Context, id string) error {
	if rec, err := s.Store.GetFile(ctx, id); err == nil && rec.Manifest() {
		s.beginAll()
		defer s.endAll()
		return s.Store.DeleteFile(ctx, id)
	}
	w := s.begin(id)
	defer w.end(nil)
	return s.Store.DeleteFile(ctx, id)
}

// FinishPart implements meta.Store; it changes the records of the chunks
// of the attempts it replaces.
func (s *Store) FinishPart(ctx context.Context, p *meta.UploadPart) ([]string, error) {
	s.beginAll()
	defer s.endAll()
	return s.Store.FinishPart(ctx, p)
}

// CompleteSession implements meta.Store; it changes the records of every
// chunk of the session.
func (s *Store) CompleteSession(ctx context.Context, sessionID string, manifest *meta.FileRecord, partIDs []string) ([]string, error) {
	s.beginAll()
	defer s.endAll()
	return s.Store.CompleteSession(ctx, sessionID, manifest, partIDs)
}

// DeleteSession implements meta.Store; it changes the records of every
// chunk of the session.
func (s *Store) DeleteSession(ctx context.Context, id string) ([]string, error) {
	s.beginAll()
	defer s.endAll()
	return s.Store.DeleteSession(ctx, id)
}

// MarkNodeCopiesLost implements meta.Store. It changes records it cannot
// name in advance, so every record held is dropped, before and after, the
// way begin and end drop one.
func (s *Store) MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error) {
	s.beginAll()
	defer s.endAll()
	return s.Store.MarkNodeCopiesLost(ctx, nodeID, reason)
}

// beginAll drops every record held before a write that changes records it
// cannot name.
func (s *Store) beginAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wholesale++
	s.wholesaleInflight++
	s.dropAll()
}

// endAll drops every record held again after such a write, for reads and
// writes that were in progress meanwhile.
func (s *Store) endAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wholesaleInflight--
	s.dropAll()
}

// dropAll forgets every record; s.mu is held.
func (s *Store) dropAll() {
	s.writes++
	s.entries = map[string]*list.Element{}
	s.lru.Init()
}
