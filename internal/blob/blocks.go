// Block sums: the CRC-32C of every BlockSize block of a blob, kept beside a
// blob stored as a file so that a read of any part of it can be checked
// where it is read, at the cost of the blocks it touches.

package blob

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dfs-project/dfs/internal/errs"
)

// BlockSize is the unit of block sums.
const BlockSize = 64 << 10

// WholeCheckMax is the largest blob a reader checks against its SHA-256,
// read whole, rather than by block sums: a small blob costs one read and one
// hash either way, so only blobs larger than this carry block sums.
const WholeCheckMax = 1 << 20

// BlockSums are the block sums of one blob: Sums[i] is the CRC-32C
// (Castagnoli) of bytes [i×BlockSize, (i+1)×BlockSize) of the blob whose
// SHA-256 is Checksum and whose length is Size.
type BlockSums struct {
	Checksum string
	Size     int64
	Sums     []uint32
}

// BlockSummer is a store that keeps block sums for its larger blobs.
type BlockSummer interface {
	// BlockSums returns the block sums of blob id, or ok false when it has
	// none (a blob of at most WholeCheckMax bytes, one written before block
	// sums existed, or one whose sums file was lost or torn).
	BlockSums(ctx context.Context, id string) (sums BlockSums, ok bool, err error)
}

// CheckBlock reports whether data, block i of the blob (the last one may be
// short), matches its sum.
func (b BlockSums) CheckBlock(i int64, data []byte) bool {
	return i >= 0 && i < int64(len(b.Sums)) && crc32.Checksum(data, castagnoli) == b.Sums[i]
}

// A sums file (<id>.blk beside the blob) holds:
//
//	0  8  magic "DFSBLKS1"
//	8  4  block size, little-endian like every number here
//	12 8  the blob's length
//	20 32 the blob's SHA-256
//	52 4  the number of blocks, n
//	56 4n the blocks' CRC-32C, in order
//	   4  CRC-32C of everything before it
//
// It is written after the blob is published and is not synced: a file lost
// or torn in a crash fails its own CRC or names another blob, and the blob
// is then read as one without block sums (checked by the reader's SHA-256)
// until a scrub writes them again. Never is a good blob taken for a bad one.
var blockSumsMagic = [8]byte{'D', 'F', 'S', 'B', 'L', 'K', 'S', '1'}

const blockSumsFixedLen = 56

func (b BlockSums) encode() []byte {
	out := make([]byte, 0, blockSumsFixedLen+4*len(b.Sums)+4)
	out = append(out, blockSumsMagic[:]...)
	out = binary.LittleEndian.AppendUint32(out, BlockSize)
	out = binary.LittleEndian.AppendUint64(out, uint64(b.Size))
	out = append(out, mustHex(b.Checksum)...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(b.Sums)))
	for _, s := range b.Sums {
		out = binary.LittleEndian.AppendUint32(out, s)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

var errBadBlockSums = errors.New("sums file is torn or of another format")

func decodeBlockSums(raw []byte) (BlockSums, error) {
	if len(raw) < blockSumsFixedLen+4 || [8]byte(raw[:8]) != blockSumsMagic {
		return BlockSums{}, errBadBlockSums
	}
	body, tail := raw[:len(raw)-4], raw[len(raw)-4:]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(tail) ||
		binary.LittleEndian.Uint32(raw[8:12]) != BlockSize {
		return BlockSums{}, errBadBlockSums
	}
	size := int64(binary.LittleEndian.Uint64(raw[12:20]))
	n := int64(binary.LittleEndian.Uint32(raw[52:56]))
	if size < 0 || n != (size+BlockSize-1)/BlockSize || int64(len(body)) != blockSumsFixedLen+4*n {
		return BlockSums{}, errBadBlockSums
	}
	b := BlockSums{Checksum: hex.EncodeToString(raw[20:52]), Size: size, Sums: make([]uint32, n)}
	for i := range b.Sums {
		b.Sums[i] = binary.LittleEndian.Uint32(raw[blockSumsFixedLen+4*i:])
	}
	return b, nil
}

// blockSummer computes the block sums of what is written to it.
type blockSummer struct {
	sums []uint32
	cur  uint32 // the running CRC of the block being filled
	fill int    // bytes of it so far
}

func (s *blockSummer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), BlockSize-s.fill)
		s.cur = crc32.Update(s.cur, castagnoli, p[:k])
		s.fill += k
		p = p[k:]
		if s.fill == BlockSize {
			s.sums, s.cur, s.fill = append(s.sums, s.cur), 0, 0
		}
	}
	return n, nil
}

// finish returns the sums, the short last block's included.
func (s *blockSummer) finish() []uint32 {
	if s.fill > 0 {
		s.sums, s.cur, s.fill = append(s.sums, s.cur), 0, 0
	}
	return s.sums
}

// writeBlockSums publishes the sums file of blob id in dir, unsynced (see
// the format above), through a temp file that a crash leaves for Open to
// remove.
func writeBlockSums(dir, id string, b BlockSums) error {
	f, err := os.CreateTemp(dir, tempPattern(id))
	if err != nil {
		return fsError(err, "blob %s: create sums temp file", id)
	}
	_, werr := f.Write(b.encode())
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name())
		return fsError(err, "blob %s: write sums", id)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, id+blockSumsExt)); err != nil {
		_ = os.Remove(f.Name())
		return fsError(err, "blob %s: publish sums", id)
	}
	return nil
}

// BlockSums implements BlockSummer.
func (d *Disk) BlockSums(_ context.Context, id string) (BlockSums, bool, error) {
	if err := ValidateID(id); err != nil {
		return BlockSums{}, false, err
	}
	raw, err := os.ReadFile(blockSumsPath(d.root, id))
	if errors.Is(err, fs.ErrNotExist) {
		return BlockSums{}, false, nil
	}
	if err != nil {
		return BlockSums{}, false, fsError(err, "blob %s: read sums", id)
	}
	b, err := decodeBlockSums(raw)
	if err != nil {
		return BlockSums{}, false, nil
	}
	h, err := d.lookup(id)
	if err != nil {
		return BlockSums{}, false, err
	}
	if !h.present || h.sumErr != nil || h.sum != b.Checksum || h.size != b.Size {
		return BlockSums{}, false, nil // another blob's, or the blob is gone
	}
	return b, true, nil
}

// BlockSums implements BlockSummer: a blob in a volume is at most the
// inline limit and carries none; a file is the Disk's.
func (v *Volumes) BlockSums(ctx context.Context, id string) (BlockSums, bool, error) {
	if err := v.usable(id); err != nil {
		return BlockSums{}, false, err
	}
	if _, ok := v.entry(id); ok {
		return BlockSums{}, false, nil
	}
	return v.disk.BlockSums(ctx, id)
}

// addBlockSums writes the sums of an intact blob that has none (one
// written before block sums existed), reading it once more.
func (d *Disk) addBlockSums(ctx context.Context, id, sum string) error {
	f, err := os.Open(blobPath(d.root, id))
	if err != nil {
		return fsError(err, "blob %s: open", id)
	}
	defer f.Close()
	var s blockSummer
	got, n, err := hashReader(ctx, io.TeeReader(f, &s))
	if err != nil {
		return fsError(err, "blob %s: read", id)
	}
	if got != sum {
		return errs.E(errs.Corrupt, "blob %s no longer matches its checksum", id)
	}
	return writeBlockSums(shardDir(d.root, id), id, BlockSums{Checksum: sum, Size: n, Sums: s.finish()})
}
