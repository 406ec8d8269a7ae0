package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strings"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// copyRead reads the bytes [off, end) of one blob from its holders in
// preference order. A holder that fails before its first byte costs a try
// of the next one; a holder whose answer stops short (a node stops before a
// block that does not match its sum, or the connection breaks) is left at
// the offset reached and the next holder is asked for the rest from there,
// so the reader sees one unbroken stream while a copy can serve it.
//
// What is checked, with verification on, depends on each answer:
//   - bytes a node verified against the blob's block sums
//     (nodeclient.Object.BlocksVerified) pass as they are;
//   - a copy without block sums (written before they existed) that fits in
//     a read buffer is read whole and checked against the blob's SHA-256
//     before any of its bytes is passed on;
//   - a larger one read from its first byte is hashed as it passes, and the
//     hash checked at the end: a mismatch then holds back the last bytes
//     and fails the read.
//
// Only a range of a copy without block sums larger than a read buffer is
// passed on unchecked (its recorded checksum is compared, as for every
// answer). Scrubbing gives such copies their block sums.
type copyRead struct {
	s       *Service
	ctx     context.Context
	rec     meta.FileRecord
	holders []string
	next    int   // index in holders of the next holder to try
	off     int64 // the next byte of the blob to yield
	end     int64
	whole   bool // the read is of the whole blob
	body    io.ReadCloser
	node    string
	// hash is the SHA-256 of the blob's bytes yielded so far, when they are
	// checked at the end (a large copy without block sums, read from 0).
	hash     hash.Hash
	sources  []string // every holder that yielded bytes, in order
	failures []string
}

// newCopyRead prepares the read of rng (nil: all) of the blob rec from
// holders; nothing is asked before the first call of open or Read.
func (s *Service) newCopyRead(ctx context.Context, rec meta.FileRecord, holders []string, rng *byterange.Range) *copyRead {
	c := &copyRead{s: s, ctx: ctx, rec: rec, holders: holders, end: rec.SizeBytes, whole: rng == nil}
	if rng != nil {
		c.off, c.end = rng.Start, rng.Start+rng.Length
	}
	return c
}

// open opens the first holder that serves the blob, so that a blob none of
// whose holders can serve it fails before any byte. It returns the index of
// that holder in the preference order.
func (c *copyRead) open() (int, error) {
	if err := c.advance(); err != nil {
		return 0, err
	}
	return c.next - 1, nil
}

// inMemory returns the rest of the read when the holder opened has it in
// memory, checked already: then nothing can fail over any more.
func (c *copyRead) inMemory() (*memBody, bool) {
	m, ok := c.body.(*memBody)
	return m, ok
}

func (c *copyRead) Read(p []byte) (int, error) {
	for {
		if c.off == c.end {
			return 0, io.EOF
		}
		if c.body == nil {
			if err := c.advance(); err != nil {
				return 0, err
			}
		}
		if rem := c.end - c.off; int64(len(p)) > rem {
			p = p[:rem]
		}
		n, err := c.body.Read(p)
		if c.hash != nil {
			c.hash.Write(p[:n])
		}
		c.off += int64(n)
		if c.off == c.end {
			if c.hash != nil && hex.EncodeToString(c.hash.Sum(nil)) != c.rec.Checksum {
				return 0, c.mismatch()
			}
			return n, nil
		}
		switch {
		case err == nil:
			return n, nil
		case c.ctx.Err() != nil:
			return n, err
		}
		c.stoppedShort(err)
		if n > 0 {
			return n, nil
		}
	}
}

// mismatch fails a read whose bytes, hashed as they passed, do not match the
// blob's checksum. Nothing can be taken back, so the read fails; the copy of
// the last holder is reported corrupt (the hash cannot say which of several
// holders sent the bad bytes: the scrub finds any other).
func (c *copyRead) mismatch() error {
	c.s.reportCorrupt(c.rec.ID, c.node, "bytes do not match the file's checksum (found while streaming)")
	return errs.E(errs.Corrupt, "copy on %s does not match the file's checksum", strings.Join(c.sources, ", "))
}

// stoppedShort leaves a holder whose answer ended before the bytes asked
// and has it checked: a node ends an answer short when the next block does
// not match its sum, and then refuses the blob until it is rewritten, which
// a HEAD shows and the quarantine follows.
func (c *copyRead) stoppedShort(err error) {
	n := c.node
	c.closeBody()
	c.failures = append(c.failures, n+": "+err.Error())
	c.s.log.Warn("copy stopped short during a download; going on from the next holder",
		"file", c.rec.ID, "node", n, "offset", c.off, "err", err)
	c.s.opt.Events.ReadResumed(n)
	c.s.checkCopy(c.rec.ID, n)
}

// advance opens the next holder that serves the rest of the read.
func (c *copyRead) advance() error {
	for c.next < len(c.holders) {
		n := c.holders[c.next]
		c.next++
		body, err := c.openOn(n)
		if err != nil {
			if c.ctx.Err() != nil {
				return errs.Wrap(errs.Unavailable, c.ctx.Err(), "read file %s", c.rec.ID)
			}
			c.failures = append(c.failures, n+": "+err.Error())
			continue
		}
		c.body, c.node = body, n
		c.sources = append(c.sources, n)
		return nil
	}
	if len(c.holders) == 0 {
		return errs.E(errs.Unavailable, "file %s has no active copy", c.rec.ID)
	}
	return errs.E(errs.Unavailable, "no holder of file %s could serve it (%s)", c.rec.ID, strings.Join(c.failures, "; "))
}

// openOn opens the rest of the read on node n, checking what can be
// checked before the first byte is passed on.
func (c *copyRead) openOn(n string) (io.ReadCloser, error) {
	s, rec := c.s, c.rec
	base, ok := s.opt.Cluster.BaseURL(n)
	if !ok {
		return nil, errs.E(errs.Unavailable, "node %s has no known address", n)
	}
	var rng *byterange.Range
	if c.off != 0 || c.end != rec.SizeBytes {
		rng = &byterange.Range{Start: c.off, Length: c.end - c.off}
	}
	obj, err := s.opt.Nodes.Get(c.ctx, base, rec.ID, rng)
	if err != nil {
		if s.opt.VerifyOnDownload && errs.Is(err, errs.Corrupt) {
			s.quarantine(c.ctx, rec.ID, n, "the node found a block that does not match its sum")
		}
		return nil, err
	}
	if !s.opt.VerifyOnDownload {
		return obj.Body, nil
	}
	if obj.Info.Checksum != rec.Checksum || obj.Info.Size != rec.SizeBytes {
		obj.Body.Close()
		s.quarantine(c.ctx, rec.ID, n, "stored checksum "+obj.Info.Checksum+" differs from the file's")
		return nil, errs.E(errs.Corrupt, "copy on %s has checksum %s, want %s", n, obj.Info.Checksum, rec.Checksum)
	}
	switch {
	case c.whole && c.off == 0 && rec.SizeBytes <= s.opt.DownloadBuffer:
		// Small: read it all before the first byte is sent, whatever
		// checked it, so that a short answer costs a retry, not a
		// broken response, and the content cache can keep it.
		return c.readWhole(n, obj.Body, obj.BlocksVerified)
	case obj.BlocksVerified, c.hash != nil:
		return obj.Body, nil
	case rec.SizeBytes <= s.readBufs.size && rng == nil:
		return c.readWhole(n, obj.Body, false)
	case rec.SizeBytes <= s.readBufs.size:
		obj.Body.Close()
		return c.readWholeAgain(n, base)
	case c.whole && c.off == 0:
		c.hash = sha256.New()
		return obj.Body, nil
	}
	s.log.Debug("range of a copy without block sums sent unchecked", "file", rec.ID, "node", n)
	return obj.Body, nil
}

// readWholeAgain reads the whole blob from node n (at base), checked against
// its SHA-256, and yields the part of it still to be read.
func (c *copyRead) readWholeAgain(n, base string) (io.ReadCloser, error) {
	obj, err := c.s.opt.Nodes.Get(c.ctx, base, c.rec.ID, nil)
	if err != nil {
		return nil, err
	}
	return c.readWhole(n, obj.Body, obj.BlocksVerified)
}

// readWhole reads body, the whole blob from node n, into memory, checks it
// against the blob's SHA-256 unless the node verified it by blocks, and
// yields the part of it still to be read.
func (c *copyRead) readWhole(n string, body io.ReadCloser, verified bool) (io.ReadCloser, error) {
	s, rec := c.s, c.rec
	defer body.Close()
	var (
		data []byte
		buf  *[]byte
	)
	if rec.SizeBytes <= s.opt.DownloadBuffer || rec.SizeBytes > s.readBufs.size {
		// Read a byte more than the blob, to notice a longer copy.
		data = make([]byte, rec.SizeBytes+1)
	} else {
		b, err := s.readBufs.get(c.ctx)
		if err != nil {
			return nil, err
		}
		buf, data = b, (*b)[:rec.SizeBytes]
	}
	release := func() {
		if buf != nil {
			s.readBufs.put(buf)
		}
	}
	got, err := fill(body, data)
	switch {
	case err == nil && buf == nil:
		got = len(data) // the copy is longer than the blob: caught below
	case err == nil, err == io.EOF:
	default:
		release()
		return nil, errs.Wrap(errs.Unavailable, err, "read copy on %s", n)
	}
	data = data[:got]
	if int64(len(data)) != rec.SizeBytes {
		release()
		return nil, errs.E(errs.Unavailable, "copy on %s sent %d bytes of %d", n, len(data), rec.SizeBytes)
	}
	if !verified {
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != rec.Checksum {
			release()
			s.quarantine(c.ctx, rec.ID, n, "bytes do not match the file's checksum")
			return nil, errs.E(errs.Corrupt, "copy on %s does not match the file's checksum", n)
		}
	}
	if c.whole && s.cacheable(rec.File) {
		s.opt.ContentCache.Put(rec.ID, rec.Checksum, data)
	}
	return &memBody{data: data[c.off:c.end], release: release}, nil
}

func (c *copyRead) closeBody() {
	if c.body != nil {
		c.body.Close()
		c.body = nil
	}
}

func (c *copyRead) Close() error {
	c.closeBody()
	return nil
}

// checkCopy asks node n, in the background, whether its copy of blob id is
// intact, and quarantines it when the node says it is not.
func (s *Service) checkCopy(id, n string) {
	s.repairs.Go(func(ctx context.Context) {
		base, ok := s.opt.Cluster.BaseURL(n)
		if !ok {
			return
		}
		if _, err := s.opt.Nodes.Head(ctx, base, id); errs.Is(err, errs.Corrupt) {
			s.quarantine(ctx, id, n, "the node found a block that does not match its sum")
		}
	})
}
