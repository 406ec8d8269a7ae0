// The volumes layout: small blobs appended to large volume files behind an
// in-memory index, large ones kept by a Disk in the same directory. This
// file holds the type, its promises and opening a directory; the other
// volumes_ files hold the byte formats (volumes_record.go), the appender
// (volumes_append.go), the operations (volumes_ops.go), recovery
// (volumes_recover.go), checkpoints (volumes_checkpoint.go) and compaction
// (volumes_compact.go).

package blob

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/dfs-project/dfs/internal/errs"
)

// Volumes is a Store in the volumes layout:
//
//	<root>/volumes/NNNNNNNN.vol   volume files, numbered from 1, appended to
//	<root>/volumes/index          the last index checkpoint
//	<root>/volumes/.tmp-*         a checkpoint being written (removed at open)
//	<root>/ab/cd/...              blobs above Options.InlineMax, as Disk keeps them
//	<root>/layout, disk-id, .lock as for Disk
//
// A blob of at most InlineMax bytes is one record in a volume (its header
// names the id, length and SHA-256 of the data, and carries a CRC); a
// removal is a tombstone record. The index maps each id to its last record
// and lives in memory; the record order (volume number, then offset) is the
// order the writes happened in, so the last record of an id is its state.
//
// Writes are committed in groups: one appender per store places the records
// handed to it in the active volume and makes a group durable with one
// fdatasync, and only then updates the index and acknowledges it. Small
// records it writes itself, each batch with one pwritev; a record of
// ownWriteMin bytes or more gets the next offset and is copied there by a
// goroutine of its own, so that large copies run on every core. While one
// group's sync runs, the records that arrive form the next group, whose sync
// starts when the first returns and covers only the contiguous written
// prefix: never a record with an unwritten one before it. A crash therefore
// loses only records nobody was told about. A failed sync fails every record
// of its group and of the group behind it, and cuts the volume back to where
// its group began (the length the last successful sync covered); a failed
// write (a full disk included) fails its own records and every one placed
// after them, and cuts them off once no record's own write is running, so
// no half record is ever followed by a good one. When appending a group would take
// the active volume past Options.VolumeSize, the volume is sealed and a new
// one created (its superblock and directory entry synced first).
//
// At open, the index is loaded from the last checkpoint, which records how
// far into each volume it reaches, and the records after that are scanned,
// their header CRCs and data checksums checked. A bad record with no good
// record after it is a torn tail, which is cut off; one followed by good
// records is damage in the middle of a volume: it is set aside (never
// indexed, counted and logged) and the scan resumes at the next good record.
// Checkpoints are written in the background every checkpointEvery records
// and at Close, each a temp file synced and renamed over the last one, so a
// crash leaves either checkpoint whole. A checkpoint that does not match the
// volumes (a volume missing or shorter than it claims) is ignored and every
// volume scanned from its start.
//
// Deletes and replacements leave garbage behind. A sealed volume whose
// garbage passes Options.CompactThreshold of its length is compacted in the
// background while the store serves: its live records (and the tombstones
// that still hide older records) are copied in order to a temp file, which
// is synced and renamed over the volume; the index moves to the new offsets
// in the same critical section as the rename, and readers in flight keep
// the old file until they close. Records keep their volume's number, so the
// order of writes, and with it the meaning of every record, is unchanged.
//
// Replacing a corrupt copy and moving an id between the two kinds of
// storage (a small blob replacing a large corrupt one, or the other way) first
// removes the old copy durably, then writes the new one, so that a crash
// in between leaves the blob absent, never two copies.
type Volumes struct {
	root, dir string
	disk      *Disk
	acct      *accounting
	log       *slog.Logger
	volSize   int64
	inlineMax int64
	locks     idLocks
	closed    atomic.Bool

	// mu guards the index, the volumes' lengths and live byte counts, and
	// the active volume.
	mu     sync.RWMutex
	index  *btree.BTreeG[volEntry]
	vols   map[uint32]*volume
	active *volume

	// submit guards sending on reqs against Close closing it.
	submit       sync.RWMutex
	reqs         chan *appendReq
	appenderDone chan struct{}
	failed       atomic.Pointer[error]
	stats        syncCounters

	ckptMu      sync.Mutex // one checkpoint at a time
	ckptRunning atomic.Bool
	ckptWG      sync.WaitGroup // the background checkpoint, which Close waits for
	sinceCkpt   atomic.Int64   // records appended since the last checkpoint
	ckptEvery   int64

	compactThreshold float64
	compactMu        sync.Mutex // one compaction at a time
	compacts         compactCounters
	compactPoke      chan struct{}
	compactStop      context.CancelFunc
	compactDone      chan struct{}

	recovery VolumeRecovery

	// crashAt names a step at which the store stops as if its process died
	// there (volumes_append.go lists them); tests use it for the crash
	// windows.
	crashAt atomic.Value // string
	crashed atomic.Bool
	// onCrash, when set, is called at the crashAt step before the store
	// stops; a test's child process kills itself there with SIGKILL.
	onCrash func(step string)
	// submitted, when set, is called each time a record has been handed to
	// the appender; tests use it to know when every writer is queued.
	submitted func()
	// landed, when set, is called each time the appender has heard that a
	// record's own write finished.
	landed func()
}

var _ Store = (*Volumes)(nil)

// volEntry is the index's record of one blob.
type volEntry struct {
	id   string
	vol  uint32
	off  int64 // of the record
	size int64
	sum  [32]byte
}

func (e volEntry) dataOff() int64 { return e.off + headerLen(e.id) }

func (e volEntry) info() Info {
	return Info{ID: e.id, Size: e.size, Checksum: hex.EncodeToString(e.sum[:])}
}

func entryLess(a, b volEntry) bool { return a.id < b.id }

func newIndex() *btree.BTreeG[volEntry] { return btree.NewG(32, entryLess) }

// volume is one open volume file.
type volume struct {
	num, salt uint32
	path      string
	// f is the open file; file counts the readers of it. Compaction
	// replaces both (under Volumes.mu); the appender uses f of the active
	// volume alone, which is never compacted.
	f    *os.File
	file *volFile
	// size is the length covered by the last successful sync: everything
	// below it is durable and indexed. Under Volumes.mu.
	size int64
	// end is the length appended so far, synced or not: the appender's
	// alone, and only of the active volume.
	end int64
	// live is the bytes of the records the index points to. Under Volumes.mu.
	live int64
	// gate is held shared by each goroutine writing a record of its own
	// into the volume, and exclusively while the appender cuts the volume
	// back, so that no such write runs during a cut (volumes_append.go).
	gate sync.RWMutex
}

// VolumeRecovery is what OpenVolumes found and repaired.
type VolumeRecovery struct {
	// Files is what the Disk holding the large blobs found.
	Files Recovery
	// Volumes is the number of volume files; Records the records scanned
	// after the checkpoint (all of them when there was none).
	Volumes int
	Records int64
	// Checkpoint reports whether the index started from a checkpoint, and
	// CheckpointIgnored why one was not used ("" when it was, or none existed).
	Checkpoint        bool
	CheckpointIgnored string
	// TornBytes is what was cut off the ends of volumes: writes a crash
	// interrupted, never acknowledged.
	TornBytes int64
	// Quarantined counts damaged stretches in the middle of volumes that
	// were set aside, and QuarantinedBytes their length.
	Quarantined      int
	QuarantinedBytes int64
	// Blobs and Bytes are what the index holds after recovery.
	Blobs int64
	Bytes int64
}

// checkpointEvery is how many records may be appended after the last
// checkpoint before another is written.
const checkpointEvery = 1 << 16

// OpenVolumes opens (creating it if needed) a store in the volumes layout
// rooted at dir: the directory is locked, its layout and identity checked
// as OpenDisk does, the large blobs counted, and the index rebuilt.
func OpenVolumes(dir string, opts Options) (*Volumes, error) {
	if opts.CapacityBytes < 0 {
		return nil, errs.E(errs.Invalid, "blob store: capacity %d is negative", opts.CapacityBytes)
	}
	v := &Volumes{acct: &accounting{capacity: opts.CapacityBytes}, volSize: opts.VolumeSize, inlineMax: opts.InlineMax,
		log: opts.Logger, vols: make(map[uint32]*volume), index: newIndex(), ckptEvery: checkpointEvery,
		reqs: make(chan *appendReq, maxGroupRecords), appenderDone: make(chan struct{}),
		compactThreshold: opts.CompactThreshold, compactPoke: make(chan struct{}, 1), compactDone: make(chan struct{})}
	if v.compactThreshold <= 0 {
		v.compactThreshold = DefaultCompactThreshold
	}
	if v.compactThreshold >= 1 {
		return nil, errs.E(errs.Invalid, "blob store: compaction threshold %g must be below 1", v.compactThreshold)
	}
	if v.volSize <= 0 {
		v.volSize = DefaultVolumeSize
	}
	if v.inlineMax <= 0 {
		v.inlineMax = DefaultInlineMax
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if min := int64(superblockLen) + recordLen(string(make([]byte, MaxIDLen)), v.inlineMax); v.volSize < min {
		return nil, errs.E(errs.Invalid, "blob store: volume size %d cannot hold a record of the largest inline blob (%d bytes); it must be at least %d", v.volSize, v.inlineMax, min)
	}
	d, err := openDiskLayout(dir, opts, LayoutVolumes, v.acct)
	if err != nil {
		return nil, err
	}
	v.disk, v.root = d, d.root
	v.dir = filepath.Join(v.root, volumesDirName)
	v.recovery.Files = d.recovery
	if err := v.recover(); err != nil {
		v.closeFiles()
		d.Close()
		return nil, err
	}
	go v.appender()
	ctx, stop := context.WithCancel(context.Background())
	v.compactStop = stop
	if backgroundCompaction {
		go v.compactLoop(ctx)
		v.pokeCompaction()
	} else {
		close(v.compactDone)
	}
	return v, nil
}

const volumesDirName = "volumes"

// backgroundCompaction is whether stores compact by themselves; tests that
// call Compact at chosen moments turn it off.
var backgroundCompaction = true

// Dir returns the store's absolute root directory.
func (v *Volumes) Dir() string { return v.root }

// Identity implements Identifier.
func (v *Volumes) Identity() string { return v.disk.identity }

// Recovery reports what OpenVolumes found and repaired.
func (v *Volumes) Recovery() VolumeRecovery { return v.recovery }

// SyncMode reports how the large blobs are made durable; small ones always
// share their volume's fdatasyncs.
func (v *Volumes) SyncMode() SyncMode { return v.disk.mode }

// SyncStats counts the shared syncs of the large blobs in batch mode, as
// Disk.SyncStats does.
func (v *Volumes) SyncStats() SyncStats { return v.disk.SyncStats() }

// GroupCommits counts the volumes' group commits: Syncs is the number of
// groups (one fdatasync each), Waits the records they committed.
func (v *Volumes) GroupCommits() SyncStats { return v.stats.snapshot() }

// Usage implements UsageReporter.
func (v *Volumes) Usage(ctx context.Context) (Usage, error) { return v.disk.Usage(ctx) }

// Check implements Checker: the directory must pass Disk's checks, and no
// volume may have been left in doubt by a failure to cut it back.
func (v *Volumes) Check(ctx context.Context) error {
	if v.closed.Load() {
		return errClosed()
	}
	if err := v.failure(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "data directory %s", v.root)
	}
	return v.disk.Check(ctx)
}

// failure is the error that stopped the store's writes, or nil.
func (v *Volumes) failure() error {
	if p := v.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (v *Volumes) fail(err error) {
	v.failed.CompareAndSwap(nil, &err)
}

// Close stops the appender once the records it was given are committed,
// writes a last checkpoint and closes the files. Later calls fail with
// errs.Unavailable.
func (v *Volumes) Close() error {
	if v.closed.Swap(true) {
		return nil
	}
	v.compactStop()
	<-v.compactDone
	v.submit.Lock()
	close(v.reqs)
	v.submit.Unlock()
	<-v.appenderDone
	v.ckptWG.Wait() // the appender started it; nothing may write once the lock is gone
	var err error
	if !v.crashed.Load() && v.failure() == nil {
		if cerr := v.checkpoint(); cerr != nil {
			v.log.Warn("final index checkpoint failed; the next start scans more", "err", cerr)
		}
	}
	err = errors.Join(err, v.closeFiles(), v.disk.Close())
	return err
}

func (v *Volumes) closeFiles() error {
	for _, vol := range v.vols {
		vol.file.release()
	}
	return nil
}

// volFile is an open volume file shared by its volume and the readers in
// flight: it is closed when the last of them lets go, so that a reader
// never sees a compacted or closed store's file vanish under it.
type volFile struct {
	f    *os.File
	refs atomic.Int64
}

func newVolFile(f *os.File) *volFile {
	vf := &volFile{f: f}
	vf.refs.Store(1) // the volume's own
	return vf
}

func (vf *volFile) acquire() *volFile { vf.refs.Add(1); return vf }

func (vf *volFile) release() {
	if vf.refs.Add(-1) == 0 {
		_ = vf.f.Close() // read-only use by now: nothing to lose
	}
}

// volumeReader serves a blob from its volume file, letting go of the file
// when closed.
type volumeReader struct {
	*io.SectionReader
	file *volFile
	once sync.Once
}

func (r *volumeReader) Close() error {
	r.once.Do(r.file.release)
	return nil
}
