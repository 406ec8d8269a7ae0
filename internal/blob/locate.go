// Shared by every layout: finding where a blob's bytes lie in a data
// directory without opening its store, for tools and tests that inspect or
// damage a copy on disk while a node may hold the directory.

package blob

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dfs-project/dfs/internal/errs"
)

// CopyLocation is where the data of one blob's copy lies on disk.
type CopyLocation struct {
	// Path is the file that holds the data: the blob's own file, or the
	// volume that holds its record.
	Path string
	// Offset is where the data starts in Path (0 for a blob's own file).
	Offset int64
	// Size is the length of the data.
	Size int64
	// Sidecar is the checksum sidecar of a blob kept in a file of its own, ""
	// for a record (whose header holds its checksum).
	Sidecar string
	// Checkpoint is, for a record, the index checkpoint that may list it
	// (volumes_checkpoint.go); "" for a file.
	Checkpoint string
}

// LocateCopy finds the data of blob id in the data directory dir, in either
// layout, by reading the directory and not the store's state: a blob in a
// file of its own is found by its path, one in a volume by scanning the
// volumes for its last record (a tombstone there means the blob is absent;
// a record whose data no longer matches its checksum is found, corrupt). It takes no lock, so it may run beside a node
// that holds dir; a record being appended at that moment may be missed, and
// a volume being compacted may be replaced under the caller. Absent is
// errs.NotFound.
func LocateCopy(dir, id string) (CopyLocation, error) {
	if err := ValidateID(id); err != nil {
		return CopyLocation{}, err
	}
	p := blobPath(dir, id)
	if fi, err := os.Stat(p); err == nil {
		return CopyLocation{Path: p, Size: fi.Size(), Sidecar: sidecarPath(dir, id)}, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return CopyLocation{}, fsError(err, "blob store: stat %s", p)
	}
	vdir := filepath.Join(dir, volumesDirName)
	if _, err := os.Stat(vdir); errors.Is(err, fs.ErrNotExist) {
		return CopyLocation{}, errs.E(errs.NotFound, "blob store: %s holds no copy of blob %s", dir, id)
	}
	nums, err := volumeNumbers(vdir)
	if err != nil {
		return CopyLocation{}, err
	}
	var (
		loc   CopyLocation
		found bool
	)
	for _, num := range nums {
		path := filepath.Join(vdir, volumeName(num))
		err := scanVolumeFile(path, id, func(h recordHeader, off int64) {
			found = !h.tombstone()
			loc = CopyLocation{Path: path, Offset: off + headerLen(h.id), Size: h.size, Checkpoint: filepath.Join(vdir, checkpointName)}
		})
		if err != nil {
			return CopyLocation{}, err
		}
	}
	if !found {
		return CopyLocation{}, errs.E(errs.NotFound, "blob store: %s holds no copy of blob %s", dir, id)
	}
	return loc, nil
}

// scanVolumeFile calls fn, in order, for every record of id in the volume
// file at path, stopping at a torn tail. A record with an intact header but
// data that fails its checksum is a copy still, a corrupt one (recovery sets
// such a record aside, but a node that indexed it before serves it until it
// restarts); any other damage is skipped as recovery skips it.
func scanVolumeFile(path, id string, fn func(h recordHeader, off int64)) error {
	f, err := os.Open(path)
	if err != nil {
		return fsError(err, "blob store: open volume %s", path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsError(err, "blob store: stat volume %s", path)
	}
	sbb := make([]byte, superblockLen)
	if _, err := f.ReadAt(sbb, 0); err != nil {
		return nil // a volume cut short while it was created holds no record
	}
	sb, err := parseSuperblock(sbb)
	if err != nil {
		return errs.Wrap(errs.Corrupt, err, "blob store: volume %s", path)
	}
	end := fi.Size()
	sc := newVolScanner(f, end)
	for off := int64(superblockLen); off < end; {
		h, n, err := readRecord(sc, sb.salt, off)
		if err != nil {
			if h, n, ok := damagedData(sc, sb.salt, off); ok {
				if h.id == id {
					fn(h, off)
				}
				off += n
				continue
			}
			next, ferr := nextRecord(f, sb.salt, off+recordAlign, end)
			if ferr != nil {
				return fsError(ferr, "blob store: scan volume %s", path)
			}
			if next < 0 {
				return nil
			}
			off = next
			continue
		}
		if h.id == id {
			fn(h, off)
		}
		off += n
	}
	return nil
}

// damagedData reports whether the record at off has an intact header and
// lies within the volume, whatever its data holds, and returns its header
// and length.
func damagedData(s *volScanner, salt uint32, off int64) (recordHeader, int64, bool) {
	hb, err := s.bytes(off, int(min(maxRecordHeader, s.end-off)))
	if err != nil {
		return recordHeader{}, 0, false
	}
	h, err := parseHeader(hb, salt)
	if err != nil || off+recordLen(h.id, h.size) > s.end {
		return recordHeader{}, 0, false
	}
	return h, recordLen(h.id, h.size), true
}
