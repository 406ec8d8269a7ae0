package files

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/errs"
)

// spooled is an upload's bytes with their size and SHA-256, held either in a
// pooled memory buffer (a small body) or in a temporary file.
type spooled struct {
	size int64
	sum  string

	mem     []byte   // the body, when held in memory
	release func()   // returns mem's buffer and budget
	f       *os.File // the body, when spooled to disk
}

// reader returns a fresh reader over the whole body; several may be read at
// once (one per copy being written).
func (sp *spooled) reader() io.Reader {
	if sp.f == nil {
		return bytes.NewReader(sp.mem)
	}
	return io.NewSectionReader(sp.f, 0, sp.size)
}

func (sp *spooled) remove() {
	if sp.release != nil {
		sp.release()
		sp.release = nil
	}
	sp.mem = nil
	if sp.f != nil {
		_ = sp.f.Close()
		_ = os.Remove(sp.f.Name())
		sp.f = nil
	}
}

// memorySpool lends buffers for bodies of up to max bytes while no more than
// limit bytes are lent in all. Holding a small body in memory saves the spool
// file's create, write, read-back and unlink, which on a busy coordinator
// cost more than the upload's own work.
type memorySpool struct {
	max, limit int64
	used       atomic.Int64
	pool       sync.Pool
}

func newMemorySpool(max, limit int64) *memorySpool {
	m := &memorySpool{max: max, limit: limit}
	m.pool.New = func() any { b := make([]byte, max+1); return &b }
	return m
}

// take lends a buffer of max+1 bytes, or reports false when the budget is
// spent (or memory spooling is off) and the body must go to disk.
func (m *memorySpool) take() (*[]byte, bool) {
	if m == nil || m.max <= 0 {
		return nil, false
	}
	for {
		cur := m.used.Load()
		if cur+m.max > m.limit {
			return nil, false
		}
		if m.used.CompareAndSwap(cur, cur+m.max) {
			return m.pool.Get().(*[]byte), true
		}
	}
}

func (m *memorySpool) give(b *[]byte) {
	m.pool.Put(b)
	m.used.Add(-m.max)
}

// spoolAtMost reads the body once while hashing it, up to max bytes, never
// holding more than the memory spool's per-upload maximum in memory: a body
// that fits (and finds room in the budget) stays in memory, a larger one
// continues into a temporary file. A body longer than max is spooled up to
// max+1 bytes and over reports it (the checksum is then of those bytes
// only): the caller refuses it, or goes on with the rest of the body after
// sp's bytes.
func (s *Service) spoolAtMost(body io.Reader, max int64) (sp *spooled, over bool, err error) {
	body = io.LimitReader(body, max+1)
	h := sha256.New()
	var head []byte // bytes already read into memory, if any
	if buf, ok := s.mem.take(); ok {
		n, err := fill(body, *buf)
		switch {
		case err == io.EOF:
			h.Write((*buf)[:n])
			return &spooled{
				size: int64(n), sum: hex.EncodeToString(h.Sum(nil)),
				mem: (*buf)[:n], release: func() { s.mem.give(buf) },
			}, int64(n) > max, nil
		case err != nil:
			s.mem.give(buf)
			return nil, false, bodyError(err)
		}
		// Larger than the memory spool takes: what was read goes to the file
		// first. The buffer goes back once it has been written.
		head = (*buf)[:n]
		defer s.mem.give(buf)
	}
	f, err := os.CreateTemp(s.opt.SpoolDir, "upload-*")
	if err != nil {
		return nil, false, errs.Wrap(errs.Other, err, "create upload spool file")
	}
	sp = &spooled{f: f}
	w := io.MultiWriter(f, h)
	if _, err := w.Write(head); err != nil {
		sp.remove()
		return nil, false, errs.Wrap(errs.Other, err, "write upload spool file")
	}
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	n, err := io.CopyBuffer(w, body, *buf)
	sp.size = int64(len(head)) + n
	if err != nil {
		sp.remove()
		return nil, false, bodyError(err)
	}
	sp.sum = hex.EncodeToString(h.Sum(nil))
	return sp, sp.size > max, nil
}

// fill reads into buf until it is full (nil error) or the body ends (io.EOF,
// with n the bytes read). Unlike io.ReadFull it passes on every other error
// unchanged: a body that breaks off with io.ErrUnexpectedEOF (a truncated
// multipart part) must be refused, not taken for a short file.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// bodyError keeps the kind of an error the body reader gave (a body over the
// request limit is TooLarge) and calls anything else a bad request body.
func bodyError(err error) error {
	if errs.KindOf(err) != errs.Other {
		return err
	}
	return errs.Wrap(errs.Invalid, err, "read upload body")
}

func tooLarge(max int64) error {
	return errs.E(errs.TooLarge, "file exceeds the maximum size of %d bytes", max)
}
