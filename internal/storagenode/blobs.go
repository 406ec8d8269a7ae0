package storagenode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"

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
	id, err := blobID(r)
	var (
		info    blob.Info
		created bool
	)
	if err == nil {
		// ContentLength is -1 for a chunked body: the store then enforces
		// the capacity limit as the bytes arrive instead of up front.
		info, created, err = s.receive(r.Context(), id, r.Header.Get(wire.HeaderChecksum), r.ContentLength, r.Body)
	}
	s.countWrite(info, created, err)
	if err != nil {
		s.logRefusal(r.Context(), requestIDFrom(r.Context()), "blob write refused", err)
		writeBlobError(w, r, err)
		return
	}
	s.corrupt.clear(id)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpx.WriteJSON(w, status, wire.BlobInfo{ID: info.ID, Size: info.Size, Checksum: info.Checksum})
}

// receive stores one blob as a PUT of it asks: declared is the checksum
// header's value.
func (s *Server) receive(ctx context.Context, id, declared string, size int64, body io.Reader) (blob.Info, bool, error) {
	sum, err := declaredSum(declared)
	if err != nil {
		return blob.Info{}, false, err
	}
	return s.store.Receive(ctx, id, sum, size, body)
}

// declaredSum checks the checksum a write declares for its body and gives it
// in its canonical form.
func declaredSum(declared string) (string, error) {
	if declared == "" {
		return "", errs.E(errs.Invalid, "header %s (the SHA-256 of the body) is required", wire.HeaderChecksum)
	}
	return blob.ValidateChecksum(declared)
}

// countWrite counts a write's outcome.
func (s *Server) countWrite(info blob.Info, created bool, err error) {
	switch {
	case err != nil:
		s.metrics.writes.WithLabelValues(outcomeOf(err)).Inc()
	case created:
		s.metrics.writes.WithLabelValues(outcomeCreated).Inc()
		s.metrics.received.Add(float64(info.Size))
	default:
		s.metrics.writes.WithLabelValues(outcomeExists).Inc()
	}
}

// putBlobBatch writes the blobs of a batch (wire.PathBlobBatch) side by
// side, so that they share the store's syncs as concurrent PUTs do, and
// answers each as its own PUT would have been answered, once all of them
// have their outcome. A body that cannot be read whole or parsed is refused
// whole, and then nothing of it is written.
func (s *Server) putBlobBatch(w http.ResponseWriter, r *http.Request) {
	body, err := readBatch(r)
	if err != nil {
		s.logRefusal(r.Context(), requestIDFrom(r.Context()), "blob batch refused", err)
		httpx.WriteError(w, r, err)
		return
	}
	items, err := wire.ParseBatch(body)
	if err != nil {
		err = errs.Wrap(errs.Invalid, err, "blob batch")
		s.logRefusal(r.Context(), requestIDFrom(r.Context()), "blob batch refused", err)
		httpx.WriteError(w, r, err)
		return
	}
	s.metrics.batchItems.Observe(float64(len(items)))
	results := make([]wire.BatchResult, len(items))
	if br, ok := s.store.(blob.BatchReceiver); ok {
		s.receiveBatch(r.Context(), br, items, results)
	} else {
		var wg sync.WaitGroup
		for i := range items {
			wg.Go(func() {
				info, created, err := s.receiveItem(r.Context(), items[i])
				results[i] = s.itemResult(r.Context(), items[i], info, created, err)
			})
		}
		wg.Wait()
	}
	httpx.WriteJSON(w, http.StatusOK, wire.BatchAnswer{Results: results})
}

// receiveBatch stores the valid items of a batch with one call of a store
// that takes them together (blob.BatchReceiver) and answers every item in
// results.
func (s *Server) receiveBatch(ctx context.Context, br blob.BatchReceiver, items []wire.BatchItem, results []wire.BatchResult) {
	valid := make([]blob.BatchItem, 0, len(items))
	at := make([]int, 0, len(items))
	for i, it := range items {
		sum, err := checkItem(it)
		if err != nil {
			results[i] = s.itemResult(ctx, it, blob.Info{}, false, err)
			continue
		}
		valid = append(valid, blob.BatchItem{ID: it.ID, Checksum: sum, Data: it.Data})
		at = append(at, i)
	}
	for j, res := range br.ReceiveBatch(ctx, valid) {
		i := at[j]
		results[i] = s.itemResult(ctx, items[i], res.Info, res.Created, res.Err)
	}
}

// checkItem checks a batch item's id and declared checksum as a PUT's are
// checked, and gives the checksum in its canonical form.
func checkItem(it wire.BatchItem) (string, error) {
	if err := blob.ValidateID(it.ID); err != nil {
		return "", err
	}
	return declaredSum(it.Checksum)
}

// readBatch reads a batch's body whole, refusing one over
// wire.MaxBatchBytes with 413.
func readBatch(r *http.Request) ([]byte, error) {
	tooLarge := func() error {
		return errs.E(errs.TooLarge, "a blob batch is at most %d bytes", wire.MaxBatchBytes)
	}
	if r.ContentLength > wire.MaxBatchBytes {
		return nil, tooLarge()
	}
	if r.ContentLength >= 0 {
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, "read the blob batch")
		}
		return body, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, wire.MaxBatchBytes+1))
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "read the blob batch")
	}
	if len(body) > wire.MaxBatchBytes {
		return nil, tooLarge()
	}
	return body, nil
}

// receiveItem stores one blob of a batch.
func (s *Server) receiveItem(ctx context.Context, it wire.BatchItem) (blob.Info, bool, error) {
	if err := blob.ValidateID(it.ID); err != nil {
		return blob.Info{}, false, err
	}
	return s.receive(ctx, it.ID, it.Checksum, int64(len(it.Data)), bytes.NewReader(it.Data))
}

// itemResult counts and logs the outcome of one blob of a batch and gives
// its answer, as its own PUT would have been answered.
func (s *Server) itemResult(ctx context.Context, it wire.BatchItem, info blob.Info, created bool, err error) wire.BatchResult {
	s.countWrite(info, created, err)
	if err == nil {
		s.corrupt.clear(it.ID)
	}
	if err != nil {
		s.logRefusal(ctx, it.RequestID, "blob write refused", err, "id", it.ID, "batched", true)
		status, code, msg := httpx.Answer(err)
		return wire.BatchResult{ID: it.ID, Status: status, Error: code, Message: msg}
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	// The access log has one line for the whole batch; this one carries the
	// blob's own request id, as the line of its PUT would have.
	if s.log.Enabled(ctx, slog.LevelInfo) {
		s.log.LogAttrs(ctx, slog.LevelInfo, "batched blob write",
			slog.String("id", it.ID), slog.Int("status", status), slog.Int("bytes_in", len(it.Data)),
			slog.String("request_id", it.RequestID))
	}
	return wire.BatchResult{ID: info.ID, Status: status, Size: info.Size, Checksum: info.Checksum}
}

// logRefusal logs why a request failed, at a level that says whose problem
// it is: the caller's (info), the disk's fullness (warn) or the node's (error).
func (s *Server) logRefusal(ctx context.Context, requestID, msg string, err error, attrs ...any) {
	level := slog.LevelInfo
	switch errs.KindOf(err) {
	case errs.NoSpace:
		level = slog.LevelWarn
	case errs.Other, errs.Unavailable:
		level = slog.LevelError
	}
	s.log.Log(ctx, level, msg, append([]any{"err", err, "request_id", requestID}, attrs...)...)
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

// getBlob sends a blob, or the range asked, checked as verified.go says;
// X-Checksum-Sha256 carries the recorded checksum either way.
func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) {
	id, err := blobID(r)
	if err != nil {
		s.metrics.reads.WithLabelValues(outcomeInvalid).Inc()
		writeBlobError(w, r, err)
		return
	}
	if s.corrupt.has(id) {
		s.metrics.reads.WithLabelValues(outcomeCorrupt).Inc()
		writeBlobError(w, r, errBlobCorrupt(id))
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
	if !partial {
		rng = byterange.Range{Length: info.Size}
	}
	v, verified, err := s.prepareVerified(r.Context(), r, id, rc, info, rng)
	if err != nil {
		s.metrics.reads.WithLabelValues(outcomeOf(err)).Inc()
		writeBlobError(w, r, err)
		return
	}
	if partial {
		status, outcome = http.StatusPartialContent, outcomePartial
		w.Header().Set("Content-Range", rng.ContentRange(info.Size))
	}
	if verified {
		s.sendVerified(w, r, v, status, outcome)
		return
	}
	if partial {
		if _, err := rc.Seek(rng.Start, io.SeekStart); err != nil {
			s.metrics.reads.WithLabelValues(outcomeError).Inc()
			writeBlobError(w, r, errs.Wrap(errs.Other, err, "seek in blob %s", id))
			return
		}
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

// sendVerified sends a read the node checks as it goes (verified.go).
func (s *Server) sendVerified(w http.ResponseWriter, r *http.Request, v *verifiedRead, status int, outcome string) {
	n, started, err := v.send(w, status)
	s.metrics.sent.Add(float64(n))
	switch {
	case err != nil && !started:
		s.metrics.reads.WithLabelValues(outcomeOf(err)).Inc()
		writeBlobError(w, r, err)
	case err != nil:
		s.metrics.reads.WithLabelValues(outcomeAborted).Inc()
		s.log.WarnContext(r.Context(), "blob read cut short", "id", v.id, "sent", n, "want", v.rng.Length, "err", err,
			"request_id", requestIDFrom(r.Context()))
		// Close the connection rather than end the answer: a reader that
		// counted on Content-Length sees a broken transfer.
		panic(http.ErrAbortHandler)
	default:
		s.metrics.reads.WithLabelValues(outcome).Inc()
	}
}

func (s *Server) headBlob(w http.ResponseWriter, r *http.Request) {
	id, err := blobID(r)
	if err != nil {
		writeBlobError(w, r, err)
		return
	}
	if s.corrupt.has(id) {
		writeBlobError(w, r, errBlobCorrupt(id))
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
		s.logRefusal(r.Context(), requestIDFrom(r.Context()), "blob delete failed", err)
		writeBlobError(w, r, err)
		return
	}
	s.corrupt.clear(id)
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
		s.logRefusal(r.Context(), requestIDFrom(r.Context()), "blob rehash failed", err)
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
