package storagenode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// A read sends only bytes the node has checked: a blob of at most
// blob.WholeCheckMax bytes is read whole and checked against its SHA-256
// before its first byte is sent; a larger one is checked block by block
// against its block sums, each block before any of its bytes is sent, or,
// without block sums but no larger than STORAGE_INLINE_MAX (a record in a
// volume when that limit is raised), read and checked whole too. A
// damaged block found before the answer's status is sent is answered 422
// BLOB_CORRUPT; one found later ends the answer before it (the reader sees
// a short body and goes on elsewhere). Either way the node refuses the blob
// from then on, to every reader, until it is written again. A larger blob
// without block sums (written before they existed) is sent unchecked and
// without wire.HeaderBlocksVerified, for its reader to hash.

// corruptSet holds the blobs this node found damaged while reading them.
type corruptSet struct{ m sync.Map }

func (c *corruptSet) add(id string)      { c.m.Store(id, struct{}{}) }
func (c *corruptSet) clear(id string)    { c.m.Delete(id) }
func (c *corruptSet) has(id string) bool { _, ok := c.m.Load(id); return ok }

// errBlobCorrupt is the answer for a blob the node found damaged.
func errBlobCorrupt(id string) error {
	return errs.WithCode(errs.Corrupt, errs.CodeBlobCorrupt, nil,
		"blob "+id+" is damaged on this node (a block does not match its checksum); read another copy")
}

// smallPool lends the buffers small blobs are checked in.
var smallPool = sync.Pool{New: func() any { b := make([]byte, blob.WholeCheckMax); return &b }}

// blockPool lends the buffers blocks are checked in.
var blockPool = sync.Pool{New: func() any { b := make([]byte, blob.BlockSize); return &b }}

// verifiedRead is a read the node checks before it sends.
type verifiedRead struct {
	s      *Server
	r      *http.Request
	id     string
	rc     io.ReadSeekCloser
	info   blob.Info
	rng    byterange.Range
	framed bool // the reader takes CRC-32C frames
	// whole is the blob read and checked in memory (a small blob);
	// sums are a large blob's block sums otherwise.
	whole []byte
	sums  blob.BlockSums
	done  func()
}

// prepareVerified decides how a read of rng is checked and, for a small
// blob, reads and checks it. ok is false for a blob that cannot be checked
// (a large one without block sums), which is then sent as stored.
func (s *Server) prepareVerified(ctx context.Context, r *http.Request, id string, rc io.ReadSeekCloser, info blob.Info, rng byterange.Range) (*verifiedRead, bool, error) {
	v := &verifiedRead{s: s, r: r, id: id, rc: rc, info: info, rng: rng, done: func() {}, framed: acceptsFrames(r)}
	if info.Size <= blob.WholeCheckMax {
		return v.checkWhole(ctx)
	}
	if bs, ok := s.store.(blob.BlockSummer); ok {
		sums, ok, err := bs.BlockSums(ctx, id)
		if err != nil {
			return nil, false, err
		}
		if ok && sums.Checksum == info.Checksum && sums.Size == info.Size {
			v.sums = sums
			return v, true, nil
		}
	}
	if info.Size <= s.cfg.InlineMax {
		// A record in a volume (STORAGE_INLINE_MAX above WholeCheckMax)
		// carries no block sums, and a legacy file this small is no
		// dearer to read whole than a record.
		return v.checkWhole(ctx)
	}
	return nil, false, nil
}

// checkWhole reads the whole blob into memory and checks it against its
// SHA-256 before anything of it is sent.
func (v *verifiedRead) checkWhole(ctx context.Context) (*verifiedRead, bool, error) {
	var data []byte
	switch {
	case v.info.Size <= bufpool.Size:
		// Most small blobs: the transfers' own buffers, not a 1 MiB one.
		bp := bufpool.Get()
		v.done = func() { bufpool.Put(bp) }
		data = (*bp)[:v.info.Size]
	case v.info.Size <= blob.WholeCheckMax:
		bp := smallPool.Get().(*[]byte)
		v.done = func() { smallPool.Put(bp) }
		data = (*bp)[:v.info.Size]
	default:
		// Only past the default inline limit: at most STORAGE_INLINE_MAX,
		// as much as a write of such a record holds anyway.
		data = make([]byte, v.info.Size)
	}
	if _, err := io.ReadFull(v.rc, data); err != nil {
		v.done()
		return nil, false, errs.Wrap(errs.Other, err, "read blob %s", v.id)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != v.info.Checksum {
		v.done()
		v.s.foundDamage(ctx, v.id, 0, "the blob does not match its SHA-256")
		return nil, false, errBlobCorrupt(v.id)
	}
	v.whole = data
	return v, true, nil
}

// acceptsFrames says whether the reader takes the framed form.
func acceptsFrames(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if mt == wire.ContentTypeFrames {
			return true
		}
	}
	return false
}

// foundDamage takes blob id out of service on this node and says so.
func (s *Server) foundDamage(ctx context.Context, id string, off int64, why string) {
	s.corrupt.add(id)
	s.metrics.blockFailures.Inc()
	s.log.LogAttrs(ctx, slog.LevelWarn, "blob damaged; refusing it until it is written again",
		slog.String("id", id), slog.Int64("block", off/blob.BlockSize), slog.Int64("offset", off),
		slog.String("why", why), slog.String("request_id", requestIDFrom(ctx)))
}

// send writes the answer: the status (after the first block is checked)
// and the bytes of the range, checked. It returns the bytes of the range
// sent; an error after the status is sent means the answer was cut short.
func (v *verifiedRead) send(w http.ResponseWriter, status int) (int64, bool, error) {
	defer v.done()
	started := false
	// The head goes once the first block is checked, so that damage there
	// can still be answered as an error.
	writeHead := func() {
		h := w.Header()
		h.Set(wire.HeaderBlocksVerified, wire.BlocksVerifiedCRC32C)
		length := v.rng.Length
		if v.framed {
			h.Set("Content-Type", wire.ContentTypeFrames)
			length = wire.FramedLength(v.rng.Start, v.rng.Length, blob.BlockSize)
		}
		h.Set("Content-Length", strconv.FormatInt(length, 10))
		w.WriteHeader(status)
		started = true
	}
	if v.rng.Length == 0 {
		writeHead()
		return 0, true, nil
	}
	var sent int64
	start, end := v.rng.Start, v.rng.Start+v.rng.Length
	bp := blockPool.Get().(*[]byte)
	defer blockPool.Put(bp)
	var hdr [wire.FrameHeaderLen]byte
	for blk := start / blob.BlockSize; blk*blob.BlockSize < end; blk++ {
		off := blk * blob.BlockSize
		n := min(blob.BlockSize, v.info.Size-off)
		var block []byte
		if v.whole != nil {
			block = v.whole[off : off+n]
		} else {
			block = (*bp)[:n]
			if err := v.readBlock(block, off); err != nil {
				if !started {
					return 0, false, err
				}
				return sent, true, err
			}
			if !v.sums.CheckBlock(blk, block) {
				v.s.foundDamage(v.r.Context(), v.id, off, "a block does not match its CRC-32C")
				if !started {
					return 0, false, errBlobCorrupt(v.id)
				}
				return sent, true, errors.New("a block does not match its CRC-32C")
			}
		}
		part := block[max(start, off)-off : min(end, off+n)-off]
		if !started {
			writeHead()
		}
		if off+n >= end {
			// The last piece ends the answer's writes: on a gathering
			// connection a one-block answer leaves with its head in one
			// write (httpx.WriteWhole).
			m, err := v.writeLast(w, part)
			return sent + int64(m), true, err
		}
		if v.framed {
			hdr = wire.FrameHeader(len(part), crc32.Checksum(part, castagnoli))
			if _, err := w.Write(hdr[:]); err != nil {
				return sent, true, err
			}
		}
		m, err := w.Write(part)
		sent += int64(m)
		if err != nil {
			return sent, true, err
		}
	}
	return sent, true, nil
}

// writeLast writes the answer's last piece, framed if asked, and returns
// the bytes of the blob written.
func (v *verifiedRead) writeLast(w http.ResponseWriter, part []byte) (int, error) {
	if !v.framed {
		return httpx.WriteWhole(w, v.r, part)
	}
	bp := bufpool.Get()
	defer bufpool.Put(bp)
	frame := wire.AppendFrame((*bp)[:0], part)
	m, err := httpx.WriteWhole(w, v.r, frame)
	return max(0, m-wire.FrameHeaderLen), err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readBlock reads the block at off of the blob.
func (v *verifiedRead) readBlock(b []byte, off int64) error {
	if ra, ok := v.rc.(io.ReaderAt); ok {
		_, err := ra.ReadAt(b, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return errs.Wrap(errs.Other, err, "read blob %s at %d", v.id, off)
	}
	if _, err := v.rc.Seek(off, io.SeekStart); err != nil {
		return errs.Wrap(errs.Other, err, "seek in blob %s", v.id)
	}
	_, err := io.ReadFull(v.rc, b)
	return errs.Wrap(errs.Other, err, "read blob %s at %d", v.id, off)
}
