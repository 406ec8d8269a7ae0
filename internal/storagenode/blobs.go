package storagenode

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// blobID returns the {id} of the route, unescaped and validated: a bad id is
// answered with 400 before any storage is touched.
func blobID(r *http.Request) (string, error) {
	raw := chi.URLParam(r, "id")
	id, err := url.PathUnescape(raw)
	if err != nil {
		return "", errs.Wrap(errs.Invalid, err, "blob id %q is not a valid path segment", raw)
	}
	return id, blob.ValidateID(id)
}

// writeBlobError answers err, naming a missing blob BLOB_NOT_FOUND.
func writeBlobError(w http.ResponseWriter, r *http.Request, err error) {
	if errs.Is(err, errs.NotFound) {
		err = errs.WithCode(errs.NotFound, errs.CodeBlobNotFound, err, "")
	}
	httpx.WriteError(w, r, err)
}

func (s *Server) putBlob(w http.ResponseWriter, r *http.Request) {
	info, created, err := s.receive(r)
	if err != nil {
		s.metrics.writes.WithLabelValues(outcomeOf(err)).Inc()
		s.logRefusal(r, "blob write refused", err)
		writeBlobError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		s.metrics.writes.WithLabelValues(outcomeCreated).Inc()
		s.metrics.received.Add(float64(info.Size))
	} else {
		s.metrics.writes.WithLabelValues(outcomeExists).Inc()
	}
	httpx.WriteJSON(w, status, wire.BlobInfo{ID: info.ID, Size: info.Size, Checksum: info.Checksum})
}

func (s *Server) receive(r *http.Request) (blob.Info, bool, error) {
	id, err := blobID(r)
	if err != nil {
		return blob.Info{}, false, err
	}
	declared := r.Header.Get(wire.HeaderChecksum)
	if declared == "" {
		return blob.Info{}, false, errs.E(errs.Invalid, "header %s (the SHA-256 of the body) is required", wire.HeaderChecksum)
	}
	sum, err := blob.ValidateChecksum(declared)
	if err != nil {
		return blob.Info{}, false, err
	}
	// ContentLength is -1 for a chunked body: the store then enforces the
	// capacity limit as the bytes arrive instead of up front.
	return s.store.Receive(r.Context(), id, sum, r.ContentLength, r.Body)
}

// logRefusal logs why a request failed, at a level that says whose problem
// it is: the caller's (info), the disk's fullness (warn) or the node's (error).
func (s *Server) logRefusal(r *http.Request, msg string, err error) {
	level := slog.LevelInfo
	switch errs.KindOf(err) {
	case errs.NoSpace:
		level = slog.LevelWarn
	case errs.Other, errs.Unavailable:
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, msg, "err", err, "request_id", requestIDFrom(r.Context()))
}

// setBlobHeaders describes a blob on GET and HEAD. The ETag is the recorded
// checksum, so a client can tell versions apart without reading the bytes.
func setBlobHeaders(w http.ResponseWriter, info blob.Info) {
	h := w.Header()
	h.Set("Content-Type", wire.ContentTypeBlob)
	h.Set("Accept-Ranges", "bytes")
	h.Set(wire.HeaderChecksum, info.Checksum)
	h.Set(wire.HeaderBlobSize, strconv.FormatInt(info.Size, 10))
	h.Set("ETag", etag(info))
}

// smallSendMax is the longest body sendBlob reads in one piece.
const smallSendMax = 64 << 10

// sendBlob writes length bytes of rc to w. A small body is read with one
// read into a pooled buffer and written with one write: streamed, the
// server reads its first 512 bytes on their own (to sniff them) and then
// copies the rest through a buffer of its own, two reads, two writes and an
// allocation for a 4 KiB blob in a volume; and it leaves with the answer's
// head in one write (httpx.WriteWhole). A larger one is streamed, so that
// the server can use sendfile when the store hands out a file.
func sendBlob(w http.ResponseWriter, r *http.Request, rc io.Reader, length int64) (int64, error) {
	if length > smallSendMax {
		return io.Copy(w, io.LimitReader(rc, length))
	}
	bp := bufpool.Get()
	defer bufpool.Put(bp)
	buf := (*bp)[:length]
	got, err := io.ReadFull(rc, buf)
	if err != nil {
		// Send what there is, so the response is cut short where the
		// blob was, as a streamed one would be.
		n, _ := w.Write(buf[:got])
		return int64(n), err
	}
	n, err := httpx.WriteWhole(w, r, buf)
	return int64(n), err
}

func etag(info blob.Info) string { return `"` + info.Checksum + `"` }

// getBlob streams a blob as stored. It does not verify the bytes: the
// X-Checksum-Sha256 header carries the recorded checksum and the reader
// compares.
func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) {
	id, err := blobID(r)
	if err != nil {
		s.metrics.reads.WithLabelValues(outcomeInvalid).Inc()
		writeBlobError(w, r, err)
		return
	}
	rc, info, err := s.store.Fetch(r.Context(), id)
	if err != nil {
		s.metrics.reads.WithLabelValues(outcomeOf(err)).Inc()
		writeBlobError(w, r, err)
		return
	}
	defer rc.Close()
	setBlobHeaders(w, info)
	// Only a single range is honoured: one the node does not understand, a
	// multi-range request, or an If-Range that does not match the ETag is
	// ignored and the whole blob sent (as RFC 9110 allows).
	rng, partial, err := byterange.FromHeader(r.Header).Select(byterange.Validators{ETag: etag(info)}, info.Size)
	if err != nil {
		s.metrics.reads.WithLabelValues(outcomeUnsatisfiable).Inc()
		var unsat *byterange.UnsatisfiableError
		if errors.As(err, &unsat) {
			w.Header().Set("Content-Range", unsat.ContentRange())
		}
		writeBlobError(w, r, err)
		return
	}
	status, outcome := http.StatusOK, outcomeOK
	if partial {
		if _, err := rc.Seek(rng.Start, io.SeekStart); err != nil {
			s.metrics.reads.WithLabelValues(outcomeError).Inc()
			writeBlobError(w, r, errs.Wrap(errs.Other, err, "seek in blob %s", id))
			return
		}
		status, outcome = http.StatusPartialContent, outcomePartial
		w.Header().Set("Content-Range", rng.ContentRange(info.Size))
	} else {
		rng = byterange.Range{Length: info.Size}
	}
	w.Header().Set("Content-Length", strconv.FormatInt(rng.Length, 10))
	w.WriteHeader(status)
	n, err := sendBlob(w, r, rc, rng.Length)
	s.metrics.sent.Add(float64(n))
	if err != nil || n != rng.Length {
		// The status is already sent: all that is left is to cut the
		// response short, which the reader sees as a failed transfer.
		s.metrics.reads.WithLabelValues(outcomeAborted).Inc()
		s.log.WarnContext(r.Context(), "blob read cut short", "id", id, "sent", n, "want", rng.Length, "err", err,
			"request_id", requestIDFrom(r.Context()))
		return
	}
	s.metrics.reads.WithLabelValues(outcome).Inc()
}

func (s *Server) headBlob(w http.ResponseWriter, r *http.Request) {
	id, err := blobID(r)
	if err != nil {
		writeBlobError(w, r, err)
		return
	}
	info, err := s.store.Stat(r.Context(), id)
	if err != nil {
		writeBlobError(w, r, err)
		return
	}
	setBlobHeaders(w, info)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.WriteHeader(http.StatusOK)
}

func (s *Server) deleteBlob(w http.ResponseWriter, r *http.Request) {
	id, err := blobID(r)
	if err == nil {
		err = s.store.Remove(r.Context(), id)
	}
	if err != nil {
		s.metrics.deletes.WithLabelValues(outcomeOf(err)).Inc()
		s.logRefusal(r, "blob delete failed", err)
		writeBlobError(w, r, err)
		return
	}
	s.metrics.deletes.WithLabelValues(outcomeOK).Inc()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) rehashBlob(w http.ResponseWriter, r *http.Request) {
	id, err := blobID(r)
	var c blob.Check
	if err == nil {
		c, err = s.store.Rehash(r.Context(), id)
	}
	if err != nil {
		s.metrics.rehashes.WithLabelValues(outcomeOf(err)).Inc()
		s.logRefusal(r, "blob rehash failed", err)
		writeBlobError(w, r, err)
		return
	}
	if c.Intact() {
		s.metrics.rehashes.WithLabelValues(outcomeIntact).Inc()
	} else {
		s.metrics.rehashes.WithLabelValues(outcomeCorrupt).Inc()
		s.log.WarnContext(r.Context(), "blob is corrupt", "id", id, "stored", c.Stored, "actual", c.Actual,
			"request_id", requestIDFrom(r.Context()))
	}
	httpx.WriteJSON(w, http.StatusOK, wire.ChecksumReport{
		ID: c.ID, Size: c.Size, StoredChecksum: c.Stored, ActualChecksum: c.Actual, Intact: c.Intact(),
	})
}

func (s *Server) listBlobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after := q.Get("after")
	if err := blob.ValidateCursor(after); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	limit := wire.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > wire.MaxListLimit {
			httpx.WriteError(w, r, errs.E(errs.Invalid, "limit %q must be a number from 1 to %d", v, wire.MaxListLimit))
			return
		}
		limit = n
	}
	// One more than asked tells whether another page exists.
	infos, err := s.store.Enumerate(r.Context(), after, limit+1)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := wire.BlobList{Blobs: make([]wire.BlobInfo, 0, min(len(infos), limit))}
	if len(infos) > limit {
		infos = infos[:limit]
		out.Next = infos[limit-1].ID
	}
	for _, info := range infos {
		out.Blobs = append(out.Blobs, wire.BlobInfo{ID: info.ID, Size: info.Size, Checksum: info.Checksum})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	u, err := s.store.Usage(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, wire.Stats{
		NodeID: s.cfg.NodeID, DiskID: s.DiskID(), BlobCount: u.Blobs, BytesUsed: u.BytesUsed,
		FreeBytes: u.FreeBytes, TotalBytes: u.TotalBytes, CapacityBytes: u.CapacityBytes,
	})
}

func (s *Server) live(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, wire.Health{Status: wire.StatusUp, DiskID: s.DiskID(), Version: buildinfo.Version()})
}

// ready answers 503 when the data directory is unusable. A full disk is
// still ready: the node serves reads and refuses writes with 507.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.store.Check(r.Context()); err != nil {
		s.log.WarnContext(r.Context(), "not ready", "err", err)
		httpx.WriteJSON(w, http.StatusServiceUnavailable, wire.Health{Status: wire.StatusDown, Reason: err.Error(), DiskID: s.DiskID()})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, wire.Health{Status: wire.StatusUp, DiskID: s.DiskID()})
}
