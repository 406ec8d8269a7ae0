package files

import (
	"context"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Locations says where a file's bytes can be read straight from the
// storage nodes, blob by blob (one for a file stored whole, one per chunk),
// each with URLs of its holders in the order a reader should try them.
type Locations struct {
	File meta.File
	// ExpiresAt is when the URLs stop working, when they are signed.
	ExpiresAt time.Time
	// Signed says the URLs carry a signature (a cluster token is set); plain
	// URLs read from nodes whose internal API is open.
	Signed bool
	Blobs  []BlobLocation
}

// BlobLocation is one blob of a file: the bytes [Offset, Offset+Size) of
// the file, whose SHA-256 is Checksum.
type BlobLocation struct {
	ID       string
	Offset   int64
	Size     int64
	Checksum string
	URLs     []string
}

// Locations returns where file id's bytes can be read from the nodes. A
// file none of whose blobs has a reachable holder is still answered (with
// no URLs for that blob): the reader falls back to the coordinator, which
// answers why.
func (s *Service) Locations(ctx context.Context, id string) (Locations, error) {
	rec, err := s.get(ctx, id)
	if err != nil {
		return Locations{}, err
	}
	if rec.Status == meta.FilePending || rec.Status == meta.FileDeleted {
		return Locations{}, fileNotFound(id)
	}
	blobs := []meta.FileRecord{rec}
	if rec.Manifest() {
		if blobs, err = s.opt.Store.ChunksOf(ctx, rec.ID); err != nil {
			return Locations{}, err
		}
		if len(blobs) != rec.ChunkCount {
			return Locations{}, errs.E(errs.Unavailable, "file %s has %d of its %d chunks", rec.ID, len(blobs), rec.ChunkCount)
		}
	}
	key := s.opt.SignedURLKey
	expires := s.opt.Now().Add(s.opt.SignedURLTTL).Truncate(time.Second)
	out := Locations{File: rec.File, Signed: key != nil, Blobs: make([]BlobLocation, 0, len(blobs))}
	if out.Signed {
		out.ExpiresAt = expires
	}
	var query string
	for _, b := range blobs {
		loc := BlobLocation{ID: b.ID, Offset: b.Chunk.Offset, Size: b.SizeBytes, Checksum: b.Checksum, URLs: []string{}}
		if key != nil {
			query = "?" + key.Sign(b.ID, "", expires).Encode()
		}
		for _, n := range s.holders(b) {
			if base, ok := s.opt.Cluster.BaseURL(n); ok {
				loc.URLs = append(loc.URLs, base+wire.BlobPath(b.ID)+query)
			}
		}
		out.Blobs = append(out.Blobs, loc)
	}
	return out, nil
}
