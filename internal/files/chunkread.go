package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"slices"
	"strings"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// fetchedChunk is one chunk's bytes, read whole and (with verification on)
// checked against the chunk's checksum before any of them is sent.
type fetchedChunk struct {
	buf       *[]byte // from pool, or nil when data was allocated
	pool      *chunkBuffers
	data      []byte
	node      string
	failovers int
	err       error
}

func (s *Service) release(c *fetchedChunk) {
	if c.buf != nil {
		c.pool.put(c.buf)
		c.buf = nil
	}
	c.data = nil
}

// fetchChunk reads chunk c whole from the first holder that serves it
// intact: a holder that fails, lacks it or holds bytes that do not match
// the chunk's checksum (that copy is quarantined and rebuilt) costs a
// retry of this chunk alone, from the next holder.
func (s *Service) fetchChunk(ctx context.Context, c meta.FileRecord, pool *chunkBuffers) fetchedChunk {
	holders := s.holders(c)
	var failures []string
	for i, n := range holders {
		got, err := s.fetchFrom(ctx, c, n, pool)
		if err == nil {
			got.node, got.failovers = n, i
			return got
		}
		if ctx.Err() != nil {
			return fetchedChunk{err: errs.Wrap(errs.Unavailable, ctx.Err(), "read chunk %s", c.ID)}
		}
		failures = append(failures, n+": "+err.Error())
	}
	if len(holders) == 0 {
		return fetchedChunk{err: errs.E(errs.Unavailable, "chunk %d (%s) has no active copy", c.Chunk.Index, c.ID)}
	}
	return fetchedChunk{err: errs.E(errs.Unavailable, "no holder of chunk %s could serve it (%s)", c.ID, strings.Join(failures, "; "))}
}

func (s *Service) fetchFrom(ctx context.Context, c meta.FileRecord, n string, pool *chunkBuffers) (fetchedChunk, error) {
	base, ok := s.opt.Cluster.BaseURL(n)
	if !ok {
		return fetchedChunk{}, errs.E(errs.Unavailable, "node %s has no known address", n)
	}
	obj, err := s.opt.Nodes.Get(ctx, base, c.ID, nil)
	if err != nil {
		return fetchedChunk{}, err
	}
	defer obj.Body.Close()
	if s.opt.VerifyOnDownload && (obj.Info.Checksum != c.Checksum || obj.Info.Size != c.SizeBytes) {
		s.quarantine(ctx, c.ID, n, "stored checksum "+obj.Info.Checksum+" differs from the chunk's")
		return fetchedChunk{}, errs.E(errs.Corrupt, "copy on %s has checksum %s, want %s", n, obj.Info.Checksum, c.Checksum)
	}
	out := fetchedChunk{pool: pool}
	if c.SizeBytes <= pool.size {
		if out.buf, err = pool.get(ctx); err != nil {
			return fetchedChunk{}, err
		}
		out.data = (*out.buf)[:c.SizeBytes]
	} else {
		out.data = make([]byte, c.SizeBytes) // a chunk written under a larger CHUNK_SIZE
	}
	if _, err := io.ReadFull(obj.Body, out.data); err != nil {
		s.release(&out)
		return fetchedChunk{}, errs.Wrap(errs.Unavailable, err, "read chunk %s from %s", c.ID, n)
	}
	if s.opt.VerifyOnDownload {
		if sum := sha256.Sum256(out.data); hex.EncodeToString(sum[:]) != c.Checksum {
			s.release(&out)
			s.quarantine(ctx, c.ID, n, "bytes do not match the chunk's checksum")
			return fetchedChunk{}, errs.E(errs.Corrupt, "copy on %s does not match the chunk's checksum", n)
		}
	}
	return out, nil
}

// chunkStream yields the bytes [start, end) of a chunked file, chunk by
// chunk in order, fetching the next chunk while the current one is read
// (two chunk buffers per download).
type chunkStream struct {
	s      *Service
	cancel context.CancelFunc
	next   chan fetchedChunk // from the read-ahead goroutine, in order
	done   chan struct{}
	cur    fetchedChunk
	rest   []byte // what is left to send of cur
	err    error
}

// openChunks opens the read of rng (nil: all) of the file whose chunks are
// given, into buffers from pool. The first chunk concerned is fetched before it returns, so a file
// none of whose first chunk's holders can serve it fails before any byte.
func (s *Service) openChunks(ctx context.Context, chunks []meta.FileRecord, size int64, rng *byterange.Range, pool *chunkBuffers) (*chunkStream, fetchedChunk, error) {
	start, end := int64(0), size
	if rng != nil {
		start, end = rng.Start, rng.Start+rng.Length
	}
	// The chunks concerned and, for each, the part of it that is sent.
	type span struct {
		c        meta.FileRecord
		from, to int64
	}
	var spans []span
	for _, c := range chunks {
		lo, hi := c.Chunk.Offset, c.Chunk.Offset+c.SizeBytes
		if hi <= start || lo >= end {
			continue
		}
		spans = append(spans, span{c: c, from: max(start, lo) - lo, to: min(end, hi) - lo})
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cs := &chunkStream{s: s, cancel: cancel, next: make(chan fetchedChunk), done: make(chan struct{})}
	if len(spans) == 0 {
		close(cs.next)
		close(cs.done)
		return cs, fetchedChunk{}, nil
	}
	fetch := func(sp span) fetchedChunk {
		f := s.fetchChunk(ctx, sp.c, pool)
		if f.err == nil {
			f.data = f.data[sp.from:sp.to]
		}
		return f
	}
	first := fetch(spans[0])
	if first.err != nil {
		cancel()
		return nil, first, first.err
	}
	cs.cur, cs.rest = first, first.data
	go func() {
		defer close(cs.done)
		defer close(cs.next)
		for _, sp := range spans[1:] {
			f := fetch(sp)
			select {
			case cs.next <- f:
			case <-ctx.Done():
				s.release(&f)
				return
			}
			if f.err != nil {
				return
			}
		}
	}()
	return cs, first, nil
}

func (cs *chunkStream) Read(p []byte) (int, error) {
	if err := cs.fill(); err != nil {
		return 0, err
	}
	n := copy(p, cs.rest)
	cs.rest = cs.rest[n:]
	return n, nil
}

// WriteTo sends the rest of the stream to w straight from the chunk
// buffers, a chunk's part in one Write: read through io.Copy's buffer,
// every byte was copied once more on its way to the socket, a tenth of
// the coordinator's CPU on a large download.
func (cs *chunkStream) WriteTo(w io.Writer) (int64, error) {
	var sent int64
	for {
		if err := cs.fill(); err == io.EOF {
			return sent, nil
		} else if err != nil {
			return sent, err
		}
		n, err := w.Write(cs.rest)
		sent += int64(n)
		cs.rest = cs.rest[n:]
		if err != nil {
			return sent, err
		}
	}
}

// fill makes cs.rest the next bytes to send, taking the next chunk when
// the current one is sent; at the end it returns io.EOF.
func (cs *chunkStream) fill() error {
	for len(cs.rest) == 0 {
		if cs.err != nil {
			return cs.err
		}
		cs.s.release(&cs.cur)
		f, ok := <-cs.next
		if !ok {
			cs.err = io.EOF
			return io.EOF
		}
		if f.err != nil {
			// A chunk no holder could serve: the response breaks off
			// short of its length, so the client sees a failed transfer.
			cs.err = f.err
			return f.err
		}
		cs.cur, cs.rest = f, f.data
	}
	return nil
}

func (cs *chunkStream) Close() error {
	cs.cancel()
	for f := range cs.next {
		cs.s.release(&f)
	}
	<-cs.done
	cs.s.release(&cs.cur)
	return nil
}

// countedChunks is a chunked download's body: counted like any other, and
// sent by WriteTo from the chunk buffers themselves.
type countedChunks struct {
	countingBody
	cs *chunkStream
}

func (c *countedChunks) WriteTo(w io.Writer) (int64, error) {
	n, err := c.cs.WriteTo(w)
	c.n += n
	return n, err
}

// hashInto reads the chunks in order, verified, into h. Its buffers come
// from the upload budget (chunkBufs): its reader is a hash, which never
// waits for a buffer itself.
func (s *Service) hashInto(ctx context.Context, h hash.Hash, chunks []meta.FileRecord) error {
	chunks = slices.Clone(chunks)
	var size int64
	for i := range chunks {
		// Before completion each part's offsets start at 0; lay the chunks
		// end to end for the read.
		chunks[i].Chunk.Offset = size
		size += chunks[i].SizeBytes
	}
	cs, _, err := s.openChunks(ctx, chunks, size, nil, s.chunkBufs)
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = io.Copy(h, cs)
	return err
}
