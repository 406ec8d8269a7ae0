// The volumes layout's write path below the operations: the appender that
// commits records in groups, rolling volumes, and cutting a volume back
// after a failed write or sync.

package blob

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A group is at most maxGroupRecords records and, beyond its first record,
// maxGroupBytes bytes (SeaweedFS drains 128 writes or 4 MiB the same way).
const (
	maxGroupRecords = 128
	maxGroupBytes   = 4 << 20
)

// The crashAt steps of the appender, in the order a group meets them.
const (
	// crashVolumeCreated: a new volume's superblock is written, neither the
	// file nor its directory entry synced.
	crashVolumeCreated = "volume-created"
	// crashAppended: a group is written to its volume, not synced.
	crashAppended = "appended"
	// crashSynced: a group is synced, not yet indexed or acknowledged.
	crashSynced = "synced"
)

// appendReq is one record given to the appender.
type appendReq struct {
	h recordHeader
	// rec is the whole record with room for its header, which the appender
	// fills in once it knows the volume (and so the salt).
	rec []byte
	// reserved is what the record's data holds of the capacity until it is
	// committed or fails.
	reserved int64
	done     chan error
}

// syncCounters counts group commits for SyncStats.
type syncCounters struct {
	mu sync.Mutex
	s  SyncStats
}

func (c *syncCounters) add(records int, d time.Duration) {
	c.mu.Lock()
	c.s.Syncs++
	c.s.Waits += int64(records)
	c.s.Time += d
	c.mu.Unlock()
}

func (c *syncCounters) snapshot() SyncStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// commit hands r to the appender and waits for its group's sync. It does not
// give up on a cancelled context: the wait is one sync long, and a writer
// that left could not be told whether its record was committed.
func (v *Volumes) commit(r *appendReq) error {
	r.done = make(chan error, 1)
	v.submit.RLock()
	if v.closed.Load() {
		v.submit.RUnlock()
		return errClosed()
	}
	v.reqs <- r
	v.submit.RUnlock()
	if v.submitted != nil {
		v.submitted()
	}
	return <-r.done
}

// appender gathers the records waiting for it into groups and commits them,
// one group at a time, until Close closes reqs.
func (v *Volumes) appender() {
	defer close(v.appenderDone)
	group := make([]*appendReq, 0, maxGroupRecords)
	for r := range v.reqs {
		group = append(group[:0], r)
		n := len(r.rec)
	gather:
		for len(group) < maxGroupRecords && n < maxGroupBytes {
			select {
			case r, ok := <-v.reqs:
				if !ok {
					break gather
				}
				group = append(group, r)
				n += len(r.rec)
			default:
				break gather
			}
		}
		v.commitGroup(group)
	}
}

// commitGroup writes group to the active volume, rolling it first where the
// group would overflow it, and answers every record.
func (v *Volumes) commitGroup(group []*appendReq) {
	for len(group) > 0 {
		if err := v.writable(); err != nil {
			answer(group, err)
			return
		}
		vol, err := v.volumeFor(int64(len(group[0].rec)))
		if err != nil {
			answer(group, err)
			return
		}
		// As many records as fit in this volume.
		room := v.volSize - v.length(vol)
		k, n := 0, int64(0)
		for k < len(group) && n+int64(len(group[k].rec)) <= room {
			n += int64(len(group[k].rec))
			k++
		}
		v.writeGroup(vol, group[:k])
		group = group[k:]
	}
}

func answer(group []*appendReq, err error) {
	for _, r := range group {
		r.done <- err
	}
}

// writable is nil while the store may append.
func (v *Volumes) writable() error {
	if v.crashed.Load() {
		return errSimulatedCrash
	}
	return v.failure()
}

func (v *Volumes) length(vol *volume) int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return vol.size
}

// volumeFor returns the active volume if a record of n bytes fits in it, or
// a new one.
func (v *Volumes) volumeFor(n int64) (*volume, error) {
	v.mu.RLock()
	vol := v.active
	v.mu.RUnlock()
	if vol != nil && v.length(vol)+n <= v.volSize {
		return vol, nil
	}
	num := uint32(1)
	if vol != nil {
		num = vol.num + 1
	}
	nv, err := v.createVolume(num)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.vols[num] = nv
	v.active = nv
	v.mu.Unlock()
	if vol != nil {
		v.log.Info("volume sealed", "volume", vol.num, "bytes", v.length(vol), "next", num)
		v.pokeCompaction()
	}
	return nv, nil
}

func volumeName(num uint32) string { return fmt.Sprintf("%08d.vol", num) }

// createVolume creates volume num with its superblock, durably: the file is
// synced, then its directory, before any record goes into it.
func (v *Volumes) createVolume(num uint32) (*volume, error) {
	path := filepath.Join(v.dir, volumeName(num))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, fsError(err, "blob store: create volume %s", path)
	}
	sb := superblock{num: num, salt: rand.Uint32()}
	_, err = f.WriteAt(sb.encode(), 0)
	if err == nil && v.crash(crashVolumeCreated) {
		f.Close()
		return nil, errSimulatedCrash
	}
	if err == nil {
		err = fdatasync(f)
	}
	if err == nil {
		err = syncDir(v.dir)
	}
	if err != nil {
		f.Close()
		_ = os.Remove(path) // a volume that never held a record
		return nil, fsError(err, "blob store: create volume %s", path)
	}
	return &volume{num: num, salt: sb.salt, path: path, f: f, file: newVolFile(f), size: superblockLen}, nil
}

// crash reports whether the store is to stop at step, and marks it stopped.
func (v *Volumes) crash(step string) bool {
	if at, _ := v.crashAt.Load().(string); at != step {
		return false
	}
	if v.onCrash != nil {
		v.onCrash(step)
	}
	v.crashed.Store(true)
	return true
}

// writeGroup appends group to vol with one write and one sync, then indexes
// the records and answers them.
func (v *Volumes) writeGroup(vol *volume, group []*appendReq) {
	start := v.length(vol)
	var buf []byte
	if len(group) == 1 {
		buf = group[0].rec
		sealHeader(buf, vol.salt, group[0].h)
	} else {
		total := 0
		for _, r := range group {
			total += len(r.rec)
		}
		buf = make([]byte, 0, total)
		for _, r := range group {
			sealHeader(r.rec, vol.salt, r.h)
			buf = append(buf, r.rec...)
		}
	}
	began := time.Now()
	_, err := writeVolume(vol.f, buf, start)
	if err == nil && v.crash(crashAppended) {
		answer(group, errSimulatedCrash)
		return
	}
	if err == nil {
		err = syncVolume(vol.f)
	}
	if err != nil {
		v.cutBack(vol, start, err)
		answer(group, fsError(err, "blob store: append to volume %d", vol.num))
		return
	}
	v.stats.add(len(group), time.Since(began))
	if v.crash(crashSynced) {
		answer(group, errSimulatedCrash)
		return
	}
	v.mu.Lock()
	off := start
	for _, r := range group {
		v.apply(vol, r.h, off)
		if !r.h.tombstone() {
			v.acct.publish(r.reserved)
		}
		off += int64(len(r.rec))
	}
	vol.size = off
	v.mu.Unlock()
	answer(group, nil)
	if v.sinceCkpt.Add(int64(len(group))) >= v.ckptEvery && v.ckptRunning.CompareAndSwap(false, true) {
		v.ckptWG.Add(1)
		go func() {
			defer v.ckptWG.Done()
			defer v.ckptRunning.Store(false)
			if err := v.checkpoint(); err != nil {
				v.log.Warn("index checkpoint failed; the next start scans more", "err", err)
			}
		}()
	}
}

// writeVolume writes a group at off. A variable so that tests can fill the
// disk.
var writeVolume = func(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

// syncVolume makes a volume's appended records durable. A variable so that
// tests can fail it.
var syncVolume = fdatasync

// cutBack truncates vol to length after a failed append, so that the
// records that failed can never be read back as good ones after a restart.
// If even that fails, the store stops taking writes: the volume's tail is
// in doubt until recovery examines it.
func (v *Volumes) cutBack(vol *volume, length int64, cause error) {
	err := vol.f.Truncate(length)
	if err == nil {
		err = fdatasync(vol.f)
	}
	if err != nil {
		v.fail(fmt.Errorf("volume %d could not be cut back to %d bytes after a failed append (%v): %w; no write is taken until the node restarts", vol.num, length, cause, err))
		v.log.Error("volume left in doubt; writes stopped", "volume", vol.num, "err", err, "cause", cause)
		return
	}
	v.log.Warn("append failed; volume cut back to its last synced length", "volume", vol.num, "length", length, "err", cause)
}

// apply records in the index that the record with header h is at off in
// vol, and moves the live byte counts and the accounting of a blob it
// supersedes. Under v.mu.
func (v *Volumes) apply(vol *volume, h recordHeader, off int64) {
	var old volEntry
	var had bool
	if h.tombstone() {
		old, had = v.index.Delete(volEntry{id: h.id})
	} else {
		e := volEntry{id: h.id, vol: vol.num, off: off, size: h.size, sum: h.sum}
		old, had = v.index.ReplaceOrInsert(e)
		vol.live += recordLen(h.id, h.size)
	}
	if had {
		if ov := v.vols[old.vol]; ov != nil {
			ov.live -= recordLen(old.id, old.size)
			if ov != v.active {
				v.pokeCompaction() // a sealed volume gained garbage
			}
		}
		v.acct.drop(old.size)
	}
}

// sealHeader writes the header of h at the start of rec, for a volume with
// salt.
func sealHeader(rec []byte, salt uint32, h recordHeader) {
	b := rec[:0]
	b = append(b, recordMagic[:]...)
	b = append(b, recordVersion, h.flags, byte(len(h.id)), 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.size))
	b = append(b, h.sum[:]...)
	b = append(b, h.id...)
	binary.LittleEndian.AppendUint32(b, crc32.Update(salt, castagnoli, b))
}
