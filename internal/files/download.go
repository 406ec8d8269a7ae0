package files

import (
	"context"
	"io"
	"slices"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// DownloadRange decides what part of file f a download sends for q, by the
// shared parser: nil for the whole file, and also for a range that covers
// the whole file, which is answered as a plain 200. A range no byte satisfies
// is an errs.Unsatisfiable error whose cause, a *byterange.UnsatisfiableError,
// carries the file's size. The content of a file id never changes, so its
// Last-Modified time is a strong validator for If-Range.
func DownloadRange(q byterange.Request, f meta.File) (*byterange.Range, error) {
	r, ok, err := q.Select(byterange.Validators{ETag: ETag(f), LastModified: f.CreatedAt}, f.SizeBytes)
	if err != nil || !ok || r.Length == f.SizeBytes {
		return nil, err
	}
	return &r, nil
}

// ETag is the entity tag of file f's bytes: its quoted checksum.
func ETag(f meta.File) string { return `"` + f.Checksum + `"` }

// Download is an open read of a file from one of its holders.
type Download struct {
	File meta.File
	// ServedBy is the node whose copy is sent; empty when FromCache.
	ServedBy string
	// FromCache says the bytes come from the coordinator's content cache
	// (verified when they were put there) and no node was asked.
	FromCache bool
	Failovers int
	Range     *byterange.Range // nil for the whole file
	// Body yields the bytes. A copy that stops short is left for the next
	// holder at the offset reached; when no holder can go on, or a copy
	// checked at its end does not match, Body yields an error instead of
	// io.EOF (errs.Corrupt for a mismatch), so the caller must abort the
	// response rather than end it normally.
	Body io.ReadCloser
	read *copyRead // nil for a chunked file or one from the cache
}

// Sources names every node that sent bytes of the download so far, in
// order: more than one when a copy stopped short and the next holder went
// on from there. Empty for a download from the content cache; for a
// chunked file, the node of the first chunk.
func (d *Download) Sources() []string {
	if d.read == nil {
		if d.ServedBy == "" {
			return nil
		}
		return []string{d.ServedBy}
	}
	return slices.Clone(d.read.sources)
}

// Length is the number of bytes Body yields.
func (d *Download) Length() int64 {
	if d.Range != nil {
		return d.Range.Length
	}
	return d.File.SizeBytes
}

// Open finds a holder that can serve the file and opens the read. Holders are
// tried in preference order (nodes on the ring first); a connection failure,
// a missing blob or a checksum mismatch known before the first byte moves to
// the next holder at once. q is the client's Range and If-Range, if any.
func (s *Service) Open(ctx context.Context, id string, q byterange.Request) (*Download, error) {
	rec, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Status == meta.FilePending || rec.Status == meta.FileDeleted {
		return nil, fileNotFound(id)
	}
	rng, err := DownloadRange(q, rec.File)
	if err != nil {
		return nil, err
	}
	if rec.Manifest() {
		return s.openChunked(ctx, rec, rng)
	}
	if d, ok := s.fromCache(rec, rng); ok {
		return d, nil
	}
	cr := s.newCopyRead(ctx, rec, s.holders(rec), rng)
	i, err := cr.open()
	if err != nil {
		return nil, err
	}
	n := cr.node
	if i > 0 {
		s.log.Info("serving file from another holder after the preferred one was unavailable",
			"file", id, "served_by", n, "skipped", cr.holders[:i])
	}
	var body io.ReadCloser = cr
	if m, ok := cr.inMemory(); ok {
		body = m
	}
	d := &Download{File: rec.File, ServedBy: n, Failovers: i, Range: rng, read: cr}
	d.Body = &countingBody{rc: body, done: func(bytes int64) { s.opt.Events.Downloaded(n, i, bytes) }}
	return d, nil
}

// openChunked opens the read of a chunked file: its chunks in order, each
// read whole from one holder (failing over per chunk) and verified, the
// next ChunkReadAhead fetched while the current one is sent.
func (s *Service) openChunked(ctx context.Context, rec meta.FileRecord, rng *byterange.Range) (*Download, error) {
	chunks, err := s.opt.Store.ChunksOf(ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	var size int64
	for _, c := range chunks {
		if c.Status == meta.FileDeleted || c.Status == meta.FilePending || c.Chunk.Offset != size {
			return nil, errs.E(errs.Unavailable, "file %s: chunk %s is not readable", rec.ID, c.ID)
		}
		size += c.SizeBytes
	}
	if len(chunks) != rec.ChunkCount || size != rec.SizeBytes {
		return nil, errs.E(errs.Unavailable, "file %s has %d of its %d chunks", rec.ID, len(chunks), rec.ChunkCount)
	}
	cs, first, err := s.openChunks(ctx, chunks, rec.SizeBytes, rng, s.readBufs, s.opt.ChunkReadAhead)
	if err != nil {
		return nil, err
	}
	body := &countedChunks{cs: cs, countingBody: countingBody{rc: cs, done: func(bytes int64) { s.opt.Events.Downloaded(first.node, first.failovers, bytes) }}}
	return &Download{File: rec.File, ServedBy: first.node, Failovers: first.failovers, Range: rng, Body: body}, nil
}

// fromCache answers a download from the content cache when the file's
// verified bytes are there.
func (s *Service) fromCache(rec meta.FileRecord, rng *byterange.Range) (*Download, bool) {
	c := s.opt.ContentCache
	if !s.cacheable(rec.File) {
		return nil, false
	}
	data, ok := c.Get(rec.ID, rec.Checksum)
	s.opt.Events.ContentCache(ok)
	if !ok || int64(len(data)) != rec.SizeBytes {
		return nil, false
	}
	body := data
	if rng != nil {
		body = data[rng.Start : rng.Start+rng.Length]
	}
	return &Download{
		File: rec.File, FromCache: true, Range: rng,
		Body: &countingBody{rc: &memBody{data: body}, done: func(n int64) { s.opt.Events.Downloaded("", 0, n) }},
	}, true
}

// cacheable says whether the content cache may hold rec's bytes: only bytes
// known to match the checksum go there, those a download verified whole
// before sending them and those an upload hashed in memory.
func (s *Service) cacheable(rec meta.File) bool {
	return s.opt.VerifyOnDownload && rec.SizeBytes <= s.opt.DownloadBuffer && s.opt.ContentCache.Fits(rec.SizeBytes)
}

// InMemory returns the bytes of the body that are still to be read when the
// body is held whole in memory (a small file verified before its first byte
// is sent, or one from the content cache), and counts them as read: the
// caller sends them instead of reading Body, and still closes it.
func (d *Download) InMemory() ([]byte, bool) {
	c, ok := d.Body.(*countingBody)
	if !ok {
		return nil, false
	}
	m, ok := c.rc.(*memBody)
	if !ok {
		return nil, false
	}
	b := m.data[m.off:]
	m.off = len(m.data)
	c.n += int64(len(b))
	return b, true
}

// memBody is a body held in memory. release, when set, gives its buffer
// back on Close.
type memBody struct {
	data    []byte
	off     int
	release func()
}

func (m *memBody) Read(p []byte) (int, error) {
	if m.off == len(m.data) {
		return 0, io.EOF
	}
	n := copy(p, m.data[m.off:])
	m.off += n
	return n, nil
}

func (m *memBody) Close() error {
	if m.release != nil {
		m.release()
		m.release = nil
	}
	return nil
}

// countingBody reports the bytes read through it when it is closed.
type countingBody struct {
	rc   io.ReadCloser
	n    int64
	done func(int64)
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingBody) Close() error {
	if c.done != nil {
		c.done(c.n)
		c.done = nil
	}
	return c.rc.Close()
}

// holders orders a file's ACTIVE copies for reading: nodes on the ring in
// preference order first (the primary leads when it is there), then copies on
// nodes off the ring, which may still answer.
func (s *Service) holders(rec meta.FileRecord) []string {
	r := s.opt.Cluster.Ring()
	pref := r.Preference(rec.ID, len(r.Nodes()))
	rank := func(n string) int {
		if i := slices.Index(pref, n); i >= 0 {
			return i
		}
		return len(pref)
	}
	var hs []string
	for _, rep := range rec.Replicas {
		if rep.Status == meta.ReplicaActive {
			hs = append(hs, rep.NodeID)
		}
	}
	slices.SortStableFunc(hs, func(a, b string) int {
		if a == rec.PrimaryNodeID && r.Has(a) {
			return -1
		}
		if b == rec.PrimaryNodeID && r.Has(b) {
			return 1
		}
		return rank(a) - rank(b)
	})
	return hs
}
