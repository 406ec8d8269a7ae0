package blob

import (
	"hash/maphash"
	"sync/atomic"
)

// heldFilterBits is the size of a Disk's heldFilter: 128 KiB. With n blobs
// in the tree about n/heldFilterBits of the ids it has never seen still
// cost a lookup's system calls (6 % at 65,536 blobs, 63 % at a million);
// the answer is right either way.
const heldFilterBits = 1 << 20

// heldFilter tells a Disk, without a system call, that an id is certainly
// not in its tree. In the volumes layout every new small blob asks the Disk
// whether it holds the id as a file (a large or older copy), and the answer
// is nearly always no: an open(2) of a sidecar that does not exist, a tenth
// of the node's CPU per 4 KiB copy.
//
// It is a one-hash Bloom filter: a bit per hash of the ids found in the tree
// at open and of every id a write has begun on since, never cleared, so a
// clear bit means the id has no file. A write sets its bit before it
// creates a file, so a lookup that finds the bit clear happened before any
// file of that id existed. Files put into the tree behind the store's back
// while it runs are seen after the next open, as the blob count is.
type heldFilter struct {
	seed  maphash.Seed
	words [heldFilterBits / 64]atomic.Uint64
}

func newHeldFilter() *heldFilter { return &heldFilter{seed: maphash.MakeSeed()} }

func (f *heldFilter) bit(id string) (word int, mask uint64) {
	h := maphash.String(f.seed, id) % heldFilterBits
	return int(h / 64), 1 << (h % 64)
}

// add records that id may have a file.
func (f *heldFilter) add(id string) {
	w, m := f.bit(id)
	f.words[w].Or(m)
}

// mayHold is false when id certainly has no file.
func (f *heldFilter) mayHold(id string) bool {
	w, m := f.bit(id)
	return f.words[w].Load()&m != 0
}
