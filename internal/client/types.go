package client

import (
	"time"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/ops"
)

// A file's state and a copy's, defined with the server's in apiwire.
type (
	FileStatus = apiwire.FileStatus
	CopyStatus = apiwire.CopyStatus
)

// File states (see API.md).
const (
	FilePending     = apiwire.FilePending
	FileActive      = apiwire.FileActive
	FileDegraded    = apiwire.FileDegraded
	FileRebalancing = apiwire.FileRebalancing
	FileFailed      = apiwire.FileFailed
	FileDeleted     = apiwire.FileDeleted
)

// Copy states.
const (
	CopyPending  = apiwire.CopyPending
	CopyActive   = apiwire.CopyActive
	CopyFailed   = apiwire.CopyFailed
	CopyDeleting = apiwire.CopyDeleting
)

// NodeStatus is a storage node's state.
type NodeStatus = apiwire.NodeStatus

// Node states.
const (
	NodeHealthy      = apiwire.NodeHealthy
	NodeUnhealthy    = apiwire.NodeUnhealthy
	NodeDeregistered = apiwire.NodeDeregistered
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

// A file's metadata (an item of a listing, or the answer of GET
// /api/files/{id}/metadata), its chunks and copies, and a page of the
// listing, defined with the server's in apiwire.
type (
	File     = apiwire.File
	Chunk    = apiwire.Chunk
	Replica  = apiwire.Replica
	FileList = apiwire.FileList
)

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

// The nodes' answers and the bodies sent about them, defined with the
// server's in apiwire: a node (GET /api/nodes), the ring and its zones (GET
// /api/nodes/ring), a deregistration (DELETE /api/nodes/{id}), a
// registration and an operator's zone and weight (PUT
// /api/nodes/{id}/placement).
type (
	Node             = apiwire.Node
	RegisterRequest  = apiwire.RegisterRequest
	PlacementRequest = apiwire.PlacementRequest
	RingInfo         = apiwire.RingInfo
	RingPoint        = apiwire.RingPoint
	RingShare        = apiwire.RingShare
	ZoneShare        = apiwire.ZoneShare
	DeregisterResult = apiwire.DeregisterResult
)

// Operation is a rebalance, drain, repair or scrub pass as GET
// /api/cluster/operations shows it: the coordinator's own type, whose
// package holds nothing else the client would not want.
type Operation = ops.Operation

// The answers of DELETE /api/nodes/{id}?dryRun=true (a drain's plan) and of
// a drain's progress, defined with the server's in apiwire.
type (
	DrainPlan   = apiwire.DrainPlan
	DrainTarget = apiwire.DrainTarget
	DrainReport = apiwire.DrainReport
	RunProgress = apiwire.RunProgress
)

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

// Trigger names why a rebalance ran.
type Trigger = apiwire.Trigger

// Rebalance triggers.
const (
	TriggerJoined       = apiwire.TriggerJoined
	TriggerFailed       = apiwire.TriggerFailed
	TriggerRecovered    = apiwire.TriggerRecovered
	TriggerDeregistered = apiwire.TriggerDeregistered
	TriggerManual       = apiwire.TriggerManual
	TriggerRepair       = apiwire.TriggerRepair
)

// RebalanceReport is the outcome of one rebalance run, defined with the
// server's in apiwire.
type RebalanceReport = apiwire.RebalanceReport

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
	ZoneRisk         = apiwire.ZoneRisk
)
