package api

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta"
)

// multipartAllowance is how far an upload body may exceed MaxFileSize for its
// multipart framing (boundaries, part headers, small extra fields).
const multipartAllowance = 1 << 20

func (s *server) upload(w http.ResponseWriter, r *http.Request) {
	limit := s.MaxFileSize + multipartAllowance
	if r.ContentLength > limit {
		// Refuse before reading: the declared length alone is too large.
		httpx.WriteError(w, r, errs.E(errs.TooLarge, "request of %d bytes exceeds the maximum file size of %d bytes", r.ContentLength, s.MaxFileSize))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	mr, err := r.MultipartReader()
	if err != nil {
		httpx.WriteError(w, r, errs.Wrap(errs.Invalid, err, "expected a multipart/form-data body with a 'file' part"))
		return
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			httpx.WriteError(w, r, errs.E(errs.Invalid, "the multipart body has no 'file' part"))
			return
		}
		if err != nil {
			httpx.WriteError(w, r, kindOfBodyError(err, "malformed multipart body"))
			return
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		res, err := s.Files.Upload(r.Context(), files.UploadRequest{
			FileName:       part.FileName(),
			ContentType:    part.Header.Get("Content-Type"),
			Body:           kindReader{part},
			IdempotencyKey: r.Header.Get("Idempotency-Key"),
		})
		if err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		if res.Replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.Header().Set("Location", "/api/files/"+res.FileID)
		httpx.WriteJSON(w, http.StatusCreated, res)
		return
	}
}

func kindOfBodyError(err error, msg string) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.Wrap(errs.TooLarge, err, "request body exceeds the limit")
	}
	return errs.Wrap(errs.Invalid, err, "%s", msg)
}

func (s *server) download(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "fileId")
	if err := s.fileAllowed(r, id); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	s.serveFile(w, r, id)
}

// serveFile streams file id's bytes, honouring Range and If-Range.
func (s *server) serveFile(w http.ResponseWriter, r *http.Request, id string) {
	d, err := s.Files.Open(r.Context(), id, byterange.FromHeader(r.Header))
	if err != nil {
		var unsat *byterange.UnsatisfiableError
		if errors.As(err, &unsat) {
			w.Header().Set("Content-Range", unsat.ContentRange())
		}
		httpx.WriteError(w, r, err)
		return
	}
	defer d.Body.Close()
	h := w.Header()
	h.Set("Content-Type", d.File.ContentType)
	h.Set("Content-Length", strconv.FormatInt(d.Length(), 10))
	h.Set("Content-Disposition", contentDisposition(d.File.Name))
	h.Set("ETag", files.ETag(d.File))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Last-Modified", d.File.CreatedAt.UTC().Format(http.TimeFormat))
	if d.FromCache {
		h.Set("X-Served-From", "content-cache")
	} else {
		h.Set("X-Served-By-Node", d.ServedBy)
	}
	h.Set("X-Checksum-Sha256", d.File.Checksum)
	status := http.StatusOK
	if d.Range != nil {
		status = http.StatusPartialContent
		h.Set("Content-Range", d.Range.ContentRange(d.File.SizeBytes))
	}
	w.WriteHeader(status)
	var n int64
	if b, ok := d.InMemory(); ok {
		// Head and body in one write on a gathering connection.
		var m int
		m, err = httpx.WriteWhole(w, r, b)
		n = int64(m)
	} else {
		n, err = copyBody(w, d.Body)
	}
	if err != nil {
		// Headers are gone; the only honest signal left is a broken transfer.
		s.Logger.Error("download aborted", "file", d.File.ID, "nodes", d.Sources(), "sent", n, "err", err,
			"request_id", httpx.RequestIDFrom(r.Context()))
		panic(http.ErrAbortHandler)
	}
	if src := d.Sources(); len(src) > 1 {
		s.Logger.Info("download served by more than one copy", "file", d.File.ID, "nodes", src, "sent", n,
			"request_id", httpx.RequestIDFrom(r.Context()))
	}
}

// contentDisposition names the file for a download. FormatMediaType quotes
// a plain ASCII name; any other it RFC 2231-encodes as filename*, which some
// clients (curl -J among them) do not read, so a filename= fallback with
// every byte outside printable ASCII replaced by '_' goes first (RFC 6266
// §4.3: a reader that knows filename* prefers it).
func contentDisposition(name string) string {
	exact := mime.FormatMediaType("attachment", map[string]string{"filename": name})
	if strings.Contains(exact, "filename=") {
		return exact
	}
	plain := mime.FormatMediaType("attachment", map[string]string{"filename": asciiFallback(name)})
	if plain == "" {
		plain = "attachment"
	}
	return plain + strings.TrimPrefix(exact, "attachment")
}

// asciiFallback is name with each byte outside printable ASCII replaced by
// '_' (one per rune, so "café" becomes "caf_").
func asciiFallback(name string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '_'
		}
		return r
	}, name)
}

func copyBody(w io.Writer, r io.Reader) (int64, error) {
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	return io.CopyBuffer(w, r, *buf)
}

// toFileJSON is a file's metadata as the API shows it.
func toFileJSON(f meta.File) apiwire.File {
	return apiwire.File{
		FileID: f.ID, FileName: f.Name, ContentType: f.ContentType, SizeBytes: f.SizeBytes,
		Checksum: f.Checksum, Status: apiwire.FileStatus(f.Status), Reason: f.StatusReason, PrimaryNode: f.PrimaryNodeID,
		ReplicationFactor: f.ReplicationFactor, RingPosition: f.RingPosition,
		RingPositionString: strconv.FormatInt(f.RingPosition, 10),
		CreatedAt:          f.CreatedAt, UpdatedAt: f.UpdatedAt,
	}
}

func (s *server) metadata(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "fileId")
	if err := s.fileAllowed(r, id); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	rec, err := s.Files.Metadata(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := toFileJSON(rec.File)
	if s.Namespace != nil {
		if o, err := s.Namespace.ObjectByFile(r.Context(), rec.ID); err == nil {
			out.Bucket, out.Key = o.Bucket, o.Key
		}
	}
	out.Replicas = replicasJSON(rec)
	out.Chunks = chunksJSON(rec)
	httpx.WriteJSON(w, http.StatusOK, out)
}

// locations answers where a file's bytes can be read from the nodes
// directly, with URLs signed for the file's blobs.
func (s *server) locations(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "fileId")
	if err := s.fileAllowed(r, id); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	loc, err := s.Files.Locations(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := apiwire.FileLocations{FileID: loc.File.ID, SizeBytes: loc.File.SizeBytes, Checksum: loc.File.Checksum,
		Blobs: make([]apiwire.BlobLocation, len(loc.Blobs))}
	if loc.Signed {
		out.ExpiresAt = &loc.ExpiresAt
	}
	for i, b := range loc.Blobs {
		out.Blobs[i] = apiwire.BlobLocation{Offset: b.Offset, SizeBytes: b.Size, Checksum: b.Checksum, URLs: b.URLs}
	}
	// The URLs are credentials for a while: no cache may keep them.
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, out)
}

var fileStatuses = map[string]meta.FileStatus{}

func init() {
	for _, st := range []meta.FileStatus{meta.FilePending, meta.FileActive, meta.FileDegraded,
		meta.FileRebalancing, meta.FileFailed, meta.FileDeleted} {
		fileStatuses[string(st)] = st
	}
}

func (s *server) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := intParam(q.Get("page"), 0, "page")
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	size, err := intParam(q.Get("size"), 20, "size")
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var statuses []meta.FileStatus
	for _, v := range splitList(q.Get("status")) {
		st, ok := fileStatuses[v]
		if !ok {
			httpx.WriteError(w, r, errs.E(errs.Invalid, "unknown status %q (use PENDING, ACTIVE, DEGRADED, REBALANCING, FAILED or DELETED)", v))
			return
		}
		statuses = append(statuses, st)
	}
	// A non-admin key does not see the objects of other keys' buckets, as
	// it may not use them (fileAllowed).
	visibleTo := ""
	if ak, admin := caller(r); ak != "" && !admin {
		visibleTo = ak
	}
	items, total, err := s.Files.List(r.Context(), statuses, page, size, visibleTo)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := apiwire.FileList{Items: make([]apiwire.File, 0, len(items)), Page: page, Size: size, Total: total}
	for _, f := range items {
		out.Items = append(out.Items, toFileJSON(f))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func intParam(v string, def int, name string) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errs.E(errs.Invalid, "%s must be an integer", name)
	}
	return n, nil
}

func (s *server) deleteFile(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "fileId")
	if err := s.fileAllowed(r, id); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res, err := s.Files.Delete(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	if res.Complete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	httpx.WriteJSON(w, http.StatusAccepted, res)
}

func (s *server) verify(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "fileId")
	if err := s.fileAllowed(r, id); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	res, err := s.Files.Verify(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}
