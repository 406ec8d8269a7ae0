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
	recs, err := locateRecords(dir, func(got string) bool { return got == id })
	if err != nil {
		return CopyLocation{}, err
	}
	loc, ok := recs[id]
	if !ok {
		return CopyLocation{}, errs.E(errs.NotFound, "blob store: %s holds no copy of blob %s", dir, id)
	}
	return loc, nil
}

// LocateCopies is LocateCopy for every blob dir holds, by id: the files of
// the sharded tree named by an id (a blob file without its sidecar
// included), and the blobs whose last record in a volume is not a
// tombstone.
func LocateCopies(dir string) (map[string]CopyLocation, error) {
	out, err := locateRecords(dir, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	tops, err := shardNames(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fsError(err, "blob store: read %s", dir)
	}
	for _, a := range tops {
		subs, err := shardNames(filepath.Join(dir, a))
		if err != nil {
			return nil, fsError(err, "blob store: read %s", filepath.Join(dir, a))
		}
		for _, b := range subs {
			entries, err := os.ReadDir(filepath.Join(dir, a, b))
			if err != nil {
				return nil, fsError(err, "blob store: read %s", filepath.Join(dir, a, b))
			}
			for _, e := range entries {
				id := e.Name()
				if !e.Type().IsRegular() || isTempName(id) || ValidateID(id) != nil || !inShard(id, a, b) {
					continue
				}
				fi, err := e.Info()
				if err != nil {
					continue // removed since the listing
				}
				out[id] = CopyLocation{Path: blobPath(dir, id), Size: fi.Size(), Sidecar: sidecarPath(dir, id)}
			}
		}
	}
	return out, nil
}

// locateRecords scans the volumes of dir, if any, for the last record of
// every id that want accepts, and returns those that are not tombstones.
func locateRecords(dir string, want func(id string) bool) (map[string]CopyLocation, error) {
	out := map[string]CopyLocation{}
	vdir := filepath.Join(dir, volumesDirName)
	if _, err := os.Stat(vdir); errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	nums, err := volumeNumbers(vdir)
	if err != nil {
		return nil, err
	}
	for _, num := range nums {
		path := filepath.Join(vdir, volumeName(num))
		err := scanVolumeFile(path, want, func(h recordHeader, off int64) {
			if h.tombstone() {
				delete(out, h.id)
				return
			}
			out[h.id] = CopyLocation{Path: path, Offset: off + headerLen(h.id), Size: h.size, Checkpoint: filepath.Join(vdir, checkpointName)}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanVolumeFile calls fn, in order, for every record of an id want
// accepts in the volume file at path, stopping at a torn tail. A record with an intact header but
// data that fails its checksum is a copy still, a corrupt one (recovery sets
// such a record aside, but a node that indexed it before serves it until it
// restarts); any other damage is skipped as recovery skips it.
func scanVolumeFile(path string, want func(id string) bool, fn func(h recordHeader, off int64)) error {
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
				if want(h.id) {
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
		if want(h.id) {
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
