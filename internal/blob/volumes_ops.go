// The volumes layout's operations: Receive, Stat, Fetch, Rehash, Remove and
// Enumerate, each over the index first and the Disk of large blobs second.

package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"sync"

	"github.com/dfs-project/dfs/internal/errs"
)

// entry returns the index's record of id.
func (v *Volumes) entry(id string) (volEntry, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.index.Get(volEntry{id: id})
}

// entryFile returns the index's record of id and its volume's file, which
// the caller releases.
func (v *Volumes) entryFile(id string) (volEntry, *volFile, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e, ok := v.index.Get(volEntry{id: id})
	if !ok {
		return volEntry{}, nil, false
	}
	return e, v.vols[e.vol].file.acquire(), true
}

// hashEntry hashes the data of e as it is in its volume file now.
func (v *Volumes) hashEntry(ctx context.Context, e volEntry, file *volFile) (string, error) {
	sum, _, err := hashReader(ctx, io.NewSectionReader(file.f, e.dataOff(), e.size))
	if err != nil {
		return "", fsError(err, "blob %s: read from volume %d", e.id, e.vol)
	}
	return sum, nil
}

// Receive implements Receiver.
func (v *Volumes) Receive(ctx context.Context, id, checksum string, size int64, r io.Reader) (Info, bool, error) {
	if err := ValidateID(id); err != nil {
		return Info{}, false, err
	}
	sum, err := ValidateChecksum(checksum)
	if err != nil {
		return Info{}, false, err
	}
	if v.closed.Load() {
		return Info{}, false, errClosed()
	}
	unlock, err := v.locks.lock(ctx, id)
	if err != nil {
		return Info{}, false, err
	}
	defer unlock()

	inVolume, onDisk := false, false
	if e, file, ok := v.entryFile(id); ok {
		actual, err := v.hashEntry(ctx, e, file)
		file.release()
		if err != nil {
			return Info{}, false, err
		}
		if held := hex.EncodeToString(e.sum[:]); actual == held {
			if held == sum {
				return e.info(), false, nil
			}
			return Info{}, false, errs.E(errs.Conflict, "blob %s is already stored with checksum %s, not %s", id, held, sum)
		}
		inVolume = true // corrupt: replaced below
	} else {
		h, err := v.disk.lookup(id)
		if err != nil {
			return Info{}, false, err
		}
		onDisk = h.present
	}
	if size > v.inlineMax || onDisk {
		// Large, or held as a file: the Disk answers the no-op and conflict
		// cases itself, and replaces its own corrupt copy.
		if inVolume {
			if err := v.tombstone(id); err != nil {
				return Info{}, false, err
			}
		}
		if size <= v.inlineMax && size >= 0 {
			return v.replaceFileWithRecord(ctx, id, sum, size, r)
		}
		return v.disk.Receive(ctx, id, sum, size, r)
	}
	return v.receiveSmall(ctx, id, sum, size, r, inVolume)
}

// replaceFileWithRecord handles a small write of an id the Disk holds: a
// held intact copy is the Disk's to confirm or refuse; a corrupt one is
// removed first, then the new copy appended.
func (v *Volumes) replaceFileWithRecord(ctx context.Context, id, sum string, size int64, r io.Reader) (Info, bool, error) {
	h, err := v.disk.lookup(id)
	if err != nil {
		return Info{}, false, err
	}
	if h.present && h.sumErr == nil {
		actual, _, err := v.disk.hashBlob(ctx, id)
		if err != nil {
			return Info{}, false, err
		}
		if actual == h.sum {
			return v.disk.Receive(ctx, id, sum, size, r)
		}
	}
	if err := v.disk.Remove(ctx, id); err != nil {
		return Info{}, false, err
	}
	return v.receiveSmall(ctx, id, sum, size, r, false)
}

// receiveSmall reads a body of at most inlineMax bytes (or of unknown size)
// into memory and appends it; an unknown size that turns out larger goes to
// the Disk with what was read put back in front of the rest, after a
// tombstone for the corrupt copy a volume holds, if any (inVolume).
func (v *Volumes) receiveSmall(ctx context.Context, id, sum string, size int64, r io.Reader, inVolume bool) (Info, bool, error) {
	req, read, err := v.smallRecord(ctx, id, sum, size, r)
	if err != nil {
		return Info{}, false, err
	}
	if req == nil {
		if inVolume {
			if err := v.tombstone(id); err != nil {
				return Info{}, false, err
			}
		}
		return v.disk.Receive(ctx, id, sum, -1, io.MultiReader(bytes.NewReader(read), r))
	}
	if err := v.commit(req); err != nil {
		v.acct.release(req.reserved)
		return Info{}, false, err
	}
	return req.info(), true, nil
}

// smallRecord reads a body of at most inlineMax bytes into a record ready
// to append, its bytes reserved, and checks it against sum. A body of
// unknown size (size < 0) that turns out larger gives no record but the
// bytes read so far, which the caller puts back in front of the rest.
func (v *Volumes) smallRecord(ctx context.Context, id, sum string, size int64, r io.Reader) (*appendReq, []byte, error) {
	if size >= 0 {
		if err := v.acct.checkRoom(size); err != nil {
			return nil, nil, err
		}
	}
	hl := headerLen(id)
	// One byte beyond the declared size lets receiveCopy see a body that
	// is longer than declared.
	limit := size + 1
	if size < 0 {
		limit = v.inlineMax + 1
	}
	rec := make([]byte, hl, alignUp(hl+limit))
	buf := bytes.NewBuffer(rec)
	w := &reservingWriter{w: buf, acct: v.acct}
	n, actual, err := receiveCopy(ctx, w, io.LimitReader(r, limit), size)
	if err != nil {
		v.acct.release(w.reserved)
		return nil, nil, fsError(err, "blob %s: receive", id)
	}
	if size < 0 && n > v.inlineMax {
		v.acct.release(w.reserved)
		return nil, buf.Bytes()[hl:], nil
	}
	if actual != sum {
		v.acct.release(w.reserved)
		return nil, nil, errs.E(errs.Corrupt, "blob %s: body hashes to %s but %s was declared", id, actual, sum)
	}
	rec = buf.Bytes()
	for int64(len(rec))%recordAlign != 0 {
		rec = append(rec, 0)
	}
	h := recordHeader{id: id, size: n}
	copy(h.sum[:], mustHex(actual))
	return &appendReq{h: h, rec: rec, reserved: w.reserved}, nil, nil
}

// ReceiveBatch implements BatchReceiver. A new small blob, the common case,
// is read and checked here, and the records of all of them are handed to
// the appender together and waited for by this one goroutine: a batch of
// copies costs one wake-up when its group's sync returns, not one per copy.
// Every other item (an id the store holds in any form, one another write
// holds, a repeat of an id earlier in the batch, a large or invalid one)
// goes through Receive on a goroutine of its own, exactly as a PUT would.
func (v *Volumes) ReceiveBatch(ctx context.Context, items []BatchItem) []BatchResult {
	out := make([]BatchResult, len(items))
	type held struct {
		i      int
		req    *appendReq
		unlock func()
	}
	fast := make([]held, 0, len(items))
	var slow sync.WaitGroup
	inBatch := make(map[string]struct{}, len(items))
	for i, it := range items {
		_, repeat := inBatch[it.ID]
		inBatch[it.ID] = struct{}{}
		var unlock func()
		if !repeat {
			unlock = v.newSmallLocked(it)
		}
		if unlock == nil {
			slow.Go(func() {
				info, created, err := v.Receive(ctx, it.ID, it.Checksum, int64(len(it.Data)), bytes.NewReader(it.Data))
				out[i] = BatchResult{Info: info, Created: created, Err: err}
			})
			continue
		}
		req, _, err := v.smallRecord(ctx, it.ID, it.Checksum, int64(len(it.Data)), bytes.NewReader(it.Data))
		if err != nil {
			unlock()
			out[i].Err = err
			continue
		}
		fast = append(fast, held{i: i, req: req, unlock: unlock})
	}
	reqs := make([]*appendReq, len(fast))
	for j, f := range fast {
		reqs[j] = f.req
	}
	queued := v.enqueue(reqs...)
	for _, f := range fast {
		err := queued
		if err == nil {
			err = <-f.req.done
		}
		if err != nil {
			v.acct.release(f.req.reserved)
			out[f.i].Err = err
		} else {
			out[f.i] = BatchResult{Info: f.req.info(), Created: true}
		}
		f.unlock()
	}
	slow.Wait()
	return out
}

// newSmallLocked takes the lock of it.ID, without waiting, if it is a valid
// small blob that the store does not hold in any form, and returns its
// unlock; nil means the item is for Receive.
func (v *Volumes) newSmallLocked(it BatchItem) (unlock func()) {
	if int64(len(it.Data)) > v.inlineMax || v.closed.Load() || ValidateID(it.ID) != nil {
		return nil
	}
	if sum, err := ValidateChecksum(it.Checksum); err != nil || sum != it.Checksum {
		return nil
	}
	unlock, ok := v.locks.tryLock(it.ID)
	if !ok {
		return nil
	}
	if _, held := v.entry(it.ID); held {
		unlock()
		return nil
	}
	if h, err := v.disk.lookup(it.ID); err != nil || h.present {
		unlock()
		return nil
	}
	return unlock
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic("blob: checksum is not hex: " + s)
	}
	return b
}

// tombstone durably records that id, held in a volume, is removed.
func (v *Volumes) tombstone(id string) error {
	h := recordHeader{id: id, flags: flagTombstone, sum: sha256.Sum256(nil)}
	return v.commit(&appendReq{h: h, rec: make([]byte, recordLen(id, 0))})
}

// Stat implements Statter.
func (v *Volumes) Stat(ctx context.Context, id string) (Info, error) {
	if err := v.usable(id); err != nil {
		return Info{}, err
	}
	if e, ok := v.entry(id); ok {
		return e.info(), nil
	}
	return v.disk.Stat(ctx, id)
}

func (v *Volumes) usable(id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if v.closed.Load() {
		return errClosed()
	}
	return nil
}

// Fetch implements Fetcher. A small blob is served by reads of its volume at
// its offset; a large one is the Disk's *os.File.
func (v *Volumes) Fetch(ctx context.Context, id string) (io.ReadSeekCloser, Info, error) {
	if err := v.usable(id); err != nil {
		return nil, Info{}, err
	}
	if e, file, ok := v.entryFile(id); ok {
		return &volumeReader{SectionReader: io.NewSectionReader(file.f, e.dataOff(), e.size), file: file}, e.info(), nil
	}
	return v.disk.Fetch(ctx, id)
}

// Rehash implements Rehasher.
func (v *Volumes) Rehash(ctx context.Context, id string) (Check, error) {
	if err := v.usable(id); err != nil {
		return Check{}, err
	}
	if e, file, ok := v.entryFile(id); ok {
		actual, err := v.hashEntry(ctx, e, file)
		file.release()
		if err != nil {
			return Check{}, err
		}
		return Check{ID: id, Size: e.size, Stored: hex.EncodeToString(e.sum[:]), Actual: actual}, nil
	}
	return v.disk.Rehash(ctx, id)
}

// Remove implements Remover: a tombstone for a blob in a volume, the Disk's
// removal for a file.
func (v *Volumes) Remove(ctx context.Context, id string) error {
	if err := v.usable(id); err != nil {
		return err
	}
	unlock, err := v.locks.lock(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := v.entry(id); ok {
		return v.tombstone(id)
	}
	return v.disk.Remove(ctx, id)
}

// Enumerate implements Enumerator, merging the index's ids with the Disk's.
func (v *Volumes) Enumerate(ctx context.Context, after string, limit int) ([]Info, error) {
	files, err := v.disk.Enumerate(ctx, after, limit) // validates after and limit
	if err != nil {
		return nil, err
	}
	var small []Info
	v.mu.RLock()
	v.index.AscendGreaterOrEqual(volEntry{id: after}, func(e volEntry) bool {
		if e.id == after {
			return true
		}
		small = append(small, e.info())
		return len(small) < limit
	})
	v.mu.RUnlock()
	out := make([]Info, 0, min(limit, len(files)+len(small)))
	for len(out) < limit && (len(files) > 0 || len(small) > 0) {
		switch {
		case len(files) == 0 || len(small) > 0 && small[0].ID < files[0].ID:
			out, small = append(out, small[0]), small[1:]
		case len(small) == 0 || files[0].ID < small[0].ID:
			out, files = append(out, files[0]), files[1:]
		default: // both: the index's copy is the one served
			out, small, files = append(out, small[0]), small[1:], files[1:]
		}
	}
	return out, nil
}
