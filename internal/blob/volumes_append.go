// The volumes layout's write path below the operations: the appender that
// commits records in groups, rolling volumes, and cutting a volume back
// after a failed write or sync.

package blob

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A group stops growing at maxGroupRecords records or once it holds
// maxGroupBytes. SeaweedFS drains 128 writes or 4 MiB; 4 MiB is only four
// records at the inline limit, and with 32 writers of 1 MiB a 32 MiB cap
// committed 1.2-1.4 times the bytes per second of a 4 MiB one, in three
// alternated runs of BenchmarkLayoutReceiveParallel. Small records reach the record cap long
// before the byte cap, and the records are in memory already: a group adds
// no buffer of its own.
const (
	maxGroupRecords = 128
	maxGroupBytes   = 32 << 20
)

// writeAheadMin is how many bytes of small records the appender holds in
// memory while a sync runs before it writes them behind the group in sync.
// A small record is one pwritev(2) of a few microseconds of kernel CPU, and
// 4 KiB records arrive one by one, so written at once each cost a system
// call of its own (0.93 per copy on a node of the cluster bench). Held until
// the sync returns, a group of them goes in one write, tens of
// microseconds, before the next sync starts.
const writeAheadMin = 128 << 10

// ownWriteMin is the size from which a record is not copied into the page
// cache by the appender but by a goroutine of its own, into an offset the
// appender reserves for it: the copy of a large record takes long enough
// that one appender copying every byte on one core bounded 1 MiB writes
// (the sync was in flight only 36-60% of the time), while copies on their
// own goroutines run on both cores and still share syncs (1 MiB writes
// 1.1-3.1 times as fast in 9 of 10 alternated pairs of
// BenchmarkLayoutReceiveParallel).
// Below it a record stays in the appender's gathered pwritev, which costs
// a group of small records one system call: 64 KiB records on goroutines of
// their own committed 0.32-0.96 times the bytes per second of 64 KiB
// records kept in the appender, in four alternated runs, with fewer records
// per sync. Sizes between were not measured; from here the appender already
// wrote a record alone, at once, while a sync ran.
const ownWriteMin = writeAheadMin

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

	// off is where the appender put the record in the active volume.
	off int64
	// The appender's, for a record written by its own goroutine: writing
	// while that goroutine runs, and failed, when a cut or a crash failed
	// the record while it was still writing, the answer it gets when the
	// goroutine reports.
	writing bool
	failed  error
	// werr is the goroutine's own write's result, read once it reported.
	werr error
	// cancelled tells the goroutine not to write: a cut took its offset.
	// Under the volume's gate.
	cancelled bool
}

// info describes the blob r stores.
func (r *appendReq) info() Info {
	return Info{ID: r.h.id, Size: r.h.size, Checksum: hex.EncodeToString(r.h.sum[:])}
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
	if err := v.enqueue(r); err != nil {
		return err
	}
	return <-r.done
}

// enqueue hands records to the appender, each with the channel its outcome
// comes on, or none of them (errClosed) once the store is closed.
func (v *Volumes) enqueue(rs ...*appendReq) error {
	v.submit.RLock()
	if v.closed.Load() {
		v.submit.RUnlock()
		return errClosed()
	}
	for _, r := range rs {
		r.done = make(chan error, 1)
		v.reqs <- r
	}
	v.submit.RUnlock()
	if v.submitted != nil {
		for range rs {
			v.submitted()
		}
	}
	return nil
}

// appender commits the records handed to it, until Close closes reqs.
//
// It keeps at most two groups of the active volume in hand: one whose
// fdatasync is running (on its own goroutine) and one being filled behind
// it. A record of ownWriteMin bytes or more gets the next offset of the
// volume at once and is copied there by a goroutine of its own, so large
// copies run in parallel and overlap the sync in flight. Smaller records
// that arrive while a sync runs are held in memory until they add up to
// writeAheadMin bytes, then written, each batch with one pwritev from the
// records' own buffers, at the next offset. When a sync returns, what is
// still held is written and the next sync starts at once over the records
// of the filling group that are written with nothing unwritten before them:
// the contiguous written prefix. A record behind one still being copied
// waits for a later sync, so every sync covers a stretch of the volume
// that was whole in the file before it began, and no record is ever
// acknowledged beyond a gap. A group is acknowledged only once its own
// sync has returned; groups are answered in the order they were written.
func (v *Volumes) appender() {
	defer close(v.appenderDone)
	a := &appendState{v: v, synced: make(chan error, 1), wrote: make(chan *appendReq, 2*maxGroupRecords)}
	v.mu.Lock()
	if v.active != nil {
		v.active.end = v.active.size
	}
	v.mu.Unlock()
	reqs := v.reqs
	// held are small records taken but not yet written, heldBytes their
	// length.
	held := make([]*appendReq, 0, maxGroupRecords)
	heldBytes := 0
	write := func() {
		a.append(held)
		held, heldBytes = held[:0], 0
	}
	take := func(r *appendReq) {
		if len(r.rec) >= ownWriteMin {
			a.reserve(r)
			return
		}
		held, heldBytes = append(held, r), heldBytes+len(r.rec)
	}
	for reqs != nil || a.syncing != nil || a.filling != nil || len(held) > 0 || a.writers > 0 {
		if a.syncing == nil && len(held) > 0 {
			write()
		}
		a.startSync()
		in := reqs
		records, n := a.filling.records()+len(held), a.filling.bytes()+heldBytes
		if records >= maxGroupRecords || n >= maxGroupBytes {
			in = nil // the group behind the running sync is full: wait for it
		}
		select {
		case r, ok := <-in:
			if !ok {
				reqs = nil
				continue
			}
			take(r)
			records, n = records+1, n+len(r.rec)
		gather:
			for records < maxGroupRecords && n < maxGroupBytes {
				select {
				case r, ok := <-reqs:
					if !ok {
						reqs = nil
						break gather
					}
					take(r)
					records, n = records+1, n+len(r.rec)
				default:
					break gather
				}
			}
			if heldBytes >= writeAheadMin {
				write()
			}
		case err := <-a.synced:
			a.finish(err)
		case r := <-a.wrote:
			a.landed(r)
		}
	}
}

// group is records written one after the other to vol from start to end.
type group struct {
	vol        *volume
	start, end int64
	reqs       []*appendReq
	took       time.Duration // its fdatasync, once returned
}

func (g *group) bytes() int {
	if g == nil {
		return 0
	}
	return int(g.end - g.start)
}

func (g *group) records() int {
	if g == nil {
		return 0
	}
	return len(g.reqs)
}

// appendState is the appender's own: the group being synced and the one
// being filled, which follows it in the same volume.
type appendState struct {
	v       *Volumes
	syncing *group
	// filling's records are in offset order; those of ownWriteMin bytes or
	// more may still be being written.
	filling *group
	synced  chan error // the result of syncing's fdatasync
	// wrote is where the goroutines writing records of their own report,
	// and writers counts those not yet heard from.
	wrote   chan *appendReq
	writers int
}

// startSync starts the sync of the filling group's contiguous written
// prefix if no sync is running; the rest stays filling.
func (a *appendState) startSync() {
	if a.syncing != nil || a.filling == nil {
		return
	}
	a.collect()
	g := a.filling
	if g == nil {
		return
	}
	k := 0
	for k < len(g.reqs) && !g.reqs[k].writing {
		k++
	}
	if k == 0 {
		return // the first record is still being written
	}
	if k < len(g.reqs) {
		rest := &group{vol: g.vol, start: g.reqs[k].off, end: g.end, reqs: g.reqs[k:]}
		g = &group{vol: g.vol, start: g.start, end: rest.start, reqs: g.reqs[:k:k]}
		a.filling = rest
	} else {
		a.filling = nil
	}
	a.syncing = g
	go func() {
		began := time.Now()
		err := syncVolume(g.vol.f)
		g.took = time.Since(began)
		a.synced <- err
	}()
}

// collect takes the reports of the record writes that have finished.
func (a *appendState) collect() {
	for {
		select {
		case r := <-a.wrote:
			a.landed(r)
		default:
			return
		}
	}
}

// drain commits both groups in hand, waiting for their writes and syncs,
// and for every record write still running, even one a cut cancelled.
func (a *appendState) drain() {
	for a.syncing != nil || a.filling != nil || a.writers > 0 {
		a.startSync()
		if a.syncing == nil {
			a.landed(<-a.wrote)
			continue
		}
		select {
		case err := <-a.synced:
			a.finish(err)
		case r := <-a.wrote:
			a.landed(r)
		}
	}
}

// finish ends the group whose sync returned err: on success it is indexed
// and acknowledged; on failure the volume is cut back to where the group
// began, which takes the filling group (written after it) with it, and both
// fail.
func (a *appendState) finish(err error) {
	v, g := a.v, a.syncing
	a.syncing = nil
	if err == nil && (v.crashed.Load() || v.crash(crashSynced)) {
		err = errSimulatedCrash
	}
	if err != nil {
		if err != errSimulatedCrash {
			a.cut(g.vol, g.start, err)
			err = fsError(err, "blob store: append to volume %d", g.vol.num)
		}
		answer(g.reqs, err)
		a.failFrom(g.start, err)
		return
	}
	v.stats.add(len(g.reqs), g.took)
	v.mu.Lock()
	for _, r := range g.reqs {
		v.apply(g.vol, r.h, r.off)
		if !r.h.tombstone() {
			v.acct.publish(r.reserved)
		}
	}
	g.vol.size = g.end
	v.mu.Unlock()
	answer(g.reqs, nil)
	if v.sinceCkpt.Add(int64(len(g.reqs))) >= v.ckptEvery && v.ckptRunning.CompareAndSwap(false, true) {
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

// failFrom fails every record of the filling group at or beyond off: those
// written are answered at once, those still being written once their
// goroutine reports.
func (a *appendState) failFrom(off int64, err error) {
	g := a.filling
	if g == nil {
		return
	}
	i := 0
	for i < len(g.reqs) && g.reqs[i].off < off {
		i++
	}
	for _, r := range g.reqs[i:] {
		if r.writing {
			r.failed = err
		} else {
			r.done <- err
		}
	}
	if i == 0 {
		a.filling = nil
		return
	}
	g.reqs, g.end = g.reqs[:i], off
}

// cut cuts vol back to length after a failed write or sync, and cancels
// the writes still to come of the records at or beyond it. It holds the
// volume's gate, so no record's own write is running while the file is cut:
// none can land beyond the cut afterwards.
func (a *appendState) cut(vol *volume, length int64, cause error) {
	vol.gate.Lock()
	if g := a.filling; g != nil {
		for _, r := range g.reqs {
			if r.writing && r.off >= length {
				r.cancelled = true
			}
		}
	}
	a.v.cutBack(vol, length, cause)
	vol.gate.Unlock()
	vol.end = length
}

// landed takes the report of r's own write. A write that failed fails r
// and every record after it, and the volume is cut back to where r began.
func (a *appendState) landed(r *appendReq) {
	a.writers--
	r.writing = false
	v := a.v
	if v.landed != nil {
		v.landed()
	}
	switch {
	case r.failed != nil:
		r.done <- r.failed // a cut or a crash took it while it was written
	case r.werr != nil:
		err := fsError(r.werr, "blob store: append to volume %d", a.filling.vol.num)
		a.cut(a.filling.vol, r.off, r.werr)
		a.failFrom(r.off, err)
	case v.crash(crashAppended):
		if a.filling != nil {
			a.failFrom(a.filling.start, errSimulatedCrash)
		}
	}
}

// room returns the active volume with room for n more bytes, rolling it
// first (once the groups in hand are committed) where it has none.
func (a *appendState) room(n int64) (*volume, error) {
	v := a.v
	if err := v.writable(); err != nil {
		return nil, err
	}
	v.mu.RLock()
	vol := v.active
	v.mu.RUnlock()
	if vol != nil && vol.end+n <= v.volSize {
		return vol, nil
	}
	// Only the active volume is appended to, and a sealed one may be
	// compacted: commit what it was given before rolling.
	a.drain()
	if err := v.writable(); err != nil {
		return nil, err
	}
	return v.roll()
}

// reserve gives r the next offset of the active volume, into the filling
// group, and starts the goroutine that writes it there.
func (a *appendState) reserve(r *appendReq) {
	vol, err := a.room(int64(len(r.rec)))
	if err != nil {
		r.done <- err
		return
	}
	sealHeader(r.rec, vol.salt, r.h)
	r.off, r.writing = vol.end, true
	vol.end += int64(len(r.rec))
	a.fill(vol, r)
	a.writers++
	f := vol.f // the active volume's, which compaction leaves alone
	go func() {
		vol.gate.RLock()
		if !r.cancelled {
			_, r.werr = writeVolume(f, [][]byte{r.rec}, r.off)
		}
		vol.gate.RUnlock()
		a.wrote <- r
	}()
}

// fill adds r, at the end of vol, to the filling group.
func (a *appendState) fill(vol *volume, r *appendReq) {
	if a.filling == nil {
		a.filling = &group{vol: vol, start: r.off}
	}
	a.filling.reqs = append(a.filling.reqs, r)
	a.filling.end = r.off + int64(len(r.rec))
}

// append writes batch to the active volume behind the groups in hand,
// rolling the volume first where a record would overflow it. A record
// whose write fails is answered at once.
func (a *appendState) append(batch []*appendReq) {
	v := a.v
	for len(batch) > 0 {
		vol, err := a.room(int64(len(batch[0].rec)))
		if err != nil {
			answer(batch, err)
			return
		}
		// As many records as fit in this volume.
		room := v.volSize - vol.end
		k, n := 0, int64(0)
		for k < len(batch) && n+int64(len(batch[k].rec)) <= room {
			n += int64(len(batch[k].rec))
			k++
		}
		a.write(vol, batch[:k])
		batch = batch[k:]
	}
}

// write appends recs to vol at its end with one pwritev, into the filling
// group.
func (a *appendState) write(vol *volume, recs []*appendReq) {
	v := a.v
	start := vol.end
	bufs := make([][]byte, len(recs))
	for i, r := range recs {
		sealHeader(r.rec, vol.salt, r.h)
		bufs[i] = r.rec
	}
	_, err := writeVolume(vol.f, bufs, start)
	if err == nil && v.crash(crashAppended) {
		answer(recs, errSimulatedCrash)
		if a.filling != nil {
			a.failFrom(a.filling.start, errSimulatedCrash)
		}
		return // a running sync's group is answered by finish
	}
	if err != nil {
		// The groups in hand lie below start, untouched; only what this
		// write may have left beyond it goes.
		a.cut(vol, start, err)
		answer(recs, fsError(err, "blob store: append to volume %d", vol.num))
		return
	}
	off := start
	for _, r := range recs {
		r.off = off
		off += int64(len(r.rec))
		a.fill(vol, r)
	}
	vol.end = off
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

// roll seals the active volume, if any, and makes a new one active.
func (v *Volumes) roll() (*volume, error) {
	v.mu.RLock()
	vol := v.active
	v.mu.RUnlock()
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
	return &volume{num: num, salt: sb.salt, path: path, f: f, file: newVolFile(f), size: superblockLen, end: superblockLen}, nil
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

// writeVolume writes records one after the other at off. A variable so that
// tests can fill the disk.
var writeVolume = writeAtv

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
