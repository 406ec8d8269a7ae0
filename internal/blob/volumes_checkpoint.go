// The volumes layout's index checkpoints: the whole index and how far into
// each volume it reaches, so that a start reads one file and scans only the
// records written after it.

package blob

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A checkpoint file is, all numbers little-endian:
//
//	8  magic "DFSINDX1"
//	4  number of volumes, then for each: 4 number, 4 salt, 8 length covered
//	8  number of entries, then for each, in id order: 1 id length n, n id,
//	   4 volume, 8 record offset, 8 data length, 32 SHA-256
//	4  CRC-32C of everything before it
const checkpointName = "index"

var checkpointMagic = [8]byte{'D', 'F', 'S', 'I', 'N', 'D', 'X', '1'}

// crashCheckpointWritten: a checkpoint's temp file is written and synced,
// not yet renamed into place.
const crashCheckpointWritten = "checkpoint-written"

type volumeMark struct {
	num, salt uint32
	covered   int64
}

// checkpoint writes the index as it is now. The snapshot is taken under the
// lock (a copy-on-write clone, cheap); the file is written outside it.
func (v *Volumes) checkpoint() error {
	v.ckptMu.Lock()
	defer v.ckptMu.Unlock()
	began := time.Now()
	v.mu.Lock()
	idx := v.index.Clone()
	marks := make([]volumeMark, 0, len(v.vols))
	for _, vol := range v.vols {
		marks = append(marks, volumeMark{num: vol.num, salt: vol.salt, covered: vol.size})
	}
	pending := v.sinceCkpt.Swap(0)
	v.mu.Unlock()

	f, err := os.CreateTemp(v.dir, tempPrefix+checkpointName+"-*")
	if err != nil {
		v.sinceCkpt.Add(pending)
		return fsError(err, "create checkpoint temp file")
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			if !v.crashed.Load() {
				_ = os.Remove(f.Name())
			}
			v.sinceCkpt.Add(pending)
		}
	}()
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	var scratch []byte
	scratch = append(scratch, checkpointMagic[:]...)
	scratch = binary.LittleEndian.AppendUint32(scratch, uint32(len(marks)))
	for _, m := range marks {
		scratch = binary.LittleEndian.AppendUint32(scratch, m.num)
		scratch = binary.LittleEndian.AppendUint32(scratch, m.salt)
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(m.covered))
	}
	scratch = binary.LittleEndian.AppendUint64(scratch, uint64(idx.Len()))
	_, _ = w.Write(scratch)
	idx.Ascend(func(e volEntry) bool {
		scratch = append(scratch[:0], byte(len(e.id)))
		scratch = append(scratch, e.id...)
		scratch = binary.LittleEndian.AppendUint32(scratch, e.vol)
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(e.off))
		scratch = binary.LittleEndian.AppendUint64(scratch, uint64(e.size))
		scratch = append(scratch, e.sum[:]...)
		_, err = w.Write(scratch)
		return err == nil
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fsError(err, "write checkpoint")
	}
	if v.crash(crashCheckpointWritten) {
		return errSimulatedCrash
	}
	if err := os.Rename(f.Name(), filepath.Join(v.dir, checkpointName)); err != nil {
		return fsError(err, "publish checkpoint")
	}
	ok = true
	if err := syncDir(v.dir); err != nil {
		return fsError(err, "sync %s", v.dir)
	}
	v.log.Info("index checkpoint written", "blobs", idx.Len(), "volumes", len(marks), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// errNoCheckpoint is a directory without one.
var errNoCheckpoint = errors.New("no checkpoint")

// loadCheckpoint reads the checkpoint into v.index and returns the volumes
// it covers. Any flaw is an error that says what it is; the caller then
// scans every volume instead.
func (v *Volumes) loadCheckpoint() (map[uint32]volumeMark, error) {
	f, err := os.Open(filepath.Join(v.dir, checkpointName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoCheckpoint
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	crc := crc32.New(castagnoli)
	if fi.Size() < 4 {
		return nil, errors.New("cut short")
	}
	r := &ckptReader{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, fi.Size()-4), crc), 1<<20)}
	if [8]byte(r.bytes(8)) != checkpointMagic {
		return nil, fmt.Errorf("not a checkpoint (format %s)", checkpointMagic[:])
	}
	nv := r.u32()
	marks := make(map[uint32]volumeMark, min(nv, 1<<16))
	for i := uint32(0); i < nv && r.err == nil; i++ {
		m := volumeMark{num: r.u32(), salt: r.u32(), covered: int64(r.u64())}
		marks[m.num] = m
	}
	ne := r.u64()
	idx := newIndex()
	for i := uint64(0); i < ne && r.err == nil; i++ {
		e := volEntry{id: string(r.bytes(int(r.byte())))}
		e.vol, e.off, e.size = r.u32(), int64(r.u64()), int64(r.u64())
		e.sum = [32]byte(r.bytes(32))
		if r.err == nil && (ValidateID(e.id) != nil || marks[e.vol].covered < e.off+recordLen(e.id, e.size)) {
			r.err = fmt.Errorf("entry %d (%q) is not within the volumes the checkpoint covers", i, e.id)
		}
		idx.ReplaceOrInsert(e)
	}
	if r.err != nil {
		return nil, r.err
	}
	if _, err := r.r.Peek(1); err != io.EOF {
		return nil, errors.New("trailing bytes after the entries")
	}
	want := crc.Sum32()
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], fi.Size()-4); err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint32(tail[:]) != want {
		return nil, errors.New("checksum mismatch")
	}
	v.index = idx
	return marks, nil
}

// ckptReader reads a checkpoint's fields, remembering the first error.
type ckptReader struct {
	r   *bufio.Reader
	err error
	buf [32]byte
}

func (c *ckptReader) bytes(n int) []byte {
	if c.err != nil {
		return make([]byte, n)
	}
	b := c.buf[:0]
	if n > len(c.buf) {
		b = make([]byte, n)
	}
	b = b[:n]
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.err = fmt.Errorf("cut short: %w", err)
	}
	return b
}

func (c *ckptReader) byte() byte  { return c.bytes(1)[0] }
func (c *ckptReader) u32() uint32 { return binary.LittleEndian.Uint32(c.bytes(4)) }
func (c *ckptReader) u64() uint64 { return binary.LittleEndian.Uint64(c.bytes(8)) }
