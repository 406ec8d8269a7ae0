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

// fetchChunk reads chunk c whole, into a buffer of pool, from the first
// holder that serves it intact (fetchInto).
func (s *Service) fetchChunk(ctx context.Context, c meta.FileRecord, pool *chunkBuffers) fetchedChunk {
	f, err := chunkBuffer(ctx, c, pool)
	if err != nil {
		return fetchedChunk{err: err}
	}
	return s.fetchInto(ctx, c, f, 0, c.SizeBytes)
}

// chunkBuffer lends the buffer chunk c is read into: one of pool's, or a
// buffer of its own for a chunk written under a larger CHUNK_SIZE.
func chunkBuffer(ctx context.Context, c meta.FileRecord, pool *chunkBuffers) (fetchedChunk, error) {
	f := fetchedChunk{pool: pool}
	if c.SizeBytes > pool.size {
		f.data = make([]byte, c.SizeBytes)
		return f, nil
	}
	buf, err := pool.get(ctx)
	if err != nil {
		return fetchedChunk{}, err
	}
	f.buf, f.data = buf, (*buf)[:c.SizeBytes]
	return f, nil
}

// fetchInto reads the bytes [from, to) of chunk c into f's buffer, which
// holds the whole chunk, from the first holder that serves them intact: a
// holder that fails, lacks the chunk or holds bytes that do not match its
// sums or its checksum (that copy is quarantined and rebuilt) costs a retry
// of this chunk alone, from the next holder. On success f.data is those
// bytes; on failure the buffer goes back.
func (s *Service) fetchInto(ctx context.Context, c meta.FileRecord, f fetchedChunk, from, to int64) fetchedChunk {
	holders := s.holders(c)
	var failures []string
	for i, n := range holders {
		data, err := s.fetchFrom(ctx, c, n, f.data, from, to)
		if err == nil {
			f.node, f.failovers, f.data = n, i, data
			return f
		}
		if ctx.Err() != nil {
			s.release(&f)
			return fetchedChunk{err: errs.Wrap(errs.Unavailable, ctx.Err(), "read chunk %s", c.ID)}
		}
		failures = append(failures, n+": "+err.Error())
	}
	s.release(&f)
	if len(holders) == 0 {
		return fetchedChunk{err: errs.E(errs.Unavailable, "chunk %d (%s) has no active copy", c.Chunk.Index, c.ID)}
	}
	return fetchedChunk{err: errs.E(errs.Unavailable, "no holder of chunk %s could serve it (%s)", c.ID, strings.Join(failures, "; "))}
}

// fetchFrom reads the bytes [from, to) of chunk c from node n into buf,
// which is c's size, and checks them. A node that verifies by block sums is
// asked for those bytes alone; a copy without block sums is read whole and
// checked against the chunk's SHA-256, since nothing smaller can be checked.
func (s *Service) fetchFrom(ctx context.Context, c meta.FileRecord, n string, buf []byte, from, to int64) ([]byte, error) {
	base, ok := s.opt.Cluster.BaseURL(n)
	if !ok {
		return nil, errs.E(errs.Unavailable, "node %s has no known address", n)
	}
	var rng *byterange.Range
	if from != 0 || to != c.SizeBytes {
		rng = &byterange.Range{Start: from, Length: to - from}
	}
	obj, err := s.opt.Nodes.Get(ctx, base, c.ID, rng)
	if err != nil {
		if s.opt.VerifyOnDownload && errs.Is(err, errs.Corrupt) {
			s.quarantine(ctx, c.ID, n, "the node found a block that does not match its sum")
		}
		return nil, err
	}
	if s.opt.VerifyOnDownload && (obj.Info.Checksum != c.Checksum || obj.Info.Size != c.SizeBytes) {
		obj.Body.Close()
		s.quarantine(ctx, c.ID, n, "stored checksum "+obj.Info.Checksum+" differs from the chunk's")
		return nil, errs.E(errs.Corrupt, "copy on %s has checksum %s, want %s", n, obj.Info.Checksum, c.Checksum)
	}
	if rng != nil && s.opt.VerifyOnDownload && !obj.BlocksVerified {
		obj.Body.Close()
		if obj, err = s.opt.Nodes.Get(ctx, base, c.ID, nil); err != nil {
			return nil, err
		}
		rng = nil
	}
	defer obj.Body.Close()
	data := buf[from:to]
	if rng == nil {
		data = buf
	}
	if _, err := io.ReadFull(obj.Body, data); err != nil {
		if !obj.BlocksVerified {
			return nil, errs.Wrap(errs.Unavailable, err, "read chunk %s from %s", c.ID, n)
		}
		// A node that verifies by blocks ends its answer short before a
		// damaged block, and refuses the blob from then on.
		s.checkCopy(c.ID, n)
		return nil, errs.Wrap(errs.Unavailable, err, "read chunk %s from %s (the copy stopped short)", c.ID, n)
	}
	if s.opt.VerifyOnDownload && !obj.BlocksVerified {
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != c.Checksum {
			s.quarantine(ctx, c.ID, n, "bytes do not match the chunk's checksum")
			return nil, errs.E(errs.Corrupt, "copy on %s does not match the chunk's checksum", n)
		}
	}
	return buf[from:to], nil
}

// chunkStream yields the bytes [start, end) of a chunked file, chunk by
// chunk in order, while the chunks after the one being read are fetched,
// up to ahead of them at once, each by a goroutine of its own: a chunk's
// fetch is a read from its node and a SHA-256 of its bytes, which on its
// own runs slower than the response is written.
type chunkStream struct {
	s      *Service
	cancel context.CancelFunc
	// pending holds, in the file's order, the fetches started and not yet
	// taken: each delivers its one chunk on its channel.
	pending chan chan fetchedChunk
	done    chan struct{} // closed when the goroutine starting fetches has returned
	cur     fetchedChunk
	rest    []byte // what is left to send of cur
	err     error
}

// openChunks opens the read of rng (nil: all) of the file whose chunks are
// given, into buffers from pool, fetching up to ahead chunks (at least 1)
// beyond the one being read. The first chunk concerned is fetched before
// it returns, so a file none of whose first chunk's holders can serve it
// fails before any byte.
//
// Buffers are taken in the file's order, before each fetch starts, so that
// on a budgeted pool the chunk a reader waits for never waits for a buffer
// that a later chunk of the same stream holds.
func (s *Service) openChunks(ctx context.Context, chunks []meta.FileRecord, size int64, rng *byterange.Range, pool *chunkBuffers, ahead int) (*chunkStream, fetchedChunk, error) {
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
	// A fetch waiting in pending, plus the one its starter holds until
	// there is room, make ahead fetches beyond the chunk being read.
	cs := &chunkStream{s: s, cancel: cancel, pending: make(chan chan fetchedChunk, max(ahead, 1)-1), done: make(chan struct{})}
	go func() {
		defer close(cs.done)
		defer close(cs.pending)
		for _, sp := range spans {
			out := make(chan fetchedChunk, 1)
			f, err := chunkBuffer(ctx, sp.c, pool)
			if err != nil {
				out <- fetchedChunk{err: err}
			} else {
				go func() {
					out <- s.fetchInto(ctx, sp.c, f, sp.from, sp.to)
				}()
			}
			select {
			case cs.pending <- out:
			case <-ctx.Done():
				f := <-out
				s.release(&f)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	if err := cs.fill(); err == io.EOF {
		return cs, fetchedChunk{}, nil
	} else if err != nil {
		cs.Close()
		return nil, fetchedChunk{err: err}, err
	}
	return cs, cs.cur, nil
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
		out, ok := <-cs.pending
		if !ok {
			cs.err = io.EOF
			return io.EOF
		}
		f := <-out
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

// Close ends the fetches still running and gives back every buffer.
func (cs *chunkStream) Close() error {
	cs.cancel()
	for out := range cs.pending {
		f := <-out
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
	cs, _, err := s.openChunks(ctx, chunks, size, nil, s.chunkBufs, 1)
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = io.Copy(h, cs)
	return err
}
