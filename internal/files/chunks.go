package files

import (
	"context"
	"crypto/md5" //nolint:gosec // S3 part ETags are MD5 by definition; nothing here relies on it for integrity
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"hash"
	"io"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// chunkBuffers lends the buffers chunks are received into and read back
// from, each ChunkSize bytes (allocChunk: outside the Go heap where it can).
// At most max buffers exist at once and a taker waits for one to come back
// when all are lent; the pool unbudgeted returns never waits. It keeps up
// to keep idle buffers for reuse and frees the others.
// Every buffer taken must be given back, and nothing may read it after.
//
// A taker from a budget must never be what a holder of the same budget
// waits for: a stream's reader keeps one buffer while its chunk writes
// (which hold theirs and always finish) run, and a completion's read-ahead
// waits while the buffer being hashed is read out. So a budget can slow a
// stream down but never stop every holder at once.
type chunkBuffers struct {
	size    int64
	keep    int
	free    chan *[]byte  // idle buffers
	tokens  chan struct{} // one per buffer of the budget in existence
	made    atomic.Int64  // buffers allocated so far
	waiting atomic.Int64  // takers waiting for a buffer now
	// live counts the budget's buffers in existence, apart from tokens,
	// and peak its highest value: what tests check the budget against.
	live, peak atomic.Int64
	// lent counts the buffers out of get and not yet put back: what tests
	// check for a leak.
	lent atomic.Int64
	// idle, for a pool without a budget, is the budgeted pool whose idle
	// buffers it borrows and gives back to, so that the two together
	// keep no more idle buffers than that one's budget allows.
	idle *chunkBuffers
}

func newChunkBuffers(size int64, keep, max int) *chunkBuffers {
	return &chunkBuffers{size: size, keep: min(keep, max), tokens: make(chan struct{}, max),
		free: make(chan *[]byte, max)} // room for every buffer: a put never blocks
}

// unbudgeted returns a pool of c's size that never waits: it lends c's
// idle buffers when there are any (they leave c's budget while lent) and
// gives buffers back to c's idle ones while c's budget has room.
func (c *chunkBuffers) unbudgeted() *chunkBuffers {
	return &chunkBuffers{size: c.size, idle: c}
}

// counted adds d to the budget's live buffers.
func (c *chunkBuffers) counted(d int64) {
	if c.idle != nil {
		return
	}
	n := c.live.Add(d)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// takeIdle lends an idle buffer out of the budget, if there is one.
func (c *chunkBuffers) takeIdle() (*[]byte, bool) {
	select {
	case b := <-c.free:
		<-c.tokens
		c.counted(-1)
		return b, true
	default:
		return nil, false
	}
}

// keepIdle takes b into the budget as an idle buffer, if there is room.
func (c *chunkBuffers) keepIdle(b *[]byte) bool {
	if len(c.free) >= c.keep && c.waiting.Load() == 0 {
		return false
	}
	select {
	case c.tokens <- struct{}{}:
		c.counted(1)
		c.free <- b
		return true
	default:
		return false
	}
}

func (c *chunkBuffers) alloc() *[]byte {
	c.made.Add(1)
	c.counted(1)
	return allocChunk(c.size)
}

// get lends a buffer, waiting while the budget is spent; it gives up when
// ctx ends.
func (c *chunkBuffers) get(ctx context.Context) (*[]byte, error) {
	b, err := c.take(ctx)
	if err == nil {
		c.lent.Add(1)
	}
	return b, err
}

func (c *chunkBuffers) take(ctx context.Context) (*[]byte, error) {
	if c.idle != nil {
		if b, ok := c.idle.takeIdle(); ok {
			return b, nil
		}
		return c.alloc(), nil
	}
	select {
	case b := <-c.free:
		return b, nil
	case c.tokens <- struct{}{}:
		return c.alloc(), nil
	default:
	}
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	select {
	case b := <-c.free:
		return b, nil
	case c.tokens <- struct{}{}:
		return c.alloc(), nil
	case <-ctx.Done():
		return nil, errs.Wrap(errs.Unavailable, ctx.Err(), "wait for a chunk buffer")
	}
}

// put gives b back: to a taker waiting for one, to the idle ones kept, or
// to the system.
func (c *chunkBuffers) put(b *[]byte) {
	c.lent.Add(-1)
	if c.idle != nil {
		if !c.idle.keepIdle(b) {
			freeChunk(b)
		}
		return
	}
	if len(c.free) < c.keep || c.waiting.Load() > 0 {
		c.free <- b
		return
	}
	freeChunk(b)
	c.counted(-1)
	<-c.tokens
}

// chunked is what writeChunks stored: the stream's size and checksums.
type chunked struct {
	size   int64
	sha256 string
	md5    string // empty unless asked for
	chunks int
	// state is the stream's SHA-256 state before its sum: what a running
	// hash over this stream and what follows it goes on from.
	state []byte
}

// chunkWriter writes one stream as chunks under one parent while the
// stream is still being read: each chunk, once received, is stored as a
// blob of its own (storeBlob: copies in parallel, per-copy failover down
// the chunk's own preference list) by a goroutine of its own, at most
// ChunkConcurrency of them at once, while the next chunk is received.
type chunkWriter struct {
	s      *Service
	parent string
	slots  chan struct{}
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error // the first chunk that could not be stored
}

func (cw *chunkWriter) failed() error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.err
}

// store writes chunk index of data (a buffer from the pool, given back when
// done) at offset.
func (cw *chunkWriter) store(ctx context.Context, buf *[]byte, n int, index int, offset int64) {
	cw.slots <- struct{}{}
	cw.wg.Go(func() {
		// The buffer goes back before the slot does: the reader, let go by
		// the slot, takes that buffer instead of making another.
		defer func() { cw.s.chunkBufs.put(buf); <-cw.slots }()
		data := (*buf)[:n]
		sum := sha256.Sum256(data)
		rec := meta.FileRecord{File: meta.File{
			ID: uuid.NewString(), Name: "chunk", ContentType: "application/octet-stream",
			Chunk: meta.ChunkRef{ParentID: cw.parent, Index: index, Offset: offset},
		}}
		sp := &spooled{size: int64(n), sum: hex.EncodeToString(sum[:]), mem: data}
		if _, err := cw.s.storeBlob(ctx, &rec, sp, nil); err != nil {
			cw.mu.Lock()
			if cw.err == nil {
				cw.err = errs.Wrap(errs.KindOf(err), err, "chunk %d (offset %d)", index, offset)
			}
			cw.mu.Unlock()
		}
	})
}

// writeChunks reads body to its end and stores it as chunks of ChunkSize
// bytes under parent, hashing the whole stream (SHA-256, and MD5 when
// withMD5) in the same pass. A stream longer than
// limit is refused with TooLarge. On any failure the chunks already stored
// are deleted (marked DELETED and handed to the reconciler).
func (s *Service) writeChunks(ctx, storeCtx context.Context, parent string, body io.Reader, limit int64, withMD5 bool) (chunked, error) {
	cw := &chunkWriter{s: s, parent: parent, slots: make(chan struct{}, s.opt.ChunkConcurrency)}
	sh := sha256.New()
	var mh hash.Hash
	if withMD5 {
		mh = md5.New() //nolint:gosec // see the import
	}
	var out chunked
	err := func() error {
		for {
			if err := cw.failed(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return errs.Wrap(errs.Invalid, err, "upload cancelled")
			}
			buf, err := s.chunkBufs.get(ctx)
			if err != nil {
				return errs.Wrap(errs.Invalid, err, "upload cancelled")
			}
			n, rerr := fill(body, *buf)
			if rerr != nil && rerr != io.EOF {
				s.chunkBufs.put(buf)
				return bodyError(rerr)
			}
			if out.size+int64(n) > limit {
				s.chunkBufs.put(buf)
				return tooLarge(limit)
			}
			if n > 0 {
				sh.Write((*buf)[:n])
				if mh != nil {
					mh.Write((*buf)[:n])
				}
				cw.store(storeCtx, buf, n, out.chunks, out.size)
				out.size += int64(n)
				out.chunks++
			} else {
				s.chunkBufs.put(buf)
			}
			if rerr == io.EOF {
				return nil
			}
		}
	}()
	cw.wg.Wait()
	if err == nil {
		err = cw.failed()
	}
	if err != nil {
		s.dropChunks(storeCtx, parent)
		return chunked{}, err
	}
	if out.state, err = sh.(encoding.BinaryMarshaler).MarshalBinary(); err != nil {
		return chunked{}, errs.Wrap(errs.Other, err, "save the stream's hash state")
	}
	out.sha256 = hex.EncodeToString(sh.Sum(nil))
	if mh != nil {
		out.md5 = hex.EncodeToString(mh.Sum(nil))
	}
	return out, nil
}

// dropChunks marks every chunk of parent DELETED and has the reconciler
// remove their copies; what it cannot remove now the repair loop does.
func (s *Service) dropChunks(ctx context.Context, parent string) {
	chunks, err := s.opt.Store.ChunksOf(ctx, parent)
	if err == nil {
		err = s.opt.Store.DeleteFile(ctx, parent)
	}
	if err != nil {
		s.log.Error("could not delete the chunks of a failed upload; the session's expiry removes them", "parent", parent, "err", err)
		return
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	s.removeBlobs(ids)
}

// removeBlobs hands DELETED chunks to the reconciler in the background; one
// that does not fit in the queue is left to the repair loop.
func (s *Service) removeBlobs(ids []string) {
	for _, id := range ids {
		s.repairs.Go(func(ctx context.Context) {
			if _, err := s.opt.Reconciler.Reconcile(ctx, id); err != nil {
				s.log.Warn("could not remove a deleted chunk yet; the repair loop will", "chunk", id, "err", err)
			}
		})
	}
}

// chunkStatus is a chunked file's status from its chunks (meta.ManifestStatus).
func chunkStatus(chunks []meta.FileRecord) (meta.FileStatus, string) {
	return meta.ManifestStatus(chunks)
}

// withChunks loads a manifest's chunks into rec and derives its status from
// them, which is always current (the manifest's stored status is the one
// its upload ended with). Other records are returned unchanged.
func (s *Service) withChunks(ctx context.Context, rec meta.FileRecord) (meta.FileRecord, error) {
	if !rec.Manifest() {
		return rec, nil
	}
	chunks, err := s.opt.Store.ChunksOf(ctx, rec.ID)
	if err != nil {
		return rec, err
	}
	rec.Chunks = chunks
	if rec.Status != meta.FileDeleted && rec.Status != meta.FilePending {
		rec.Status, rec.StatusReason = chunkStatus(chunks)
	}
	return rec, nil
}
