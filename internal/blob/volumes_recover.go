// The volumes layout's recovery at open: the checkpoint, then a scan of the
// records after it, cutting torn tails and setting damaged records aside.

package blob

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

// recover rebuilds the index (see Volumes).
func (v *Volumes) recover() error {
	if err := os.Mkdir(v.dir, 0o750); err == nil {
		if err := syncDir(v.root); err != nil {
			return fsError(err, "blob store: sync %s", v.root)
		}
	} else if !errors.Is(err, os.ErrExist) {
		return fsError(err, "blob store: create %s", v.dir)
	}
	if err := removeTemps(v.dir, tempPrefix+"*"); err != nil {
		return err
	}
	nums, err := volumeNumbers(v.dir)
	if err != nil {
		return err
	}
	for _, num := range nums {
		if err := v.openVolume(num, num == nums[len(nums)-1]); err != nil {
			return err
		}
	}
	v.recovery.Volumes = len(v.vols)
	marks, err := v.loadCheckpoint()
	switch {
	case err == nil:
		if why := v.checkpointMismatch(marks); why != "" {
			v.recovery.CheckpointIgnored, marks = why, nil
			v.index = newIndex()
		} else {
			v.recovery.Checkpoint = true
		}
	case errors.Is(err, errNoCheckpoint):
		v.index = newIndex()
	default:
		v.recovery.CheckpointIgnored, marks = err.Error(), nil
		v.index = newIndex()
	}
	if v.recovery.CheckpointIgnored != "" {
		v.log.Warn("index checkpoint not used; scanning every volume", "reason", v.recovery.CheckpointIgnored)
	}
	v.index.Ascend(func(e volEntry) bool {
		v.vols[e.vol].live += recordLen(e.id, e.size)
		v.acct.add(1, e.size)
		return true
	})
	for _, num := range nums {
		vol := v.vols[num]
		if vol == nil {
			continue
		}
		start := int64(superblockLen)
		if m, ok := marks[num]; ok {
			start = m.covered
		}
		if err := v.scan(vol, start); err != nil {
			return err
		}
	}
	v.recovery.Blobs, v.recovery.Bytes = int64(v.index.Len()), 0
	v.index.Ascend(func(e volEntry) bool { v.recovery.Bytes += e.size; return true })
	// The highest volume left is the one appended to (an unfinished last one
	// was removed above).
	for _, vol := range v.vols {
		if v.active == nil || vol.num > v.active.num {
			v.active = vol
		}
	}
	return nil
}

// volumeNumbers lists the volume files of the volumes directory dir in order.
func volumeNumbers(dir string) ([]uint32, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fsError(err, "blob store: read %s", dir)
	}
	var nums []uint32
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".vol")
		n, err := strconv.ParseUint(base, 10, 32)
		if !ok || err != nil || n == 0 || volumeName(uint32(n)) != e.Name() || !e.Type().IsRegular() {
			continue
		}
		nums = append(nums, uint32(n))
	}
	slices.Sort(nums)
	return nums, nil
}

// openVolume opens volume num and reads its superblock. The last volume may
// have been cut short while it was being created, before any record went
// into it: it is removed. Any other bad superblock stops the open.
func (v *Volumes) openVolume(num uint32, last bool) error {
	path := filepath.Join(v.dir, volumeName(num))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fsError(err, "blob store: open volume %s", path)
	}
	b := make([]byte, superblockLen)
	_, rerr := f.ReadAt(b, 0)
	sb, perr := parseSuperblock(b)
	if rerr == nil && perr == nil && sb.num != num {
		perr = fmt.Errorf("it names itself volume %d", sb.num)
	}
	if rerr != nil || perr != nil {
		fi, serr := f.Stat()
		f.Close()
		if last && serr == nil && fi.Size() <= superblockLen {
			v.recovery.TornBytes += fi.Size()
			return fsError(errors.Join(os.Remove(path), syncDir(v.dir)), "blob store: remove unfinished volume %s", path)
		}
		return errs.E(errs.Corrupt, "blob store: volume %s has no valid superblock (%v); move it aside to start without it", path, errors.Join(rerr, perr))
	}
	v.vols[num] = &volume{num: num, salt: sb.salt, path: path, f: f, file: newVolFile(f), size: superblockLen}
	return nil
}

// checkpointMismatch says why marks cannot stand for the volumes on disk, or
// "" when they can.
func (v *Volumes) checkpointMismatch(marks map[uint32]volumeMark) string {
	for num, m := range marks {
		vol := v.vols[num]
		if vol == nil {
			return fmt.Sprintf("volume %d it covers is missing", num)
		}
		if vol.salt != m.salt {
			return fmt.Sprintf("volume %d was replaced since", num)
		}
		fi, err := vol.f.Stat()
		if err != nil || fi.Size() < m.covered {
			return fmt.Sprintf("volume %d is shorter than the %d bytes it covers", num, m.covered)
		}
	}
	return ""
}

// scan reads vol's records from start to its end into the index. A bad
// record with no good one after it is a torn tail, cut off; one with a good
// record after it is set aside.
func (v *Volumes) scan(vol *volume, start int64) error {
	fi, err := vol.f.Stat()
	if err != nil {
		return fsError(err, "blob store: stat volume %d", vol.num)
	}
	end := fi.Size()
	off := start
	sc := newVolScanner(vol.f, end)
	for off < end {
		h, n, err := readRecord(sc, vol.salt, off)
		if err != nil {
			next, ferr := nextRecord(vol.f, vol.salt, off+recordAlign, end)
			if ferr != nil {
				return fsError(ferr, "blob store: scan volume %d", vol.num)
			}
			if next < 0 {
				v.recovery.TornBytes += end - off
				if err := vol.f.Truncate(off); err != nil {
					return fsError(err, "blob store: cut the torn tail of volume %d", vol.num)
				}
				if err := fdatasync(vol.f); err != nil {
					return fsError(err, "blob store: sync volume %d", vol.num)
				}
				v.log.Warn("torn tail cut off a volume", "volume", vol.num, "at", off, "bytes", end-off)
				break
			}
			v.recovery.Quarantined++
			v.recovery.QuarantinedBytes += next - off
			v.log.Error("damaged record set aside; the records after it are served", "volume", vol.num, "at", off, "bytes", next-off, "err", err)
			off = next
			continue
		}
		v.recovery.Records++
		v.apply(vol, h, off)
		if !h.tombstone() {
			v.acct.add(1, h.size)
		}
		off += n
	}
	vol.size = off
	return nil
}

// volScanner reads a volume through a large window, so that a scan costs
// one read per window rather than two per record.
type volScanner struct {
	f     io.ReaderAt
	end   int64
	buf   []byte
	start int64 // the file offset of buf[0]
	n     int   // valid bytes in buf
}

const scanWindow = 4 << 20

func newVolScanner(f io.ReaderAt, end int64) *volScanner {
	return &volScanner{f: f, end: end, buf: make([]byte, scanWindow)}
}

// bytes returns the n bytes at off (fewer, with io.ErrUnexpectedEOF, at the
// end of the volume), valid until the next call.
func (s *volScanner) bytes(off int64, n int) ([]byte, error) {
	if off >= s.start && off+int64(n) <= s.start+int64(s.n) {
		return s.buf[off-s.start : off-s.start+int64(n)], nil
	}
	if n > len(s.buf) {
		s.buf = make([]byte, n)
	}
	k := min(int64(len(s.buf)), s.end-off)
	m, err := s.f.ReadAt(s.buf[:k], off)
	if err != nil && err != io.EOF {
		s.n = 0
		return nil, err
	}
	s.start, s.n = off, m
	if m < n {
		return s.buf[:m], io.ErrUnexpectedEOF
	}
	return s.buf[:n], nil
}

// readRecord reads and checks the whole record at off: header CRC, length
// within the volume and, for data, its SHA-256. It returns the header and
// the record's length.
func readRecord(s *volScanner, salt uint32, off int64) (recordHeader, int64, error) {
	hb, err := s.bytes(off, int(min(maxRecordHeader, s.end-off)))
	if err != nil {
		return recordHeader{}, 0, err
	}
	h, err := parseHeader(hb, salt)
	if err != nil {
		return recordHeader{}, 0, err
	}
	total := recordLen(h.id, h.size)
	if off+total > s.end {
		return recordHeader{}, 0, errs.E(errs.Corrupt, "record of %d bytes runs past the end of the volume", total)
	}
	if !h.tombstone() {
		data, err := s.bytes(off+headerLen(h.id), int(h.size))
		if err != nil {
			return recordHeader{}, 0, err
		}
		if sha256.Sum256(data) != h.sum {
			return recordHeader{}, 0, errs.E(errs.Corrupt, "data of blob %s does not match its checksum", h.id)
		}
	}
	return h, total, nil
}

// nextRecord finds the first offset at or after from, aligned, where a whole
// good record starts, or -1. Only a read failure of the file is an error.
func nextRecord(f io.ReaderAt, salt uint32, from, end int64) (int64, error) {
	const window = 1 << 20
	buf := make([]byte, window+len(recordMagic))
	s := newVolScanner(f, end)
	for pos := from; pos < end; pos += window {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
		if err != nil && err != io.EOF {
			return 0, err
		}
		// pos is aligned (from and window are), so i is too.
		for i := 0; i+len(recordMagic) <= n; i += recordAlign {
			if [4]byte(buf[i:i+4]) != recordMagic {
				continue
			}
			if _, _, err := readRecord(s, salt, pos+int64(i)); err == nil {
				return pos + int64(i), nil
			}
		}
	}
	return -1, nil
}
