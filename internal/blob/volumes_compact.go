// The volumes layout's compaction: a sealed volume whose garbage (records
// superseded or removed) passes the threshold is rewritten with its live
// records only, while the store serves, and swapped in by one rename.

package blob

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// DefaultCompactThreshold is Options.CompactThreshold when none is given.
const DefaultCompactThreshold = 0.3

// compactInterval is how often the background loop looks for volumes to
// compact when nothing prompts it sooner (a volume being sealed does).
const compactInterval = time.Minute

// The crashAt steps of a compaction.
const (
	// crashCompactWritten: the new volume is written and synced under a
	// temp name, not renamed over the old one.
	crashCompactWritten = "compact-written"
	// crashCompactRenamed: the new volume is renamed over the old one, the
	// index not yet moved to it.
	crashCompactRenamed = "compact-renamed"
)

// CompactStats counts what compaction has done since the store opened.
type CompactStats struct {
	// Volumes is the number of volumes compacted, Failed the compactions
	// that failed (the old volume stays).
	Volumes, Failed int64
	// Read is the bytes of old volumes walked, Written those of the new
	// ones, and Reclaimed the difference.
	Read, Written, Reclaimed int64
	Time                     time.Duration
}

type compactCounters struct {
	mu sync.Mutex
	s  CompactStats
}

// CompactStats reports the compactions so far.
func (v *Volumes) CompactStats() CompactStats {
	v.compacts.mu.Lock()
	defer v.compacts.mu.Unlock()
	return v.compacts.s
}

// GarbageBytes is the bytes of volumes that no index entry points to: what
// compaction could reclaim, tombstones included.
func (v *Volumes) GarbageBytes() int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var g int64
	for _, vol := range v.vols {
		g += vol.garbage()
	}
	return g
}

// garbage is under Volumes.mu.
func (vol *volume) garbage() int64 { return vol.size - superblockLen - vol.live }

// compactable lists the sealed volumes whose garbage share is over the
// threshold, the most garbage first.
func (v *Volumes) compactable() []*volume {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []*volume
	for _, vol := range v.vols {
		body := vol.size - superblockLen
		if vol != v.active && body > 0 && float64(vol.garbage()) > v.compactThreshold*float64(body) {
			out = append(out, vol)
		}
	}
	slices.SortFunc(out, func(a, b *volume) int { return int(b.garbage() - a.garbage()) })
	return out
}

// Compact compacts every volume over the threshold now, one after another.
// The background loop calls it; tests and operators may too.
func (v *Volumes) Compact(ctx context.Context) error {
	for _, vol := range v.compactable() {
		if err := v.compactVolume(ctx, vol); err != nil {
			return err
		}
	}
	return nil
}

// compactLoop runs Compact every compactInterval and whenever prompted,
// until ctx ends.
func (v *Volumes) compactLoop(ctx context.Context) {
	defer close(v.compactDone)
	t := time.NewTicker(compactInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-v.compactPoke:
		}
		if err := v.Compact(ctx); err != nil && ctx.Err() == nil {
			v.log.Error("volume compaction failed; the old volume stays and is tried again later", "err", err)
		}
	}
}

// pokeCompaction asks the loop to look for work without waiting.
func (v *Volumes) pokeCompaction() {
	select {
	case v.compactPoke <- struct{}{}:
	default:
	}
}

// move is a live record's old and new offsets.
type move struct {
	id       string
	from, to int64
}

// compactVolume rewrites vol with its live records and the tombstones that
// must stay, then swaps the new file in. Until the rename the old file is
// the volume; after it, the new one; a crash at any point leaves one of the
// two whole under the volume's name (a temp file left behind is removed at
// the next open).
func (v *Volumes) compactVolume(ctx context.Context, vol *volume) (err error) {
	v.compactMu.Lock()
	defer v.compactMu.Unlock()
	began := time.Now()
	v.mu.RLock()
	size, file := vol.size, vol.file.acquire()
	salt := vol.salt
	lowest := true
	for num := range v.vols {
		lowest = lowest && num >= vol.num
	}
	var live []volEntry
	v.index.Ascend(func(e volEntry) bool {
		if e.vol == vol.num {
			live = append(live, e)
		}
		return true
	})
	v.mu.RUnlock()
	defer file.release()
	slices.SortFunc(live, func(a, b volEntry) int { return int(a.off - b.off) })
	v.log.Info("volume compaction started", "volume", vol.num, "bytes", size, "live_blobs", len(live), "garbage_bytes", size-superblockLen-liveBytes(live))

	tmp := filepath.Join(v.dir, tempPrefix+"compact-"+volumeName(vol.num))
	_ = os.Remove(tmp) // a leftover of this store's own failed attempt
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return v.compactFailed(vol, fsError(err, "create %s", tmp))
	}
	renamed := false
	defer func() {
		if !renamed {
			nf.Close()
			if !v.crashed.Load() {
				_ = os.Remove(tmp)
			}
		}
	}()
	newSalt := rand.Uint32()
	for newSalt == salt {
		newSalt = rand.Uint32()
	}
	w := bufio.NewWriterSize(nf, 1<<20)
	_, _ = w.Write(superblock{num: vol.num, salt: newSalt}.encode())
	moves, written, err := v.copyLive(ctx, file, salt, newSalt, size, live, lowest, w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = fdatasync(nf)
	}
	if err != nil {
		return v.compactFailed(vol, fsError(err, "write the compacted volume %d", vol.num))
	}
	if v.crash(crashCompactWritten) {
		return errSimulatedCrash
	}

	v.mu.Lock()
	if err := os.Rename(tmp, vol.path); err != nil {
		v.mu.Unlock()
		return v.compactFailed(vol, fsError(err, "swap in the compacted volume %d", vol.num))
	}
	renamed = true
	if v.crash(crashCompactRenamed) {
		v.mu.Unlock()
		nf.Close()
		return errSimulatedCrash
	}
	var newLive int64
	for _, m := range moves {
		e, ok := v.index.Get(volEntry{id: m.id})
		if ok && e.vol == vol.num && e.off == m.from {
			e.off = m.to
			v.index.ReplaceOrInsert(e)
			newLive += recordLen(e.id, e.size)
		}
	}
	old := vol.file
	vol.f, vol.file, vol.salt, vol.size, vol.live = nf, newVolFile(nf), newSalt, written, newLive
	v.mu.Unlock()
	old.release()
	if err := syncDir(v.dir); err != nil {
		v.log.Warn("directory sync after a compaction failed; a crash may bring back the old volume, which is as good", "volume", vol.num, "err", err)
	}
	took := time.Since(began)
	v.compacts.mu.Lock()
	v.compacts.s.Volumes++
	v.compacts.s.Read += size
	v.compacts.s.Written += written
	v.compacts.s.Reclaimed += size - written
	v.compacts.s.Time += took
	v.compacts.mu.Unlock()
	v.log.Info("volume compacted", "volume", vol.num, "bytes_before", size, "bytes_after", written, "reclaimed", size-written,
		"blobs", len(moves), "took", took.Round(time.Millisecond), "mb_per_s", fmt.Sprintf("%.1f", float64(size)/took.Seconds()/1e6))
	// The checkpoint names the volume by its old salt: write one now rather
	// than let a crash send the next start through a full scan.
	v.sinceCkpt.Add(v.ckptEvery)
	if err := v.checkpoint(); err != nil {
		v.log.Warn("index checkpoint after a compaction failed; the next start scans more", "err", err)
	}
	return nil
}

func liveBytes(live []volEntry) int64 {
	var n int64
	for _, e := range live {
		n += recordLen(e.id, e.size)
	}
	return n
}

func (v *Volumes) compactFailed(vol *volume, err error) error {
	v.compacts.mu.Lock()
	v.compacts.s.Failed++
	v.compacts.mu.Unlock()
	return errs.Wrap(errs.KindOf(err), err, "compact volume %d", vol.num)
}

// copyLive walks the old volume (file, salt, size) and writes to w, in
// order, every live record (with a fresh header from the index: its data as
// it is) and every tombstone that must stay: all of them unless the volume
// is the lowest, before which no volume can hold a record a tombstone would
// still hide. It logs progress every 256 MiB.
func (v *Volumes) copyLive(ctx context.Context, file *volFile, salt, newSalt uint32, size int64, live []volEntry, lowest bool, w *bufio.Writer) ([]move, int64, error) {
	moves := make([]move, 0, len(live))
	out := int64(superblockLen)
	buf := make([]byte, 0, recordLen(string(make([]byte, MaxIDLen)), v.inlineMax))
	var hb [maxRecordHeader]byte
	nextLog := int64(256 << 20)
	off := int64(superblockLen)
	for off < size {
		if err := ctx.Err(); err != nil {
			return nil, 0, errs.Wrap(errs.Unavailable, err, "compaction stopped")
		}
		if off >= nextLog {
			v.log.Info("volume compaction progress", "read", off, "of", size, "written", out)
			nextLog += 256 << 20
		}
		if len(live) > 0 && live[0].off == off {
			e := live[0]
			live = live[1:]
			n := recordLen(e.id, e.size)
			buf = buf[:n]
			clear(buf[headerLen(e.id):])
			if _, err := file.f.ReadAt(buf[headerLen(e.id):headerLen(e.id)+e.size], e.dataOff()); err != nil {
				return nil, 0, err
			}
			sealHeader(buf, newSalt, recordHeader{id: e.id, size: e.size, sum: e.sum})
			if _, err := w.Write(buf); err != nil {
				return nil, 0, err
			}
			moves = append(moves, move{id: e.id, from: off, to: out})
			out += n
			off += n
			continue
		}
		limit := size
		if len(live) > 0 {
			limit = live[0].off
		}
		k := min(int64(len(hb)), limit-off)
		if _, err := file.f.ReadAt(hb[:k], off); err != nil {
			return nil, 0, err
		}
		h, err := parseHeader(hb[:k], salt)
		if err != nil || off+recordLen(h.id, h.size) > limit {
			off += recordAlign // damage: look for the next header
			continue
		}
		if h.tombstone() && !lowest {
			buf = buf[:recordLen(h.id, 0)]
			sealHeader(buf, newSalt, h)
			if _, err := w.Write(buf); err != nil {
				return nil, 0, err
			}
			out += int64(len(buf))
		}
		off += recordLen(h.id, h.size)
	}
	if len(live) > 0 {
		return nil, 0, errors.New("index entries past the end of the volume")
	}
	return moves, out, nil
}
