package apiwire

import "time"

// FileStatus is a file's state as the API reports it (API.md).
type FileStatus string

// File states.
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

// File is a file's metadata: an item of GET /api/files, or the answer of
// GET /api/files/{id}/metadata, which alone fills Replicas, Bucket, Key and
// Chunks.
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
	// RingPositionString is RingPosition in decimal: the number is above
	// 2^53 for most files, and readers whose numbers are doubles (jq,
	// JavaScript) round it.
	RingPositionString string    `json:"ringPositionString"`
	CreatedAt          time.Time `json:"createdAt"`
	UpdatedAt          time.Time `json:"updatedAt"`
	Replicas           []Replica `json:"replicas,omitempty"`
	// Bucket and Key name the S3 object the file holds, if any.
	Bucket string `json:"bucket,omitempty"`
	Key    string `json:"key,omitempty"`
	// Chunks are a chunked file's chunks (files larger than the
	// coordinator's CHUNK_SIZE), each a blob with copies of its own; such a
	// file has no copies of its own.
	Chunks []Chunk `json:"chunks,omitempty"`
}

// Chunk is one chunk of a chunked file.
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

// Replica is one copy of a file or chunk, the primary's included.
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
