package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"

	"github.com/dfs-project/dfs/internal/errs"
)

// Content is the bytes of one test file, named by a seed and a size rather
// than held: any number of acknowledged files can be byte-compared at the end
// of a long run without keeping them in memory, because the same seed always
// yields the same bytes.
type Content struct {
	Seed uint64 `json:"seed"`
	Size int64  `json:"size"`
}

// Reader returns a reader of exactly c.Size bytes of c's content.
func (c Content) Reader() io.Reader {
	return io.LimitReader(newStream(c.Seed), c.Size)
}

// Checksum returns the SHA-256 (lower-case hex) of c's bytes, the form the
// coordinator reports.
func (c Content) Checksum() string {
	h := sha256.New()
	_, _ = io.Copy(h, c.Reader()) // neither side can fail
	return hex.EncodeToString(h.Sum(nil))
}

// newStream returns an endless ChaCha8 byte stream for seed: a cryptographic
// generator, so that no two seeds share a run of bytes and a copy served for
// the wrong file can never compare equal by accident.
func newStream(seed uint64) *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "dfs load-test content")
	return rand.NewChaCha8(key)
}

// Comparer is an io.Writer that checks what is written against a Content,
// byte for byte, as it arrives.
type Comparer struct {
	want     io.Reader
	size     int64
	n        int64
	buf      []byte
	mismatch int64 // offset of the first differing byte; -1 while none
	tooLong  bool
}

// NewComparer returns a Comparer expecting c's bytes.
func NewComparer(c Content) *Comparer {
	return &Comparer{want: c.Reader(), size: c.Size, mismatch: -1}
}

// Write compares p with the next len(p) expected bytes. It never fails, so
// that a transfer runs to its end and its own outcome is seen too; Err
// reports the comparison.
func (m *Comparer) Write(p []byte) (int, error) {
	if m.mismatch >= 0 || m.tooLong {
		m.n += int64(len(p))
		return len(p), nil
	}
	if m.n+int64(len(p)) > m.size {
		m.tooLong = true
	}
	if cap(m.buf) < len(p) {
		m.buf = make([]byte, len(p))
	}
	want := m.buf[:len(p)]
	k, _ := io.ReadFull(m.want, want)
	if i := firstDiff(p[:k], want[:k]); i >= 0 {
		m.mismatch = m.n + int64(i)
	}
	m.n += int64(len(p))
	return len(p), nil
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// Err reports how the bytes written so far compare with the whole content:
// nil when they are exactly the content, an errs.Corrupt error naming the
// first difference otherwise (a short body is errs.Corrupt too).
func (m *Comparer) Err() error {
	switch {
	case m.mismatch >= 0:
		return errs.E(errs.Corrupt, "byte %d differs from what was uploaded", m.mismatch)
	case m.tooLong:
		return errs.E(errs.Corrupt, "got %d bytes, uploaded %d", m.n, m.size)
	case m.n != m.size:
		return errs.E(errs.Corrupt, "got %d of %d bytes", m.n, m.size)
	}
	return nil
}

// Bytes is how many bytes were written.
func (m *Comparer) Bytes() int64 { return m.n }
