package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ContentTypeFrames is the media type of a blob's bytes sent in frames, each
// carrying the CRC32C of its own bytes, so that the reader checks what
// crossed the network, block by block, as cheaply as the node checked what
// it read from disk. A reader asks for it with an Accept header; a node that
// cannot frame an answer (a blob without block sums) sends plain bytes with
// ContentTypeBlob.
//
// A frame is
//
//	0 4 n, the length of its data, little-endian (1 to MaxFrameData)
//	4 4 CRC-32C (Castagnoli) of the data
//	8 n the data
//
// and the frames' data, end to end, are the bytes of the answer (the blob or
// the range asked). A node cuts each frame at the blob's block boundaries,
// so that a frame's CRC is the block sum it verified, or for a partial block
// at either end of a range, the sum of the part sent.
const ContentTypeFrames = "application/vnd.dfs.crc32c-frames"

// FrameHeaderLen is the length of a frame's header.
const FrameHeaderLen = 8

// MaxFrameData bounds a frame's data: a reader never holds more than this of
// bytes it has not checked.
const MaxFrameData = 1 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends one frame of data to dst.
func AppendFrame(dst, data []byte) []byte {
	var h [FrameHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(data)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(data, crcTable))
	return append(append(dst, h[:]...), data...)
}

// FrameHeader is the header of a frame of data whose CRC-32C is sum.
func FrameHeader(n int, sum uint32) [FrameHeaderLen]byte {
	var h [FrameHeaderLen]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(n))
	binary.LittleEndian.PutUint32(h[4:8], sum)
	return h
}

// FramedLength is the length of the framed answer for the bytes [start,
// start+length) of a blob cut at multiples of block.
func FramedLength(start, length, block int64) int64 {
	if length == 0 {
		return 0
	}
	frames := (start+length+block-1)/block - start/block
	return length + frames*FrameHeaderLen
}

// ErrFrameMismatch is the error of a frame whose bytes do not match its CRC.
var ErrFrameMismatch = errors.New("a frame's bytes do not match its CRC-32C")

// FrameReader yields the data of a framed answer, each frame's only after
// its CRC has been checked. A frame that does not match is ErrFrameMismatch;
// an answer that breaks off inside a frame is io.ErrUnexpectedEOF.
type FrameReader struct {
	r    io.Reader
	buf  []byte
	rest []byte // the checked data of the current frame not yet read
	err  error
}

// NewFrameReader reads the frames of r.
func NewFrameReader(r io.Reader) *FrameReader { return &FrameReader{r: r} }

func (f *FrameReader) Read(p []byte) (int, error) {
	for len(f.rest) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.err = f.next()
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

// next reads and checks the next frame into rest.
func (f *FrameReader) next() error {
	var h [FrameHeaderLen]byte
	if _, err := io.ReadFull(f.r, h[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return io.ErrUnexpectedEOF
	}
	n := binary.LittleEndian.Uint32(h[0:4])
	if n == 0 || n > MaxFrameData {
		return fmt.Errorf("a frame of %d bytes: %w", n, ErrFrameMismatch)
	}
	if cap(f.buf) < int(n) {
		f.buf = make([]byte, n)
	}
	data := f.buf[:n]
	if _, err := io.ReadFull(f.r, data); err != nil {
		return io.ErrUnexpectedEOF
	}
	if crc32.Checksum(data, crcTable) != binary.LittleEndian.Uint32(h[4:8]) {
		return ErrFrameMismatch
	}
	f.rest = data
	return nil
}
