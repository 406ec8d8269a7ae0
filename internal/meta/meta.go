// Package meta defines dfs's metadata model (storage nodes, files and the copies
// of each file) and the Store interface that the PostgreSQL and the embedded
// SQLite implementations both satisfy.
//
// The store is authoritative. Every method runs in its own short transaction;
// callers never hold one across network I/O. Rows carry a version used for
// optimistic locking: an update names the version it read, and a stale update
// fails with an errs.Conflict error so the caller re-reads and re-applies.
package meta

import (
	"context"
	"maps"
	"slices"
	"time"
)

// NodeStatus is the lifecycle state of a storage node.
type NodeStatus string

// Node statuses.
const (
	NodeHealthy      NodeStatus = "HEALTHY"
	NodeUnhealthy    NodeStatus = "UNHEALTHY"
	NodeDeregistered NodeStatus = "DEREGISTERED"
)

// FileStatus is the lifecycle state of a file.
type FileStatus string

// File statuses.
const (
	FilePending     FileStatus = "PENDING"     // upload in flight
	FileActive      FileStatus = "ACTIVE"      // replication-factor copies exist
	FileDegraded    FileStatus = "DEGRADED"    // fewer copies than the replication factor
	FileRebalancing FileStatus = "REBALANCING" // copies are moving now
	FileFailed      FileStatus = "FAILED"      // no reachable copy
	FileDeleted     FileStatus = "DELETED"     // removal pending on a node that was down
)

// ReplicaStatus is the state of one copy of a file on one node.
type ReplicaStatus string

// Replica statuses.
const (
	ReplicaPending  ReplicaStatus = "PENDING"  // write not yet confirmed
	ReplicaActive   ReplicaStatus = "ACTIVE"   // confirmed present and verified
	ReplicaFailed   ReplicaStatus = "FAILED"   // write failed, checksum mismatch or node gone
	ReplicaDeleting ReplicaStatus = "DELETING" // removal pending on an unreachable node
)

// Node is a storage node as the coordinator knows it. A node is on the ring
// exactly when its status is HEALTHY.
type Node struct {
	ID                   string
	Host                 string
	Port                 int
	Status               NodeStatus
	RegisteredAt         time.Time
	LastCheckAt          *time.Time
	LastHealthyAt        *time.Time
	ConsecutiveFailures  int
	ConsecutiveSuccesses int
	// DiskID is the identity of the data directory the node last reported
	// (written by the node at its first start). A node id that comes back
	// with another one has lost every copy it held. Empty means unknown: a
	// node that has never reported one, such as one from before identities.
	DiskID string
	// Zone and Weight are the failure domain and relative size the node
	// reports (STORAGE_ZONE, STORAGE_WEIGHT): "" is no zone (a zone of its
	// own), 0 is weight 1.
	Zone   string
	Weight float64
	// ZoneOverride and WeightOverride are what an operator set over the
	// admin API; while set (non-nil) they win over what the node reports.
	// An override of "" means no zone.
	ZoneOverride   *string
	WeightOverride *float64
	Version        int64
}

// OnRing reports whether the node takes part in placement.
func (n Node) OnRing() bool { return n.Status == NodeHealthy }

// PlacementZone is the zone placement uses: the operator's override if set,
// else the reported zone.
func (n Node) PlacementZone() string {
	if n.ZoneOverride != nil {
		return *n.ZoneOverride
	}
	return n.Zone
}

// PlacementWeight is the weight placement uses: the operator's override if
// set, else the reported weight, and 1 when neither is.
func (n Node) PlacementWeight() float64 {
	if n.WeightOverride != nil {
		return *n.WeightOverride
	}
	if n.Weight > 0 {
		return n.Weight
	}
	return 1
}

// File is one stored file (today exactly one blob keyed by its ID).
type File struct {
	ID                string // canonical lower-case UUID
	Name              string
	ContentType       string
	SizeBytes         int64
	Checksum          string // SHA-256, lower-case hex; empty while PENDING before hashing ends
	Status            FileStatus
	StatusReason      string // why a file is DEGRADED or FAILED; empty otherwise
	PrimaryNodeID     string // empty while no copy is confirmed
	ReplicationFactor int
	RingPosition      int64  // ring.Position(ID), stored so joins can query key ranges
	IdempotencyKey    string // empty when the upload carried none
	// Chunk is set (a non-empty ParentID) on a chunk's row: a blob that is
	// one piece of a larger file. ChunkCount is set on a chunked file's own row, its manifest,
	// which has no copies and no blob of its own. Both are fixed when the
	// row is created (UpdateFile does not change them).
	Chunk      ChunkRef
	ChunkCount int
	CreatedAt  time.Time
	UpdatedAt  time.Time
	Version    int64
}

// ChunkRef places a chunk in what it belongs to: a chunked file (after its
// upload session completed) or an upload session's part (before).
type ChunkRef struct {
	ParentID string // the file's id, or the part's PartID
	Part     int    // the part's position in the file; 0 before completion
	Index    int    // the chunk's position in its part, from 0
	Offset   int64  // where the chunk's bytes start in its file (in its part before completion)
}

// IsChunk reports whether f is a chunk's row.
func (f File) IsChunk() bool { return f.Chunk.ParentID != "" }

// Manifest reports whether f is a chunked file's own row.
func (f File) Manifest() bool { return f.ChunkCount > 0 }

// UploadSession is a resumable upload: parts are sent separately, then made
// one file.
type UploadSession struct {
	ID             string // canonical lower-case UUID
	FileName       string
	ContentType    string
	ExpectedSHA256 string // empty when the client gave none
	CreatedAt      time.Time
	ExpiresAt      time.Time
}

// UploadPart is one attempt at a session's part. Its chunks are the files
// rows whose Chunk.ParentID is PartID.
type UploadPart struct {
	PartID    string // canonical lower-case UUID
	SessionID string
	Number    int // 1..10000
	Done      bool
	SizeBytes int64
	SHA256    string
	MD5       string
	CreatedAt time.Time
}

// Replica is one copy of a file on one node.
type Replica struct {
	ID        int64
	FileID    string
	NodeID    string
	Status    ReplicaStatus
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// FileRecord is a file together with every copy the store knows of.
type FileRecord struct {
	File
	Replicas []Replica // ordered by node ID
	// Chunks are a manifest's chunks in order, when the file service has
	// loaded them (Store.ChunksOf); the store's own reads leave it nil.
	Chunks []FileRecord
}

// FileQuery selects a page of files, newest first (created_at DESC, id DESC).
type FileQuery struct {
	Statuses []FileStatus // empty means ACTIVE, DEGRADED, REBALANCING and FAILED
	Offset   int
	Limit    int
	// VisibleTo, when set, is an access key that is not an admin's: the
	// files that hold an object of a bucket another key owns are left out
	// of the page and of the total, as that key may not use them.
	VisibleTo string
}

// PositionRange is the half-open ring interval (From, To] of positions. When
// From >= To the range wraps past the end of the ring: (From, 2^63) ∪ [0, To].
type PositionRange struct {
	From, To int64
}

// Epochs is the durable record of rebalance intent: Membership counts the
// changes of the ring's membership; Rebalanced is the highest Membership
// epoch a rebalance has completed for.
type Epochs struct{ Membership, Rebalanced int64 }

// Store is the metadata store. Errors carry errs kinds: NotFound for a missing
// row, Conflict for a stale version or a duplicate key, Unavailable when the
// database cannot be reached.
type Store interface {
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	Close() error

	// CreateNode inserts n (Version becomes 1). Conflict if the ID exists.
	CreateNode(ctx context.Context, n *Node) error
	GetNode(ctx context.Context, id string) (Node, error)
	// ListNodes returns every node ordered by ID.
	ListNodes(ctx context.Context) ([]Node, error)
	// UpdateNode writes n if its stored version is still n.Version, then
	// increments n.Version. Conflict when stale, NotFound when absent.
	UpdateNode(ctx context.Context, n *Node) error

	// CreateFile inserts rec and its replicas in one transaction; the file's
	// Version becomes 1 and CreatedAt/UpdatedAt are set when zero. Conflict if
	// the ID or a non-empty IdempotencyKey already exists.
	CreateFile(ctx context.Context, rec *FileRecord) error
	GetFile(ctx context.Context, id string) (FileRecord, error)
	// FileByIdempotencyKey finds the file created with key. NotFound if none.
	FileByIdempotencyKey(ctx context.Context, key string) (FileRecord, error)
	// UpdateFile writes rec's file fields and replaces its replica set with
	// rec.Replicas (matching by node ID: kept rows keep their IDs, missing rows
	// are deleted) in one transaction, if the stored file version is still
	// rec.Version; then increments rec.Version and sets UpdatedAt. Conflict
	// when stale, NotFound when absent.
	//
	// A chunked file's (a manifest's) stored status and reason are the
	// store's to keep: in the same transaction as any write of one of its
	// chunks (UpdateFile, MarkNodeCopiesLost, CompleteSession) or of the
	// manifest itself, they become meta.ManifestStatus of its chunks, unless
	// it is PENDING or DELETED. That change leaves the manifest's Version
	// alone (every write re-derives it, so no writer's change is lost); an
	// UpdateFile of a manifest returns the status it stored.
	UpdateFile(ctx context.Context, rec *FileRecord) error
	// UpdateFileAndPutObject is UpdateFile of rec and Namespace.PutObject
	// of o in one transaction: both happen or neither does. An upload's
	// final write uses it, so that an S3 key and its new file become
	// visible together and the key never names a file that is not
	// complete, in one commit instead of two. It returns the file the key
	// held before ("" if none, or if it held rec's file already), which the
	// caller deletes. Its errors are UpdateFile's and PutObject's (NotFound
	// with errs.CodeBucketNotFound when the bucket is absent); with either,
	// rec and the key are left as they were.
	UpdateFileAndPutObject(ctx context.Context, rec *FileRecord, o *Object) (replaced string, err error)
	// CreateFileAndPutObject is CreateFile of rec and Namespace.PutObject
	// of o in one transaction, for an upload whose final write is its
	// first: both happen or neither does. It returns what
	// UpdateFileAndPutObject returns; its errors are CreateFile's and
	// PutObject's, and with either, rec and the key are left as they were.
	CreateFileAndPutObject(ctx context.Context, rec *FileRecord, o *Object) (replaced string, err error)
	// TouchFile sets a file's UpdatedAt to now without changing its version, so
	// a long upload shows it is alive.
	TouchFile(ctx context.Context, id string) error
	// DeleteFile removes the file row and, by cascade, its replicas; the
	// chunks of a manifest become DELETED in the same transaction (their
	// copies DELETING), so the repair loop removes their blobs. Deleting an
	// absent file is not an error.
	DeleteFile(ctx context.Context, id string) error
	// ListFiles returns one page of files (without replicas) and the total
	// number of files matching q.Statuses. Chunks are not listed.
	ListFiles(ctx context.Context, q FileQuery) ([]File, int, error)
	// FileIDsOnNode lists the IDs of files with any replica row on nodeID
	// (an indexed query, never a scan of all files).
	FileIDsOnNode(ctx context.Context, nodeID string) ([]string, error)
	// FileIDsByStatus lists up to limit IDs of files in one of statuses whose
	// UpdatedAt is before updatedBefore, in repair order: the fewest ACTIVE
	// copies first, then the oldest UpdatedAt, then by ID. So a repair pass
	// bounded by limit takes the files closest to loss before any other.
	// Chunks are listed (each is a blob to repair); manifests only when
	// DELETED (so that their delete is finished), since they have no blob.
	FileIDsByStatus(ctx context.Context, statuses []FileStatus, updatedBefore time.Time, limit int) ([]string, error)
	// FileIDsByRisk returns the files among ids, each once and leaving out
	// those that do not exist, in repair order: the readable ones first
	// (PENDING and DELETED files hold nothing to lose), by fewest ACTIVE
	// copies, then the oldest UpdatedAt, then by ID. It looks each file up by
	// its key and sorts in the database, never reading other files. An ID
	// that is not canonical is errs.Invalid.
	FileIDsByRisk(ctx context.Context, ids []string) ([]string, error)
	// RepairQueue counts the files waiting for repair (DEGRADED and FAILED)
	// by their number of ACTIVE copies, from an index; only counts some file
	// has are present.
	RepairQueue(ctx context.Context) (map[int]int, error)
	// FileIDsInRanges lists the IDs of files whose RingPosition lies in any of
	// the ranges; as FileIDsByStatus, chunks yes, manifests only when DELETED.
	FileIDsInRanges(ctx context.Context, ranges []PositionRange) ([]string, error)
	// CountFilesByStatus counts files per status; chunks are not counted.
	CountFilesByStatus(ctx context.Context) (map[FileStatus]int, error)
	// FilesAfter returns up to limit files, every status included, whose IDs
	// sort after after ("" = from the start), in increasing ID order, each
	// with its replicas: one page of a walk over every file by its primary
	// key, which is how the anti-entropy sweep reads the metadata. after must
	// be empty or a canonical file ID (errs.Invalid otherwise); limit must be
	// positive. Chunks are included, manifests only when DELETED.
	FilesAfter(ctx context.Context, after string, limit int) ([]FileRecord, error)

	// GetState returns the value stored under key, or an errs.NotFound error.
	GetState(ctx context.Context, key string) (string, error)
	// PutState stores value under key, replacing what was there. Background
	// work keeps its progress here (the sweep's cursor) so that it survives
	// a restart; an empty key is errs.Invalid.
	PutState(ctx context.Context, key, value string) error

	// AcquireLease takes or renews the named lease for owner until now+ttl. It
	// reports false, without error, when another owner holds an unexpired lease.
	AcquireLease(ctx context.Context, name, owner string, ttl time.Duration) (bool, error)
	// ReleaseLease drops the lease if owner holds it.
	ReleaseLease(ctx context.Context, name, owner string) error
	// PruneLeases deletes the leases that expired more than grace ago and
	// reports how many. A holder renews well before expiry, so such a lease
	// was left by a coordinator that died holding it (or whose release
	// failed); deleting it frees nothing that was not free already, and keeps
	// those rows from piling up. A negative grace is errs.Invalid.
	PruneLeases(ctx context.Context, grace time.Duration) (int, error)

	// BumpMembershipEpoch adds one to the membership epoch and returns the
	// new value. Concurrent bumps, from any number of coordinators, each get
	// a value of their own. Membership bumps it before it writes a change of
	// the ring, so a crash in between costs a needless rebalance, never a
	// lost one.
	BumpMembershipEpoch(ctx context.Context) (int64, error)
	// Epochs returns the membership epoch and the highest one a rebalance
	// has completed for; a new store has both at 0.
	Epochs(ctx context.Context) (Epochs, error)
	// CompleteRebalance records that a rebalance has completed the work of
	// membership epoch epoch: Rebalanced becomes max(Rebalanced, min(epoch,
	// Membership)), so it never goes down and never passes Membership. A
	// negative epoch is errs.Invalid.
	CompleteRebalance(ctx context.Context, epoch int64) error
	// MarkNodeCopiesLost records, in one transaction, that every ACTIVE copy
	// on nodeID is gone (its disk was replaced): those copies become FAILED,
	// and their files DEGRADED with reason, or stay REBALANCING or FAILED;
	// each file's version moves, so a writer holding an older record
	// re-reads. PENDING and DELETED files are left to their upload and their
	// delete. The chunked files whose status moves with their chunks'
	// change too. It returns the IDs of the files changed, in ID order.
	MarkNodeCopiesLost(ctx context.Context, nodeID, reason string) ([]string, error)

	// Durability counts, over the readable files (ACTIVE, DEGRADED,
	// REBALANCING and FAILED; not PENDING or DELETED), the copies that can be
	// read now: ACTIVE copies on one of healthyNodes. A copy on any other
	// node, a draining one included, is not counted. It is one aggregate
	// query over the replica index in one snapshot, never a walk of the files
	// in Go, so it is cheap enough to ask at every scrape (behind a short
	// cache). Duplicate or unknown node IDs are harmless. A chunked file
	// counts once, by the fewest healthy copies of its chunks; chunks of an
	// upload session not completed count nowhere.
	Durability(ctx context.Context, healthyNodes []string) (Durability, error)
	// ZoneDurability counts, over the readable files and their healthy
	// copies as Durability does, what the failure of a whole zone would do
	// now. healthyZones maps each healthy node's ID to its placement zone;
	// a node mapped to "" is a zone of its own. It is one aggregate query
	// over every healthy copy in one snapshot, never a walk of the files in
	// Go. A chunked file counts once: it is left with what its worst chunk
	// is left with, and it spans as few zones as the chunk that spans the
	// fewest.
	ZoneDurability(ctx context.Context, healthyZones map[string]string) (ZoneDurability, error)

	// ChunksOf returns the chunks whose parent is parentID (a file or a
	// part), with their replicas, ordered by part and index.
	ChunksOf(ctx context.Context, parentID string) ([]FileRecord, error)

	// CreateSession inserts an upload session. Conflict if its ID exists.
	CreateSession(ctx context.Context, s *UploadSession) error
	// GetSession returns a session and its finished parts by number.
	// NotFound if there is no such session.
	GetSession(ctx context.Context, id string) (UploadSession, []UploadPart, error)
	// ListSessions returns up to limit sessions whose IDs sort after after
	// ("" = from the start), in ID order.
	ListSessions(ctx context.Context, after string, limit int) ([]UploadSession, error)
	// ExpiredSessions lists up to limit IDs of sessions that expired before t.
	ExpiredSessions(ctx context.Context, t time.Time, limit int) ([]string, error)
	// BeginPart records an unfinished attempt at a part, before its chunks
	// are written. NotFound if the session is gone.
	BeginPart(ctx context.Context, p *UploadPart) error
	// FinishPart marks the attempt p.PartID done with p's size and checksums
	// and, in the same transaction, drops every other finished attempt at
	// the same number, marking their chunks DELETED; it returns those
	// chunks' IDs. An attempt still unfinished is left to finish, and then
	// replaces this one: the last attempt to finish is the part.
	// NotFound if the session or the attempt is gone.
	FinishPart(ctx context.Context, p *UploadPart) ([]string, error)
	// CompleteSession makes the finished attempts partIDs, in that order,
	// the chunks of manifest (inserted here, with ChunkCount set by the
	// caller): each chunk's parent becomes the file, its Part the attempt's
	// position from 1 and its Offset moves by the sizes of the parts before.
	// The session, its other attempts' chunks (marked DELETED) and its part
	// rows go in the same transaction; it returns the deleted chunks' IDs.
	// NotFound if the session is gone; Invalid if a part ID is not one of
	// its finished attempts.
	CompleteSession(ctx context.Context, sessionID string, manifest *FileRecord, partIDs []string) ([]string, error)
	// DeleteSession removes a session and its part rows and marks every
	// chunk of its attempts DELETED, in one transaction, returning their
	// IDs. Deleting an absent session is not an error.
	DeleteSession(ctx context.Context, id string) ([]string, error)
}

// Durability is how safe the readable files are right now, counted by
// Store.Durability.
type Durability struct {
	// FilesByCopies maps a number of healthy copies to the number of
	// readable files that have exactly that many. Only counts some file has
	// are present; an empty map means no readable file.
	FilesByCopies map[int]int
	// BytesAtRisk sums the sizes of the readable files with fewer healthy
	// copies than their own replication factor (a chunked file's whole size).
	BytesAtRisk int64
	// Nodes holds one entry per distinct healthy node, in ID order.
	Nodes []NodeDurability
}

// NodeDurability is what the failure of one healthy node would do now.
type NodeDurability struct {
	NodeID string
	// FilesLeftWithOneCopy counts the files with two healthy copies, one of
	// them on this node (a chunked file: one of its chunks with two has one
	// here), and FilesLeftWithNoCopy those whose only one is here.
	FilesLeftWithOneCopy int
	FilesLeftWithNoCopy  int
}

// ZoneDurability is what the failure of a whole zone would do now, counted
// by Store.ZoneDurability.
type ZoneDurability struct {
	// Zones holds one entry per distinct zone of the healthy nodes: the
	// named zones in name order, then each zoneless node's own zone, in
	// node ID order.
	Zones []ZoneRisk
	// Files is the number of readable files counted.
	Files int
	// MinZones is the fewest distinct zones any readable file's healthy
	// copies are in (0 for a file with none); 0 when Files is 0.
	MinZones int
	// Collapsed counts the readable files whose healthy copies are in fewer
	// distinct zones than the smaller of their number and len(Zones): two
	// of them share a zone when they need not (a chunked file counts once
	// when one of its chunks is so).
	Collapsed int
}

// ZoneRisk is what the failure of every node of one zone at once would do
// now.
type ZoneRisk struct {
	// Zone is the zone's name; "" for the zone of a node without one, whose
	// only node is Nodes[0].
	Zone string
	// Nodes are the zone's healthy nodes, in ID order.
	Nodes []string
	// FilesLeftWithOneCopy counts the files with more than one healthy copy
	// now that would be left with exactly one, FilesLeftWithNoCopy those
	// with some now that would be left with none: every healthy copy of
	// one of their chunks is in the zone.
	FilesLeftWithOneCopy int
	FilesLeftWithNoCopy  int
}

// FailureHeadroom is how many zones can fail now, whichever they are,
// without a readable file losing its last healthy copy: MinZones minus
// one, never below zero. With no readable file it is what a file written
// now could survive: the smaller of the number of zones and rf, minus one,
// never below zero.
func (z ZoneDurability) FailureHeadroom(rf int) int {
	lowest := z.MinZones
	if z.Files == 0 {
		lowest = min(len(z.Zones), rf)
	}
	return max(lowest-1, 0)
}

// HealthyZones groups the healthy nodes of healthyZones (node ID to
// placement zone, "" for a node that is a zone of its own) into zones, in
// the order of ZoneDurability.Zones, with nothing counted yet, and returns
// each node's index in that list. The stores number the zones so for
// their queries: a zone's number is its index.
func HealthyZones(healthyZones map[string]string) ([]ZoneRisk, map[string]int) {
	named := map[string][]string{}
	var alone []string
	for node, zone := range healthyZones {
		if zone == "" {
			alone = append(alone, node)
		} else {
			named[zone] = append(named[zone], node)
		}
	}
	zones := make([]ZoneRisk, 0, len(named)+len(alone))
	for _, name := range slices.Sorted(maps.Keys(named)) {
		zones = append(zones, ZoneRisk{Zone: name, Nodes: slices.Sorted(slices.Values(named[name]))})
	}
	slices.Sort(alone)
	for _, node := range alone {
		zones = append(zones, ZoneRisk{Nodes: []string{node}})
	}
	index := make(map[string]int, len(healthyZones))
	for i, z := range zones {
		for _, node := range z.Nodes {
			index[node] = i
		}
	}
	return zones, index
}

// Files is the number of readable files counted.
func (d Durability) Files() int {
	n := 0
	for _, c := range d.FilesByCopies {
		n += c
	}
	return n
}

// MinCopies is the fewest healthy copies any readable file has, and false
// when there is no readable file.
func (d Durability) MinCopies() (int, bool) {
	lowest, found := 0, false
	for copies, files := range d.FilesByCopies {
		if files > 0 && (!found || copies < lowest) {
			lowest, found = copies, true
		}
	}
	return lowest, found
}

// AsZones is the ZoneDurability of d's healthy nodes when each is a zone of
// its own (no node has a zone): every zone is one node, whose failure does
// what Durability counts for it, and no two copies share a zone. It is
// what Store.ZoneDurability answers for such a map, at the cost of
// Durability alone.
func (d Durability) AsZones() ZoneDurability {
	z := ZoneDurability{Zones: make([]ZoneRisk, 0, len(d.Nodes)), Files: d.Files()}
	z.MinZones, _ = d.MinCopies()
	for _, n := range d.Nodes {
		z.Zones = append(z.Zones, ZoneRisk{Nodes: []string{n.NodeID},
			FilesLeftWithOneCopy: n.FilesLeftWithOneCopy, FilesLeftWithNoCopy: n.FilesLeftWithNoCopy})
	}
	return z
}

// FailureHeadroom is how many arbitrary node failures the readable files
// survive now without one of them losing its last healthy copy: the fewest
// healthy copies of any file, minus one, and never below zero (a file with
// no healthy copy has lost it already). With no readable file it is what a
// file written now could survive: min(healthyNodes, rf) - 1, never below
// zero.
func (d Durability) FailureHeadroom(healthyNodes, rf int) int {
	lowest, ok := d.MinCopies()
	if !ok {
		lowest = min(healthyNodes, rf)
	}
	return max(lowest-1, 0)
}

// ActiveCopies counts the ACTIVE copies of a file.
func (r FileRecord) ActiveCopies() int {
	n := 0
	for _, c := range r.Replicas {
		if c.Status == ReplicaActive {
			n++
		}
	}
	return n
}

// Replica returns the copy on nodeID, if the record has one.
func (r FileRecord) Replica(nodeID string) (Replica, bool) {
	for _, c := range r.Replicas {
		if c.NodeID == nodeID {
			return c, true
		}
	}
	return Replica{}, false
}

// StatusFor is a readable file's status given its ACTIVE copies on nodes the
// ring wants (desired) and anywhere (total): ACTIVE with rf copies where they
// belong, DEGRADED with fewer but at least one, FAILED with none.
func StatusFor(desired, total, rf int) FileStatus {
	switch {
	case desired >= rf:
		return FileActive
	case total > 0:
		return FileDegraded
	default:
		return FileFailed
	}
}
