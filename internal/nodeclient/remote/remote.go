// Package remote presents one storage node, reached over HTTP through the
// coordinator's node client, as a blob.Store, after Perkeep's
// blobserver/remote. Its purpose is the conformance suite: run through
// blobtest, it holds the node's HTTP API and the client to the same contract
// as the disk store the node serves. The coordinator does not use it: it
// speaks the node's wire types directly (package nodeclient).
package remote

import (
	"context"
	"errors"
	"io"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Store is the blob store of the node at one base URL.
type Store struct {
	c        *nodeclient.Client
	base     string
	identity string
}

var _ blob.Store = (*Store)(nil)

// Open returns the store of the node at base (such as
// http://127.0.0.1:7001), asking the node once for the identity of its disk.
func Open(ctx context.Context, c *nodeclient.Client, base string) (*Store, error) {
	st, err := c.Stats(ctx, base)
	if err != nil {
		return nil, err
	}
	return &Store{c: c, base: base, identity: st.DiskID}, nil
}

// askable refuses the one id the node cannot be asked about: the empty id
// has no path of its own (the path it would take names the listing). Every
// other id goes to the node, which validates it.
func askable(id string) error {
	if id == "" {
		return errs.E(errs.Invalid, "blob id is empty")
	}
	return nil
}

func fromWire(bi wire.BlobInfo) blob.Info {
	return blob.Info{ID: bi.ID, Size: bi.Size, Checksum: bi.Checksum}
}

// Receive implements blob.Receiver with a PUT.
func (s *Store) Receive(ctx context.Context, id, checksum string, size int64, r io.Reader) (blob.Info, bool, error) {
	if err := askable(id); err != nil {
		return blob.Info{}, false, err
	}
	bi, created, err := s.c.Put(ctx, s.base, id, checksum, size, r)
	if err != nil {
		return blob.Info{}, false, err
	}
	return fromWire(bi), created, nil
}

// Stat implements blob.Statter with a HEAD.
func (s *Store) Stat(ctx context.Context, id string) (blob.Info, error) {
	if err := askable(id); err != nil {
		return blob.Info{}, err
	}
	bi, err := s.c.Head(ctx, s.base, id)
	if err != nil {
		return blob.Info{}, err
	}
	return fromWire(bi), nil
}

// Fetch implements blob.Fetcher with a GET. Seeking costs nothing until the
// next Read, which asks for the rest of the blob from the new offset with a
// range request under ctx.
func (s *Store) Fetch(ctx context.Context, id string) (io.ReadSeekCloser, blob.Info, error) {
	if err := askable(id); err != nil {
		return nil, blob.Info{}, err
	}
	obj, err := s.c.Get(ctx, s.base, id, nil)
	if err != nil {
		return nil, blob.Info{}, err
	}
	info := fromWire(obj.Info)
	return &reader{ctx: ctx, s: s, info: info, body: obj.Body}, info, nil
}

// reader is a fetched blob. body is nil after a Seek, until the next Read
// opens the blob again at off.
type reader struct {
	ctx  context.Context
	s    *Store
	info blob.Info
	body io.ReadCloser
	off  int64
}

func (r *reader) Read(p []byte) (int, error) {
	if r.body == nil {
		if r.off >= r.info.Size {
			return 0, io.EOF
		}
		obj, err := r.s.c.Get(r.ctx, r.s.base, r.info.ID, &byterange.Range{Start: r.off, Length: r.info.Size - r.off})
		if err != nil {
			return 0, err
		}
		if got := fromWire(obj.Info); got != r.info {
			obj.Body.Close()
			return 0, errs.E(errs.Conflict, "blob %s changed while it was read", r.info.ID)
		}
		r.body = obj.Body
	}
	n, err := r.body.Read(p)
	r.off += int64(n)
	return n, err
}

func (r *reader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.info.Size
	}
	if offset < 0 {
		return r.off, errors.New("remote: seek to a negative offset")
	}
	if offset != r.off && r.body != nil {
		err := r.body.Close()
		r.body = nil
		if err != nil {
			return r.off, err
		}
	}
	r.off = offset
	return offset, nil
}

func (r *reader) Close() error {
	if r.body == nil {
		return nil
	}
	err := r.body.Close()
	r.body = nil
	return err
}

// Remove implements blob.Remover with a DELETE.
func (s *Store) Remove(ctx context.Context, id string) error {
	if err := askable(id); err != nil {
		return err
	}
	return s.c.Delete(ctx, s.base, id)
}

// Enumerate implements blob.Enumerator. The node's listing pages hold at
// most wire.MaxListLimit blobs, so a larger limit takes several.
func (s *Store) Enumerate(ctx context.Context, after string, limit int) ([]blob.Info, error) {
	// The client sends no limit below 1 (it asks for the node's default
	// page then), so the interface's rule is enforced here.
	if limit <= 0 {
		return nil, errs.E(errs.Invalid, "limit %d must be positive", limit)
	}
	var out []blob.Info
	for len(out) < limit {
		page, err := s.c.List(ctx, s.base, after, min(limit-len(out), wire.MaxListLimit))
		if err != nil {
			return nil, err
		}
		for _, bi := range page.Blobs {
			out = append(out, fromWire(bi))
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	return out, nil
}

// Rehash implements blob.Rehasher: the node re-reads the blob.
func (s *Store) Rehash(ctx context.Context, id string) (blob.Check, error) {
	if err := askable(id); err != nil {
		return blob.Check{}, err
	}
	r, err := s.c.Rehash(ctx, s.base, id)
	if err != nil {
		return blob.Check{}, err
	}
	return blob.Check{ID: r.ID, Size: r.Size, Stored: r.StoredChecksum, Actual: r.ActualChecksum}, nil
}

// Usage implements blob.UsageReporter with the node's stats.
func (s *Store) Usage(ctx context.Context) (blob.Usage, error) {
	st, err := s.c.Stats(ctx, s.base)
	if err != nil {
		return blob.Usage{}, err
	}
	return blob.Usage{Blobs: st.BlobCount, BytesUsed: st.BytesUsed, FreeBytes: st.FreeBytes,
		TotalBytes: st.TotalBytes, CapacityBytes: st.CapacityBytes}, nil
}

// Check implements blob.Checker with the node's readiness probe.
func (s *Store) Check(ctx context.Context) error {
	_, err := s.c.Ready(ctx, s.base)
	return err
}

// Identity implements blob.Identifier: the disk identity the node reported
// when the store was opened.
func (s *Store) Identity() string { return s.identity }

// Close implements io.Closer. It releases nothing: the blobs stay with the
// node, which is closed by whoever runs it, and the connections belong to the
// client's transport.
func (s *Store) Close() error { return nil }
