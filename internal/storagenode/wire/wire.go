// Package wire is the storage node's HTTP contract: paths, headers and JSON
// bodies. The node (package storagenode) and its client (package nodeclient)
// both use it, so the two cannot drift apart; the coordinator's registration
// endpoint decodes Registration.
package wire

import (
	"net/url"
	"time"
)

// Paths on a storage node.
const (
	PathBlobs   = "/internal/blobs"
	PathStats   = "/internal/stats"
	PathScrub   = "/internal/scrub"
	PathLive    = "/health/live"
	PathReady   = "/health/ready"
	PathMetrics = "/metrics"
)

// PathRegister is the coordinator's endpoint that nodes announce themselves to.
const PathRegister = "/api/nodes/register"

// CorruptPath is the coordinator's endpoint that node reports a corrupt copy
// to.
func CorruptPath(nodeID string) string { return "/api/nodes/" + url.PathEscape(nodeID) + "/corrupt" }

// Headers.
const (
	// HeaderChecksum carries a blob's SHA-256 in lower-case hex: declared by
	// the sender of a PUT, and the recorded (sidecar) value on GET and HEAD.
	HeaderChecksum = "X-Checksum-Sha256"
	// HeaderBlobSize carries a blob's full size on GET and HEAD, also when the
	// answer is a range of it.
	HeaderBlobSize = "X-Blob-Size"
	// HeaderBlocksVerified on a GET answer says the node checked every
	// byte it sends against the blob's per-block CRC32C sums before sending
	// it; its value names the check, BlocksVerifiedCRC32C. A blob written
	// before block sums existed is sent without it, unverified.
	HeaderBlocksVerified = "X-Blocks-Verified"
	// HeaderRequestID correlates a call across coordinator and node logs.
	HeaderRequestID = "X-Request-Id"
)

// ContentTypeBlob is the media type of blob bytes.
const ContentTypeBlob = "application/octet-stream"

// BlocksVerifiedCRC32C is HeaderBlocksVerified's value: CRC32C
// (Castagnoli) sums over blocks of 64 KiB.
const BlocksVerifiedCRC32C = "crc32c/65536"

// Limits of GET /internal/blobs.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

// Health statuses.
const (
	StatusUp   = "UP"
	StatusDown = "DOWN"
)

// BlobPath is the path of one blob.
func BlobPath(id string) string { return PathBlobs + "/" + url.PathEscape(id) }

// ChecksumPath is the path that re-hashes one blob.
func ChecksumPath(id string) string { return BlobPath(id) + "/checksum" }

// BlobInfo describes a stored blob: the answer to PUT and an entry of a list.
type BlobInfo struct {
	ID       string `json:"id"`
	Size     int64  `json:"size"`
	Checksum string `json:"checksum"`
}

// ChecksumReport is the answer of GET /internal/blobs/{id}/checksum.
type ChecksumReport struct {
	ID             string `json:"id"`
	Size           int64  `json:"size"`
	StoredChecksum string `json:"storedChecksum"`
	ActualChecksum string `json:"actualChecksum"`
	Intact         bool   `json:"intact"`
}

// BlobList is the answer of GET /internal/blobs. Next is the cursor for the
// following page, empty on the last one.
type BlobList struct {
	Blobs []BlobInfo `json:"blobs"`
	Next  string     `json:"next"`
}

// Stats is the answer of GET /internal/stats. CapacityBytes 0 means no limit
// is configured; FreeBytes is what the node can still take.
type Stats struct {
	NodeID string `json:"nodeId"`
	// DiskID is the identity of the node's data directory (see Registration).
	DiskID        string `json:"diskId"`
	BlobCount     int64  `json:"blobCount"`
	BytesUsed     int64  `json:"bytesUsed"`
	FreeBytes     int64  `json:"freeBytes"`
	TotalBytes    int64  `json:"totalBytes"`
	CapacityBytes int64  `json:"capacityBytes"`
}

// Health is the answer of the health endpoints.
type Health struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// DiskID is the identity of the node's data directory, so that the
	// coordinator's probes notice a replaced disk even between
	// registrations. Empty from a node older than identities.
	DiskID string `json:"diskId,omitempty"`
	// Version is the node's build (buildinfo.Version), in liveness answers
	// only: it says which build runs, not whether it is ready.
	Version string `json:"version,omitempty"`
}

// Registration is what a node POSTs to the coordinator's PathRegister.
type Registration struct {
	NodeID string `json:"nodeId"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// DiskID is the identity of the node's data directory: a UUID written
	// at its first start and lost with its blobs. The same node id with
	// another identity is a node whose disk was replaced: it holds none of
	// the copies the coordinator placed on it.
	DiskID string `json:"diskId"`
	// Zone and Weight are STORAGE_ZONE and STORAGE_WEIGHT ("auto" already
	// worked out): the node's failure domain and relative size.
	Zone   string  `json:"zone,omitempty"`
	Weight float64 `json:"weight,omitempty"`
}

// ScrubStatus is the answer of GET /internal/scrub: the scrubber's progress
// in its current period (see package scrub).
type ScrubStatus struct {
	NodeID string `json:"nodeId"`
	ScrubProgress
	// HashedCopies, HashedBytes and ThrottledBytes count, since the node
	// process started, the blobs it hashed and the bytes it read through its
	// token bucket; with the period's counts they show whether a restart
	// resumed a pass or began it again.
	HashedCopies   int64 `json:"hashedCopies"`
	HashedBytes    int64 `json:"hashedBytes"`
	ThrottledBytes int64 `json:"throttledBytes"`
	// LastPass is the last complete pass, absent before the first; the
	// coordinator lists it among its operations.
	LastPass *ScrubPass `json:"lastPass,omitempty"`
}

// ScrubPass is one complete scrub pass: its span, the blobs and bytes it
// hashed and the corrupt copies it found.
type ScrubPass struct {
	StartedAt        time.Time `json:"startedAt"`
	FinishedAt       time.Time `json:"finishedAt"`
	Copies           int64     `json:"copies"`
	Bytes            int64     `json:"bytes"`
	CorruptionsFound int64     `json:"corruptionsFound"`
}

// ScrubProgress is what the coordinator shows of a node's scrubber at GET
// /api/cluster/scrub. Times are RFC 3339; PeriodStart is null until the
// scrubber has started, LastFullPassAt until it has finished a pass.
type ScrubProgress struct {
	PeriodStart             *time.Time `json:"periodStart"`
	PeriodSeconds           float64    `json:"periodSeconds"`
	BandwidthBytesPerSecond int64      `json:"bandwidthBytesPerSecond"`
	CopiesScrubbed          int64      `json:"copiesScrubbed"`
	BytesScrubbed           int64      `json:"bytesScrubbed"`
	CopiesTotal             int64      `json:"copiesTotal"`
	BytesTotal              int64      `json:"bytesTotal"`
	LastFullPassAt          *time.Time `json:"lastFullPassAt"`
	CorruptionsFound        int64      `json:"corruptionsFound"`
	CorruptionsFoundTotal   int64      `json:"corruptionsFoundTotal"`
	UnreportedCorruptions   int        `json:"unreportedCorruptions"`
	Running                 bool       `json:"running"`
	// Behind is true when the rest of the pass cannot be read within the
	// period at the bandwidth.
	Behind bool `json:"behind"`
}

// CorruptReport is what a node POSTs to CorruptPath when its scrubber finds
// a copy whose bytes do not match their recorded checksum.
type CorruptReport struct {
	BlobID         string `json:"blobId"`
	StoredChecksum string `json:"storedChecksum,omitempty"`
	ActualChecksum string `json:"actualChecksum,omitempty"`
	Reason         string `json:"reason,omitempty"`
}
