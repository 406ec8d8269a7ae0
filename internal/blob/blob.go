// Package blob stores immutable blobs keyed by id, each with the SHA-256 of its
// bytes, the way a dfs storage node keeps them.
//
// The store is cut into small interfaces (after Perkeep's blobserver): a
// Receiver writes, a Statter and a Fetcher read, a Remover deletes, an
// Enumerator lists in id order, a Rehasher re-reads a blob to check it against
// its recorded checksum, a UsageReporter counts and an Identifier names the
// medium, so that a wiped one is told from the one that held the blobs.
// Store composes them. Two
// implementations share one conformance suite (package blobtest): Disk, the
// sharded directory tree a storage node serves, and Memory, for tests that
// need to inject faults.
//
// Blobs are immutable. Writing an id that is already held succeeds without
// rewriting when the declared checksum matches an intact copy, replaces a copy
// whose bytes no longer match its recorded checksum, and is a conflict
// otherwise.
package blob

import (
	"context"
	"io"
	"log/slog"

	"github.com/dfs-project/dfs/internal/errs"
)

// Info describes a stored blob.
type Info struct {
	ID string
	// Size is the blob's length in bytes.
	Size int64
	// Checksum is the SHA-256 of the blob as recorded when it was written, in
	// lower-case hex. It is the recorded value, not a fresh hash of the bytes:
	// use Rehash to compare the two.
	Checksum string
}

// Check is the result of re-hashing a stored blob.
type Check struct {
	ID   string
	Size int64
	// Stored is the checksum recorded when the blob was written; empty when the
	// record is unreadable.
	Stored string
	// Actual is the SHA-256 of the bytes on the medium now.
	Actual string
}

// Intact reports whether the blob's bytes still hash to their recorded checksum.
func (c Check) Intact() bool { return c.Stored != "" && c.Stored == c.Actual }

// Usage counts what a store holds and how much room it has left.
type Usage struct {
	// Blobs is the number of blobs held.
	Blobs int64
	// BytesUsed is the sum of their sizes.
	BytesUsed int64
	// FreeBytes is how many more bytes of blobs the store can take: the free
	// space of the device, further bounded by the capacity limit when one is set.
	FreeBytes int64
	// TotalBytes is the size of the device (for Memory: the capacity limit).
	TotalBytes int64
	// CapacityBytes is the configured limit on BytesUsed; 0 means unlimited.
	CapacityBytes int64
}

// SyncMode is how a Disk puts a write on stable storage before acknowledging
// it. Both modes give the same guarantee (see Disk); they differ in cost.
type SyncMode string

const (
	// SyncFile fsyncs every file and directory a write touches, four syncs per
	// write. It works on every operating system.
	SyncFile SyncMode = "file"
	// SyncBatch syncs the whole file system twice per write, sharing each
	// sync with every write waiting for one at the same time. It needs
	// Linux 5.8 or later (BatchSyncSupported).
	SyncBatch SyncMode = "batch"
)

// BatchSyncSupported returns nil when SyncBatch can be used on this system,
// or the reason it cannot.
func BatchSyncSupported() error { return batchSupport() }

// DefaultSyncMode is SyncBatch where it is supported, SyncFile elsewhere.
func DefaultSyncMode() SyncMode {
	if BatchSyncSupported() == nil {
		return SyncBatch
	}
	return SyncFile
}

// Options configure a store.
type Options struct {
	// CapacityBytes bounds the bytes of blobs the store holds (0 = unlimited).
	// A write that would exceed it fails with errs.NoSpace, as if the device
	// were full.
	CapacityBytes int64
	// SyncMode is how a Disk makes each write durable ("" = DefaultSyncMode).
	// Memory ignores it.
	SyncMode SyncMode
	// BatchSyncMax is, in batch mode, the largest copy (by declared size)
	// that shares the file system syncs; a larger one is written with file
	// mode's own fsyncs, so that it neither waits for everyone else's dirty
	// data nor makes them wait for its own. <= 0 means DefaultBatchSyncMax.
	BatchSyncMax int64
	// VolumeSize is, in the volumes layout, the length at which a volume
	// file is sealed and a new one started (<= 0 means DefaultVolumeSize).
	VolumeSize int64
	// InlineMax is, in the volumes layout, the largest blob appended to a
	// volume; larger ones are kept as in the files layout (<= 0 means
	// DefaultInlineMax).
	InlineMax int64
	// CompactThreshold is, in the volumes layout, the share of a sealed
	// volume that garbage must pass for it to be compacted, between 0 and 1
	// (<= 0 means DefaultCompactThreshold).
	CompactThreshold float64
	// Logger receives what a Volumes store does in the background
	// (checkpoints, records set aside at recovery); nil discards it.
	Logger *slog.Logger
	// Owner names the kind of process opening a Disk ("storage node"), for
	// the message a second process opening the same directory gets while
	// this one holds it. "" means "process". Memory ignores it.
	Owner string
}

// Defaults of Options.
const (
	// DefaultBatchSyncMax is Options.BatchSyncMax when none is given.
	DefaultBatchSyncMax = 1 << 20
	// DefaultVolumeSize is Options.VolumeSize when none is given.
	DefaultVolumeSize = 1 << 30
	// DefaultInlineMax is Options.InlineMax when none is given.
	DefaultInlineMax = 1 << 20
)

// Receiver writes blobs.
type Receiver interface {
	// Receive stores the bytes of r under id. checksum is the SHA-256 the sender
	// declares (hex); size is the length the sender declares, or -1 if unknown.
	// The bytes are hashed while they are written and nothing is published
	// unless they hash to checksum (errs.Corrupt otherwise) and, when size >= 0,
	// their length is size (errs.Invalid otherwise).
	//
	// If the store already holds an intact copy of id with the same checksum,
	// Receive returns its Info with created == false without reading r. A held
	// copy whose bytes no longer match its recorded checksum is replaced. An
	// intact copy with another checksum is an errs.Conflict. A full device or
	// an exceeded capacity limit is an errs.NoSpace.
	Receive(ctx context.Context, id, checksum string, size int64, r io.Reader) (info Info, created bool, err error)
}

// BatchItem is one blob of a ReceiveBatch: its id, the SHA-256 its sender
// declares (hex) and its bytes.
type BatchItem struct {
	ID       string
	Checksum string
	Data     []byte
}

// BatchResult is what Receive would have answered for one BatchItem.
type BatchResult struct {
	Info    Info
	Created bool
	Err     error
}

// BatchReceiver stores many small blobs given whole in memory at once, each
// with Receive's rules and answer, more cheaply than a Receive each.
type BatchReceiver interface {
	// ReceiveBatch stores items and answers each, in the same order, once
	// every one has its outcome.
	ReceiveBatch(ctx context.Context, items []BatchItem) []BatchResult
}

// Statter describes blobs without reading them.
type Statter interface {
	// Stat returns the Info of id, or an errs.NotFound error.
	Stat(ctx context.Context, id string) (Info, error)
}

// Fetcher reads blobs.
type Fetcher interface {
	// Fetch opens id for reading. The caller closes the reader. The bytes are
	// served as stored, even if they no longer match Info.Checksum: verifying
	// them is the reader's job.
	Fetch(ctx context.Context, id string) (io.ReadSeekCloser, Info, error)
}

// Remover deletes blobs.
type Remover interface {
	// Remove deletes id. Removing an absent blob is not an error.
	Remove(ctx context.Context, id string) error
}

// Enumerator lists blobs.
type Enumerator interface {
	// Enumerate returns up to limit blobs whose ids sort after the cursor after
	// ("" = from the start), in increasing id order. limit must be positive.
	Enumerate(ctx context.Context, after string, limit int) ([]Info, error)
}

// Rehasher re-reads blobs to check them.
type Rehasher interface {
	// Rehash hashes the stored bytes of id now and reports them against the
	// recorded checksum.
	Rehash(ctx context.Context, id string) (Check, error)
}

// UsageReporter reports what a store holds. It is cheap: it does not walk the
// store.
type UsageReporter interface {
	Usage(ctx context.Context) (Usage, error)
}

// Checker reports whether a store can serve at all. A full device is not a
// failure: a full store still serves reads.
type Checker interface {
	Check(ctx context.Context) error
}

// Store is a complete blob store.
type Store interface {
	Receiver
	Statter
	Fetcher
	Remover
	Enumerator
	Rehasher
	UsageReporter
	Checker
	Identifier
	io.Closer
}

func errClosed() error { return errs.E(errs.Unavailable, "blob store is closed") }

func errNotFound(id string) error { return errs.E(errs.NotFound, "blob %s not found", id) }
