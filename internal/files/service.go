// Package files is the coordinator's file service: upload with replicated,
// failover-aware writes, download with transparent failover and checksum
// verification, metadata, listing, delete and on-demand verification.
//
// The service talks to storage nodes only through the small Nodes interface
// and learns placement only from the Cluster's current ring snapshot; where a
// file's copies belong after a failure is decided elsewhere, by the reconciler.
package files

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files/contentcache"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/reconcile"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/signedurl"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
	"github.com/dfs-project/dfs/internal/taskq"
)

// Nodes is what the service needs from the storage nodes. nodeclient.Client
// implements it; tests substitute nodes that fail at exact points.
type Nodes interface {
	Put(ctx context.Context, base, id, checksum string, size int64, body io.Reader) (wire.BlobInfo, bool, error)
	Get(ctx context.Context, base, id string, rng *byterange.Range) (*nodeclient.Object, error)
	Head(ctx context.Context, base, id string) (wire.BlobInfo, error)
	Delete(ctx context.Context, base, id string) error
	Rehash(ctx context.Context, base, id string) (wire.ChecksumReport, error)
}

// Cluster is the service's view of membership: the current ring and how to
// reach a node.
type Cluster interface {
	Ring() *ring.Ring
	BaseURL(nodeID string) (string, bool)
}

// Reconciler brings a file's copies in line with the ring: it rebuilds
// quarantined copies and finishes deletes.
type Reconciler interface {
	Reconcile(ctx context.Context, fileID string) (reconcile.Outcome, error)
}

// Options configures a Service. Store, Nodes and Cluster are required.
type Options struct {
	Store      meta.Store
	Nodes      Nodes
	Cluster    Cluster
	Reconciler Reconciler
	Logger     *slog.Logger
	// Now is the clock upload sessions are created and expire by; nil is
	// time.Now.
	Now func() time.Time

	ReplicationFactor int
	MaxFileSize       int64
	// SpoolDir holds uploads while they are hashed and written to nodes.
	SpoolDir string
	// MemorySpoolMax is the largest upload held in memory instead of a spool
	// file (0: every upload goes to SpoolDir); MemorySpoolLimit bounds the
	// memory all such uploads hold at once, beyond which they go to disk.
	MemorySpoolMax, MemorySpoolLimit int64
	// SignedURLKey signs the node URLs that Locations hands out
	// (signedurl.KeyFrom the cluster token); nil hands out plain URLs, for
	// nodes whose internal API is open.
	SignedURLKey signedurl.Key
	// SignedURLTTL is how long a signed URL reads; 0 is DefaultSignedURLTTL.
	SignedURLTTL time.Duration
	// VerifyOnDownload re-hashes every downloaded byte against the file's checksum.
	VerifyOnDownload bool
	// DownloadBuffer is the largest file that is read whole and verified
	// before its first byte is sent, so a corrupt copy there never reaches the
	// client at all; larger files are verified while they stream.
	DownloadBuffer int64
	// ContentCache, when not nil, keeps the bytes of small files (at most
	// DownloadBuffer) that an upload held in memory or a download read whole
	// and verified, and answers later downloads of them without asking a
	// storage node.
	ContentCache *contentcache.Cache
	// ReplicaConcurrency bounds copy writes in flight across all uploads.
	ReplicaConcurrency int
	// PendingTouch is how often a running upload refreshes its PENDING row.
	PendingTouch time.Duration
	// PendingRecordDelay is how long an upload without an Idempotency-Key
	// writes copies before it records its PENDING row
	// (PENDING_RECORD_DELAY); one that finishes sooner writes its row once,
	// at the end. 0 records every upload's row before its first copy.
	PendingRecordDelay time.Duration
	// Events receives what happened, for metrics; nil means none.
	Events Events
	// ChunkSize is the size of a chunk (CHUNK_SIZE): an upload larger than
	// it is stored as chunks of this size, each a blob of its own. 0 means
	// the default, 8 MiB.
	ChunkSize int64
	// ChunkConcurrency bounds the chunks of one stream being written to
	// nodes while the next is received (CHUNK_UPLOAD_CONCURRENCY); with
	// ChunkSize it bounds the memory one stream holds. 0 means 3.
	ChunkConcurrency int
	// ChunkBuffers bounds the ChunkSize buffers that every chunked stream
	// of the Service together holds (CHUNK_BUFFERS): uploads, session parts,
	// downloads and completions wait for one when all are lent. 0 means
	// ChunkConcurrency + 1, one stream's worth.
	ChunkBuffers int
	// ChunkReadAhead is how many chunks of a download are fetched at once
	// beyond the one being sent (CHUNK_READAHEAD), each into a ChunkSize
	// buffer of its own. 0 means 2.
	ChunkReadAhead int
	// SessionTTL is how long an upload session lives (UPLOAD_SESSION_TTL);
	// 0 means 24h.
	SessionTTL time.Duration
}

// DefaultChunkSize is CHUNK_SIZE's default.
const DefaultChunkSize = 8 << 20

// Events is told about outcomes the service observes, for metrics.
type Events interface {
	Uploaded(status meta.FileStatus, bytes int64)
	// Spooled says where an upload's body was held: memory or a spool file.
	Spooled(inMemory bool)
	Downloaded(servedBy string, failovers int, bytes int64)
	// ReadResumed says that the copy on nodeID stopped short during a
	// download and the read went on from the next holder.
	ReadResumed(nodeID string)
	// ContentCache says whether a download that the content cache could hold
	// was answered from it.
	ContentCache(hit bool)
	ChecksumMismatch(nodeID string)
	Deleted(complete bool)
	Verified(corruptCopies int)
}

type noEvents struct{}

func (noEvents) Uploaded(meta.FileStatus, int64) {}
func (noEvents) Spooled(bool)                    {}
func (noEvents) Downloaded(string, int, int64)   {}
func (noEvents) ReadResumed(string)              {}
func (noEvents) ContentCache(bool)               {}
func (noEvents) ChecksumMismatch(string)         {}
func (noEvents) Deleted(bool)                    {}
func (noEvents) Verified(int)                    {}

// Service implements the file operations of the REST API.
type Service struct {
	opt      Options
	log      *slog.Logger
	copySlot chan struct{} // a semaphore bounding replica writes
	mem      *memorySpool
	// chunkBufs lends the ChunkSize buffers that chunked uploads and parts
	// are received into and that completions read back into, from one
	// budget (ChunkBuffers).
	chunkBufs *chunkBuffers
	// readBufs lends the buffers of downloads, which are not bounded: a
	// download's reader may itself be an upload (S3's UploadPartCopy)
	// waiting for chunkBufs, so a download must not hold that budget. It
	// shares chunkBufs' idle buffers.
	readBufs *chunkBuffers
	// folds hold the running checksums of upload sessions (sessionhash.go).
	folds *sessionFolds
	// keys are the Idempotency-Keys of the chunked uploads running here.
	keysMu sync.Mutex
	keys   map[string]struct{}
	// repairs holds the quarantines and rebuilds that downloads hand off,
	// run by Run.
	repairs *taskq.Queue
}

// DefaultSignedURLTTL is how long the node URLs of Locations read by default.
const DefaultSignedURLTTL = 5 * time.Minute

// Repair queue bounds: rebuilds are whole-file copies between nodes, so a few
// at a time; one that does not fit is left to the repair loop, which rebuilds
// every DEGRADED file.
const (
	repairQueueSize = 256
	repairWorkers   = 4
)

// New returns a Service, creating and emptying the spool directory (a spool
// left by a crashed process belongs to no live upload).
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Nodes == nil || o.Cluster == nil || o.Reconciler == nil {
		return nil, errs.E(errs.Invalid, "files: Store, Nodes, Cluster and Reconciler are required")
	}
	if o.ReplicationFactor <= 0 {
		o.ReplicationFactor = 3
	}
	if o.ReplicaConcurrency <= 0 {
		o.ReplicaConcurrency = 64
	}
	if o.PendingTouch <= 0 {
		o.PendingTouch = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Events == nil {
		o.Events = noEvents{}
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.ChunkConcurrency <= 0 {
		o.ChunkConcurrency = 3
	}
	if o.ChunkBuffers <= 0 {
		o.ChunkBuffers = o.ChunkConcurrency + 1
	}
	if o.ChunkReadAhead <= 0 {
		o.ChunkReadAhead = 2
	}
	if o.SignedURLTTL <= 0 {
		o.SignedURLTTL = DefaultSignedURLTTL
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SpoolDir == "" {
		return nil, errs.E(errs.Invalid, "files: SpoolDir is required")
	}
	if err := os.RemoveAll(o.SpoolDir); err != nil {
		return nil, errs.Wrap(errs.Other, err, "clear upload spool %s", o.SpoolDir)
	}
	if err := os.MkdirAll(o.SpoolDir, 0o750); err != nil {
		return nil, errs.Wrap(errs.Other, err, "create upload spool %s", filepath.Clean(o.SpoolDir))
	}
	if o.MemorySpoolMax < 0 || o.MemorySpoolLimit < 0 {
		return nil, errs.E(errs.Invalid, "files: memory spool sizes must not be negative")
	}
	chunkBufs := newChunkBuffers(o.ChunkSize, o.ChunkConcurrency+1, o.ChunkBuffers)
	return &Service{
		opt: o, log: o.Logger, copySlot: make(chan struct{}, o.ReplicaConcurrency),
		mem: newMemorySpool(o.MemorySpoolMax, o.MemorySpoolLimit),
		// Idle, one stream's worth is kept: the chunks in flight and the
		// one being received.
		chunkBufs: chunkBufs,
		readBufs:  chunkBufs.unbudgeted(),

		folds:   newSessionFolds(),
		keys:    map[string]struct{}{},
		repairs: taskq.New(taskq.Options{Name: "repairs", Size: repairQueueSize, Workers: repairWorkers, Logger: o.Logger}),
	}, nil
}

// Run does the repairs that downloads found necessary (quarantining a copy
// found corrupt while it streamed, rebuilding a quarantined copy) until ctx
// ends, and returns once none is running and no session's checksum is being
// folded (sessionhash.go): a shutdown cancels a rebuild or a fold in flight
// instead of leaving it to work on against a closed store. A Service runs
// once.
func (s *Service) Run(ctx context.Context) {
	s.repairs.Run(ctx)
	s.closeFolds()
}

// fileNotFound is the answer for a file that does not exist or is not visible.
func fileNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeFileNotFound, nil, "file %s not found", id)
}

// get loads a file record, turning a missing row into FILE_NOT_FOUND.
func (s *Service) get(ctx context.Context, id string) (meta.FileRecord, error) {
	if err := ValidateFileID(id); err != nil {
		return meta.FileRecord{}, err
	}
	rec, err := s.opt.Store.GetFile(ctx, id)
	if errs.Is(err, errs.NotFound) {
		return meta.FileRecord{}, fileNotFound(id)
	}
	return rec, err
}
