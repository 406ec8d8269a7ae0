package api

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta"
)

// Uploads is the upload-session part of the file service: resumable
// uploads sent as numbered parts.
type Uploads interface {
	CreateSession(ctx context.Context, spec files.SessionSpec) (files.Session, error)
	PutPartWith(ctx context.Context, sessionID string, number int, body io.Reader, size int64, opt files.PartOptions) (files.Part, error)
	GetSession(ctx context.Context, sessionID string) (files.Session, []files.Part, error)
	ListSessions(ctx context.Context, after string, limit int) ([]files.Session, error)
	CompleteSession(ctx context.Context, sessionID string, parts []int, wantSHA256 string) (meta.FileRecord, error)
	AbortSession(ctx context.Context, sessionID string) error
}

// routeUploads adds the /api/uploads routes.
func (s *server) routeUploads(r chi.Router) {
	r.Post("/uploads", s.createUpload)
	r.Get("/uploads", s.listUploads)
	r.Get("/uploads/{uploadId}", s.getUpload)
	r.Put("/uploads/{uploadId}/parts/{partNumber}", s.putPart)
	r.Post("/uploads/{uploadId}/complete", s.completeUpload)
	r.Delete("/uploads/{uploadId}", s.abortUpload)
}

type createUploadJSON struct {
	FileName    string `json:"fileName"`
	ContentType string `json:"contentType"`
	Checksum    string `json:"checksum"`
}

func (s *server) createUpload(w http.ResponseWriter, r *http.Request) {
	var in createUploadJSON
	if err := decodeJSON(r, &in); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	sess, err := s.Uploads.CreateSession(r.Context(), files.SessionSpec{
		FileName: in.FileName, ContentType: in.ContentType, ExpectedSHA256: in.Checksum,
	})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/uploads/"+sess.ID)
	httpx.WriteJSON(w, http.StatusCreated, sess)
}

func (s *server) listUploads(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 100, "limit")
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	items, err := s.Uploads.ListSessions(r.Context(), q.Get("after"), limit)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

type uploadJSON struct {
	files.Session
	Parts []files.Part `json:"parts"`
}

func (s *server) getUpload(w http.ResponseWriter, r *http.Request) {
	sess, parts, err := s.Uploads.GetSession(r.Context(), chi.URLParam(r, "uploadId"))
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, uploadJSON{Session: sess, Parts: parts})
}

func (s *server) putPart(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(chi.URLParam(r, "partNumber"))
	if err != nil || n < 1 || n > files.MaxPartNumber {
		httpx.WriteError(w, r, errs.E(errs.Invalid, "part number must be an integer from 1 to %d", files.MaxPartNumber))
		return
	}
	if r.ContentLength > files.MaxPartSize {
		httpx.WriteError(w, r, errs.E(errs.TooLarge, "a part is at most %d bytes", int64(files.MaxPartSize)))
		return
	}
	var opt files.PartOptions
	switch r.URL.Query().Get("md5") {
	case "", "true":
	case "false":
		opt.SkipMD5 = true
	default:
		httpx.WriteError(w, r, errs.E(errs.Invalid, "md5 must be true or false"))
		return
	}
	body := http.MaxBytesReader(w, r.Body, files.MaxPartSize)
	part, err := s.Uploads.PutPartWith(r.Context(), chi.URLParam(r, "uploadId"), n, kindReader{body}, r.ContentLength, opt)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.Header().Set("ETag", `"`+part.SHA256+`"`)
	httpx.WriteJSON(w, http.StatusOK, part)
}

type completeUploadJSON struct {
	Parts    []int  `json:"parts"`
	Checksum string `json:"checksum"`
}

func (s *server) completeUpload(w http.ResponseWriter, r *http.Request) {
	var in completeUploadJSON
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &in); err != nil {
			httpx.WriteError(w, r, err)
			return
		}
	}
	rec, err := s.Uploads.CompleteSession(r.Context(), chi.URLParam(r, "uploadId"), in.Parts, in.Checksum)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/files/"+rec.ID)
	httpx.WriteJSON(w, http.StatusCreated, files.ResultOf(rec))
}

func (s *server) abortUpload(w http.ResponseWriter, r *http.Request) {
	if err := s.Uploads.AbortSession(r.Context(), chi.URLParam(r, "uploadId")); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// replicasJSON and chunksJSON are a file's copies and chunks in its
// metadata.
func replicasJSON(rec meta.FileRecord) []apiwire.Replica {
	out := []apiwire.Replica{}
	for _, c := range rec.Replicas {
		out = append(out, apiwire.Replica{
			NodeID: c.NodeID, Status: apiwire.CopyStatus(c.Status), Primary: c.NodeID == rec.PrimaryNodeID,
			CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		})
	}
	return out
}

func chunksJSON(rec meta.FileRecord) []apiwire.Chunk {
	if !rec.Manifest() {
		return nil
	}
	out := make([]apiwire.Chunk, 0, len(rec.Chunks))
	for i, c := range rec.Chunks {
		out = append(out, apiwire.Chunk{
			Index: i, ChunkID: c.ID, Offset: c.Chunk.Offset, SizeBytes: c.SizeBytes, Checksum: c.Checksum,
			Status: apiwire.FileStatus(c.Status), Reason: c.StatusReason, Replicas: replicasJSON(c),
		})
	}
	return out
}
