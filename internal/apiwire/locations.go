package apiwire

import "time"

// FileLocations is the answer of GET /api/files/{fileId}/locations: where a
// file's bytes can be read straight from the storage nodes, blob by blob
// (one for a file stored whole, one per chunk, in the file's order).
type FileLocations struct {
	FileID    string `json:"fileId"`
	SizeBytes int64  `json:"sizeBytes"`
	Checksum  string `json:"checksum"`
	// ExpiresAt is when signed URLs stop reading; absent when the URLs are
	// plain (no CLUSTER_TOKEN: the nodes' internal API is open).
	ExpiresAt *time.Time     `json:"expiresAt,omitempty"`
	Blobs     []BlobLocation `json:"blobs"`
}

// BlobLocation is one blob of a file: the file's bytes [offset,
// offset+sizeBytes), whose SHA-256 is checksum, readable with a GET of any
// of urls (try them in order; each also takes a Range header).
type BlobLocation struct {
	Offset    int64    `json:"offset"`
	SizeBytes int64    `json:"sizeBytes"`
	Checksum  string   `json:"checksum"`
	URLs      []string `json:"urls"`
}
