// The volumes layout's byte formats: a volume file's superblock and its
// records (drawn in ARCHITECTURE.md).

package blob

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"

	"github.com/dfs-project/dfs/internal/errs"
)

// A volume file starts with a superblock of superblockLen bytes:
//
//	0  8  magic "DFSVOLUM"
//	8  4  format version (1), little-endian like every number here
//	12 4  volume number
//	16 4  salt: a random number that seeds the CRC of every record header
//	20 4  CRC-32C of bytes 0..20
//	24 8  zero
//
// and records follow, each starting at a multiple of recordAlign:
//
//	0  4  magic "DFSR"
//	4  1  format version (1)
//	5  1  flags (bit 0: tombstone, the id was removed)
//	6  1  length of the id, n (4..128)
//	7  1  zero
//	8  8  length of the data, d (0 for a tombstone)
//	16 32 SHA-256 of the data
//	48 n  the id
//	48+n 4 CRC-32C of bytes 0..48+n, seeded with the volume's salt
//	52+n d the data
//	then zeros up to the next multiple of recordAlign
//
// The salt keeps a record copied inside another blob's data (a volume file
// stored as a blob) from passing for one of this volume's own when recovery
// searches for the next record after a damaged one.
const (
	superblockLen  = 32
	volumeVersion  = 1
	recordVersion  = 1
	recordAlign    = 8
	recordFixedLen = 48
	flagTombstone  = 1
	// maxRecordHeader is the longest header: the longest id.
	maxRecordHeader = recordFixedLen + MaxIDLen + 4
)

var (
	volumeMagic = [8]byte{'D', 'F', 'S', 'V', 'O', 'L', 'U', 'M'}
	recordMagic = [4]byte{'D', 'F', 'S', 'R'}
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
)

// recordHeader is a record's header, parsed.
type recordHeader struct {
	id    string
	flags byte
	size  int64
	sum   [sha256.Size]byte
}

func (h recordHeader) tombstone() bool { return h.flags&flagTombstone != 0 }

// headerLen is the length of the header of a record for id.
func headerLen(id string) int64 { return int64(recordFixedLen + len(id) + 4) }

// recordLen is the length of a whole record, padding included.
func recordLen(id string, size int64) int64 { return alignUp(headerLen(id) + size) }

func alignUp(n int64) int64 { return (n + recordAlign - 1) &^ (recordAlign - 1) }

// errBadRecord is a header that is not a whole, intact record header.
var errBadRecord = errs.E(errs.Corrupt, "not an intact record header")

// parseHeader parses the record header at the start of b, which holds the
// bytes from the record's offset to the end of what was read (at least
// maxRecordHeader bytes unless the file ends sooner). It checks the magic,
// version, id and CRC; the data is the caller's to check.
func parseHeader(b []byte, salt uint32) (recordHeader, error) {
	if len(b) < recordFixedLen || [4]byte(b[0:4]) != recordMagic || b[4] != recordVersion || b[7] != 0 {
		return recordHeader{}, errBadRecord
	}
	n := int(b[6])
	if n < 4 || n > MaxIDLen || len(b) < recordFixedLen+n+4 {
		return recordHeader{}, errBadRecord
	}
	end := recordFixedLen + n
	if crc32.Update(salt, castagnoli, b[:end]) != binary.LittleEndian.Uint32(b[end:end+4]) {
		return recordHeader{}, errBadRecord
	}
	h := recordHeader{id: string(b[recordFixedLen:end]), flags: b[5], sum: [32]byte(b[16:48])}
	size := binary.LittleEndian.Uint64(b[8:16])
	if size > 1<<62 || ValidateID(h.id) != nil || h.flags&^flagTombstone != 0 || (h.tombstone() && size != 0) {
		return recordHeader{}, errBadRecord
	}
	h.size = int64(size)
	return h, nil
}

// superblock is a volume file's first bytes, parsed.
type superblock struct {
	num  uint32
	salt uint32
}

func (s superblock) encode() []byte {
	b := make([]byte, 0, superblockLen)
	b = append(b, volumeMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, volumeVersion)
	b = binary.LittleEndian.AppendUint32(b, s.num)
	b = binary.LittleEndian.AppendUint32(b, s.salt)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return append(b, make([]byte, superblockLen-len(b))...)
}

func parseSuperblock(b []byte) (superblock, error) {
	if len(b) < superblockLen || [8]byte(b[0:8]) != volumeMagic || binary.LittleEndian.Uint32(b[8:12]) != volumeVersion ||
		crc32.Checksum(b[:20], castagnoli) != binary.LittleEndian.Uint32(b[20:24]) {
		return superblock{}, errs.E(errs.Corrupt, "not a volume superblock (format version %d)", volumeVersion)
	}
	return superblock{num: binary.LittleEndian.Uint32(b[12:16]), salt: binary.LittleEndian.Uint32(b[16:20])}, nil
}
