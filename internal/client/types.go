package client

import (
	"time"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/ops"
)

// FileStatus is a file's state as the API reports it.
type FileStatus string

// File states (see API.md).
const (
	FilePending     FileStatus = "PENDING"
	FileActive      FileStatus = "ACTIVE"
	FileDegraded    FileStatus = "DEGRADED"
	FileRebalancing FileStatus = "REBALANCING"
	FileFailed      FileStatus = "FAILED"
	FileDeleted     FileStatus = "DELETED"
)

// CopyStatus is the state of one copy of a file.
type CopyStatus string

// Copy states.
const (
	CopyPending  CopyStatus = "PENDING"
	CopyActive   CopyStatus = "ACTIVE"
	CopyFailed   CopyStatus = "FAILED"
	CopyDeleting CopyStatus = "DELETING"
)

// NodeStatus is a storage node's state.
type NodeStatus string

// Node states.
const (
	NodeHealthy      NodeStatus = "HEALTHY"
	NodeUnhealthy    NodeStatus = "UNHEALTHY"
	NodeDeregistered NodeStatus = "DEREGISTERED"
)

// UploadResult is the answer of POST /api/files.
type UploadResult struct {
	FileID            string     `json:"fileId"`
	FileName          string     `json:"fileName"`
	ContentType       string     `json:"contentType"`
	SizeBytes         int64      `json:"sizeBytes"`
	Checksum          string     `json:"checksum"`
	Status            FileStatus `json:"status"`
	PrimaryNode       string     `json:"primaryNode"`
	Replicas          []string   `json:"replicas"`
	ReplicationFactor int        `json:"replicationFactor"`
	CreatedAt         time.Time  `json:"createdAt"`
	Reason            string     `json:"reason,omitempty"`
	// Replayed is true when the coordinator answered with an earlier upload
	// of the same bytes under the same Idempotency-Key (the
	// Idempotent-Replayed header) and stored nothing new.
	Replayed bool `json:"-"`
}

// File is a file's metadata: an item of a listing, or the answer of
// GET /api/files/{id}/metadata, which alone fills Replicas.
type File struct {
	FileID            string     `json:"fileId"`
	FileName          string     `json:"fileName"`
	ContentType       string     `json:"contentType"`
	SizeBytes         int64      `json:"sizeBytes"`
	Checksum          string     `json:"checksum"`
	Status            FileStatus `json:"status"`
	Reason            string     `json:"reason,omitempty"`
	PrimaryNode       string     `json:"primaryNode"`
	ReplicationFactor int        `json:"replicationFactor"`
	RingPosition      int64      `json:"ringPosition"`
	CreatedAt         time.Time  `json:"createdAt"`
	UpdatedAt         time.Time  `json:"updatedAt"`
	Replicas          []Replica  `json:"replicas,omitempty"`
	// Bucket and Key name the S3 object the file holds, if any.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	// Chunks are a chunked file's chunks (files larger than the
	// coordinator's CHUNK_SIZE), which then has no copies of its own.
	Chunks []Chunk `json:"chunks,omitempty"`
}

// Chunk is one chunk of a chunked file: a blob with copies of its own.
type Chunk struct {
	Index     int        `json:"index"`
	ChunkID   string     `json:"chunkId"`
	Offset    int64      `json:"offset"`
	SizeBytes int64      `json:"sizeBytes"`
	Checksum  string     `json:"checksum"`
	Status    FileStatus `json:"status"`
	Reason    string     `json:"reason,omitempty"`
	Replicas  []Replica  `json:"replicas"`
}

// Replica is one copy of a file, the primary's included.
type Replica struct {
	NodeID    string     `json:"nodeId"`
	Status    CopyStatus `json:"status"`
	Primary   bool       `json:"primary"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
}

// FileList is one page of GET /api/files, newest first.
type FileList struct {
	Items []File `json:"items"`
	Page  int    `json:"page"`
	Size  int    `json:"size"`
	Total int    `json:"total"`
}

// DeleteResult is the outcome of DELETE /api/files/{id}. A 204 answer has no
// body; the client reports it as Complete with the status DELETED.
type DeleteResult struct {
	FileID       string     `json:"fileId"`
	Status       FileStatus `json:"status"`
	Complete     bool       `json:"complete"`
	PendingNodes []string   `json:"pendingNodes,omitempty"`
	Message      string     `json:"message,omitempty"`
}

// Verification results of one copy.
const (
	CheckOK          = "OK"
	CheckCorrupt     = "CORRUPT"
	CheckMissing     = "MISSING"
	CheckUnreachable = "UNREACHABLE"
)

// VerifyResult is the answer of POST /api/files/{id}/verify.
type VerifyResult struct {
	FileID        string      `json:"fileId"`
	Checksum      string      `json:"checksum"`
	Status        FileStatus  `json:"status"`
	HealthyCopies int         `json:"healthyCopies"`
	Copies        []CopyCheck `json:"copies"`
	// Chunks verifies each chunk of a chunked file.
	Chunks []ChunkVerify `json:"chunks,omitempty"`
}

// ChunkVerify is the verification of one chunk.
type ChunkVerify struct {
	Index         int         `json:"index"`
	FileID        string      `json:"fileId"`
	Checksum      string      `json:"checksum"`
	Status        FileStatus  `json:"status"`
	HealthyCopies int         `json:"healthyCopies"`
	Copies        []CopyCheck `json:"copies"`
}

// CopyCheck is the verification of one copy.
type CopyCheck struct {
	NodeID         string `json:"nodeId"`
	Result         string `json:"result"` // CheckOK, CheckCorrupt, CheckMissing or CheckUnreachable
	StoredChecksum string `json:"storedChecksum,omitempty"`
	ActualChecksum string `json:"actualChecksum,omitempty"`
	Rebuilt        bool   `json:"rebuilt"`
	// Status is the copy's state after verification.
	Status CopyStatus `json:"status,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// Node is a storage node as GET /api/nodes and GET /api/nodes/{id} show it.
type Node struct {
	NodeID               string     `json:"nodeId"`
	Host                 string     `json:"host"`
	Port                 int        `json:"port"`
	Status               NodeStatus `json:"status"`
	OnRing               bool       `json:"onRing"`
	KeyspaceSharePercent float64    `json:"keyspaceSharePercent"`
	RegisteredAt         time.Time  `json:"registeredAt"`
	LastCheckAt          *time.Time `json:"lastCheckAt"`
	LastHealthyAt        *time.Time `json:"lastHealthyAt"`
	ConsecutiveFailures  int        `json:"consecutiveFailures"`
	ConsecutiveSuccesses int        `json:"consecutiveSuccesses"`
	// BlobCount, BytesUsed and FreeBytes are the node's own figures, absent
	// (nil) when it did not answer in time.
	BlobCount *int64 `json:"blobCount,omitempty"`
	BytesUsed *int64 `json:"bytesUsed,omitempty"`
	FreeBytes *int64 `json:"freeBytes,omitempty"`
	// DiskID is the identity of the node's data directory; empty while
	// unknown.
	DiskID string `json:"diskId,omitempty"`
	// Drain is the node's drain while the answering coordinator runs it;
	// nil otherwise.
	Drain *Operation `json:"drain,omitempty"`
}

// Operation is a rebalance, drain, repair or scrub pass as GET
// /api/cluster/operations shows it: the coordinator's own type, whose
// package holds nothing else the client would not want.
type Operation = ops.Operation

// RegisterRequest is the body of POST /api/nodes/register.
type RegisterRequest struct {
	NodeID string `json:"nodeId"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// DiskID is the identity of the node's data directory; optional.
	DiskID string `json:"diskId,omitempty"`
}

// RingInfo is the answer of GET /api/nodes/ring; Nodes are largest share first.
type RingInfo struct {
	PhysicalNodes       int         `json:"physicalNodes"`
	VirtualNodesPerNode int         `json:"virtualNodesPerNode"`
	TotalRingPositions  int         `json:"totalRingPositions"`
	Nodes               []RingShare `json:"nodes"`
	// Points lists every virtual node in ring order; only with points=true.
	Points []RingPoint `json:"points,omitempty"`
}

// RingPoint is one virtual node of the ring.
type RingPoint struct {
	NodeID   string `json:"nodeId"`
	Position int64  `json:"position"`
}

// RingShare is one node's part of the keyspace.
type RingShare struct {
	NodeID               string  `json:"nodeId"`
	KeyspaceSharePercent float64 `json:"keyspaceSharePercent"`
}

// DeregisterResult is the answer of DELETE /api/nodes/{id}.
type DeregisterResult struct {
	Node  Node        `json:"node"`
	Drain DrainReport `json:"drain"`
}

// DrainPlan is the answer of DELETE /api/nodes/{id}?dryRun=true: what a
// drain would copy to which nodes, and whether it is safe.
type DrainPlan struct {
	Node              string        `json:"node"`
	Safe              bool          `json:"safe"`
	Reasons           []string      `json:"reasons"`
	Files             int           `json:"files"`
	Bytes             int64         `json:"bytes"`
	FilesOnNode       int           `json:"filesOnNode"`
	BytesOnNode       int64         `json:"bytesOnNode"`
	PendingUploads    int           `json:"pendingUploads"`
	RemainingNodes    int           `json:"remainingNodes"`
	ReplicationFactor int           `json:"replicationFactor"`
	Targets           []DrainTarget `json:"targets"`
	SoleCopies        []string      `json:"soleCopies"`
}

// DrainTarget is what one node would receive in a drain.
type DrainTarget struct {
	NodeID string `json:"nodeId"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	// FreeBytes is nil when the node did not report its free space.
	FreeBytes *int64 `json:"freeBytes"`
}

// DrainReport tells how far a deregistered node's drain has come.
type DrainReport struct {
	Node           string           `json:"node"`
	FilesRemaining int              `json:"filesRemaining"`
	PendingUploads int              `json:"pendingUploads,omitempty"`
	Complete       bool             `json:"complete"`
	Run            *RebalanceReport `json:"run,omitempty"`
	// Progress is that of the drain's run going on now, if one is.
	Progress *RunProgress `json:"progress,omitempty"`
}

// RunProgress is how far a run that is still going has come.
type RunProgress struct {
	StartedAt      time.Time `json:"startedAt"`
	FilesDone      int       `json:"filesDone"`
	FilesTotal     int       `json:"filesTotal"`
	BytesCopied    int64     `json:"bytesCopied"`
	BytesPerSecond float64   `json:"bytesPerSecond"`
	// EtaSeconds is nil before the first file is done.
	EtaSeconds *float64 `json:"etaSeconds"`
}

// Cluster health states.
const (
	HealthUp       = apiwire.HealthUp
	HealthDegraded = apiwire.HealthDegraded
	HealthDown     = apiwire.HealthDown
)

// The answer of GET /api/health, defined with the server's in apiwire.
type (
	HealthReport   = apiwire.HealthReport
	NodeCounts     = apiwire.NodeCounts
	ComponentState = apiwire.ComponentState
)

// Rebalance triggers.
const (
	TriggerJoined       = "JOINED"
	TriggerFailed       = "FAILED"
	TriggerRecovered    = "RECOVERED"
	TriggerDeregistered = "DEREGISTERED"
	TriggerManual       = "MANUAL"
	TriggerRepair       = "REPAIR"
)

// RebalanceReport is the outcome of one rebalance run.
type RebalanceReport struct {
	Trigger            string   `json:"trigger"`
	Node               string   `json:"node,omitempty"`
	FilesScanned       int      `json:"filesScanned"`
	FilesAffected      int      `json:"filesAffected"`
	ChunksMoved        int      `json:"chunksMoved"`
	CopiesCreated      int      `json:"copiesCreated"`
	CopiesRemoved      int      `json:"copiesRemoved"`
	PrimariesPromoted  int      `json:"primariesPromoted"`
	Failures           int      `json:"failures"`
	UnrecoverableFiles []string `json:"unrecoverableFiles"`
	// FilesSkipped counts files the run did not reconcile; Complete is
	// false when there are any, and the run is then retried.
	FilesSkipped int   `json:"filesSkipped"`
	DurationMs   int64 `json:"durationMs"`
	Complete     bool  `json:"complete"`
	// Skipped is true when another coordinator was running the same
	// rebalance, so this run did nothing.
	Skipped bool `json:"skipped,omitempty"`
}

// HealthCheckResult is the answer of POST /api/admin/health-check.
type HealthCheckResult struct {
	CheckedAt time.Time    `json:"checkedAt"`
	Nodes     []NodeHealth `json:"nodes"`
}

// NodeHealth is one node's state after a probe sweep.
type NodeHealth struct {
	NodeID               string     `json:"nodeId"`
	Host                 string     `json:"host"`
	Port                 int        `json:"port"`
	Status               NodeStatus `json:"status"`
	OnRing               bool       `json:"onRing"`
	ConsecutiveFailures  int        `json:"consecutiveFailures"`
	ConsecutiveSuccesses int        `json:"consecutiveSuccesses"`
	LastCheckAt          *time.Time `json:"lastCheckAt"`
	LastHealthyAt        *time.Time `json:"lastHealthyAt"`
	// Error is why this sweep's probe failed; empty when it succeeded.
	Error string `json:"error,omitempty"`
}

// The answer of GET /api/cluster/durability, defined with the server's in
// apiwire; NodeRisk's Status is a NodeStatus as a string.
type (
	DurabilityReport = apiwire.DurabilityReport
	NodeRisk         = apiwire.NodeRisk
)
