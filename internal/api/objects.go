package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/auth"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
)

// Objects stores and deletes named objects (objects.Service).
type Objects interface {
	Put(ctx context.Context, req objects.PutRequest) (meta.Object, files.UploadResult, error)
	Delete(ctx context.Context, bucket, key string) error
	DeleteIf(ctx context.Context, bucket, key string, p meta.Precondition) error
}

type bucketJSON struct {
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"createdAt"`
}

type objectJSON struct {
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	FileID      string    `json:"fileId"`
	SizeBytes   int64     `json:"sizeBytes"`
	ETag        string    `json:"etag"`
	ContentType string    `json:"contentType"`
	ModifiedAt  time.Time `json:"modifiedAt"`
}

func toObjectJSON(o meta.Object) objectJSON {
	return objectJSON{Bucket: o.Bucket, Key: o.Key, FileID: o.FileID, SizeBytes: o.SizeBytes, ETag: o.ETag,
		ContentType: o.ContentType, ModifiedAt: o.ModifiedAt}
}

type objectListJSON struct {
	Objects   []objectJSON `json:"objects"`
	Prefixes  []string     `json:"prefixes"`
	Truncated bool         `json:"truncated"`
	Next      string       `json:"next,omitempty"`
}

type putObjectJSON struct {
	files.UploadResult
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	ETag   string `json:"etag"`
}

// caller is who sends r: its access key ("" when the API is open) and
// whether it is an admin.
func caller(r *http.Request) (string, bool) {
	id, _ := auth.FromContext(r.Context())
	return id.AccessKey, id.Admin
}

// bucket reads the request's bucket and checks that its caller may use it.
func (s *server) bucket(r *http.Request) (meta.Bucket, error) {
	b, err := s.Namespace.GetBucket(r.Context(), chi.URLParam(r, "bucket"))
	if err != nil {
		return meta.Bucket{}, err
	}
	ak, admin := caller(r)
	return b, objects.Allowed(b, ak, admin)
}

// fileAllowed checks that the caller may use file id through the file
// routes: a file that holds an object belongs to the object's bucket, as
// under /api/buckets and on the S3 API; a file without a name is anyone's,
// as before. An id that is not one is left to the file service to refuse.
func (s *server) fileAllowed(r *http.Request, id string) error {
	ak, admin := caller(r)
	if s.Namespace == nil || ak == "" || admin || files.ValidateFileID(id) != nil {
		return nil
	}
	o, err := s.Namespace.ObjectByFile(r.Context(), id)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	b, err := s.Namespace.GetBucket(r.Context(), o.Bucket)
	if err != nil {
		return err
	}
	return objects.Allowed(b, ak, admin)
}

func (s *server) listBuckets(w http.ResponseWriter, r *http.Request) {
	all, err := s.Namespace.ListBuckets(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	ak, admin := caller(r)
	out := []bucketJSON{}
	for _, b := range all {
		if objects.Allowed(b, ak, admin) == nil {
			out = append(out, bucketJSON{Name: b.Name, Owner: b.Owner, CreatedAt: b.CreatedAt})
		}
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (s *server) createBucket(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "bucket")
	if !objects.ValidBucketName(name) {
		httpx.WriteError(w, r, errs.E(errs.Invalid, "bucket name %q breaks S3's rules: 3 to 63 lower-case letters, digits, '.' and '-'", name))
		return
	}
	owner, _ := caller(r)
	if owner == "" {
		owner = s.RootKey // an open API creates as the root key, so S3 clients with it see the bucket
	}
	b := meta.Bucket{Name: name, Owner: owner}
	if err := s.Namespace.CreateBucket(r.Context(), &b); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, bucketJSON{Name: b.Name, Owner: b.Owner, CreatedAt: b.CreatedAt})
}

func (s *server) listObjects(w http.ResponseWriter, r *http.Request) {
	if _, err := s.bucket(r); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 1000, "limit")
	if err == nil && (limit < 1 || limit > 1000) {
		err = errs.E(errs.Invalid, "limit must be 1-1000, got %d", limit)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	page, err := meta.List(r.Context(), s.Namespace, meta.ListQuery{Bucket: chi.URLParam(r, "bucket"), Prefix: q.Get("prefix"),
		Delimiter: q.Get("delimiter"), After: q.Get("after"), MaxKeys: limit})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	out := objectListJSON{Objects: []objectJSON{}, Prefixes: []string{}, Truncated: page.Truncated}
	for _, o := range page.Objects {
		out.Objects = append(out.Objects, toObjectJSON(o))
	}
	out.Prefixes = append(out.Prefixes, page.Prefixes...)
	if page.Truncated {
		out.Next = page.Next
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// objectKey is the request's ?key=, checked.
func objectKey(r *http.Request) (string, error) {
	key := r.URL.Query().Get("key")
	if key == "" || len(key) > meta.MaxKeyBytes {
		return "", errs.E(errs.Invalid, "key must be 1 to %d bytes", meta.MaxKeyBytes)
	}
	return key, nil
}

func (s *server) putObject(w http.ResponseWriter, r *http.Request) {
	key, err := objectKey(r)
	var cond *meta.Precondition
	if err == nil {
		cond, err = objects.Precondition(r.Header.Get("If-Match"), r.Header.Get("If-None-Match"))
	}
	if err == nil {
		_, err = s.bucket(r)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	// The file service refuses a body past MAX_FILE_SIZE itself.
	o, res, err := s.Objects.Put(r.Context(), objects.PutRequest{Bucket: chi.URLParam(r, "bucket"), Key: key,
		Body: kindReader{r.Body}, ContentMD5: r.Header.Get("Content-MD5"), ContentType: r.Header.Get("Content-Type"),
		Precondition: cond})
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.Header().Set("ETag", `"`+o.ETag+`"`)
	httpx.WriteJSON(w, http.StatusCreated, putObjectJSON{UploadResult: res, Bucket: o.Bucket, Key: o.Key, ETag: o.ETag})
}

func (s *server) getObject(w http.ResponseWriter, r *http.Request) {
	key, err := objectKey(r)
	if err == nil {
		_, err = s.bucket(r)
	}
	var o meta.Object
	if err == nil {
		o, err = s.Namespace.GetObject(r.Context(), chi.URLParam(r, "bucket"), key)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.Header().Set("X-Object-Etag", `"`+o.ETag+`"`)
	s.serveFile(w, r, o.FileID)
}

func (s *server) deleteObject(w http.ResponseWriter, r *http.Request) {
	key, err := objectKey(r)
	if err == nil {
		_, err = s.bucket(r)
	}
	var cond *meta.Precondition
	if err == nil {
		cond, err = objects.Precondition(r.Header.Get("If-Match"), "")
	}
	switch {
	case err != nil:
	case cond != nil:
		err = s.Objects.DeleteIf(r.Context(), chi.URLParam(r, "bucket"), key, *cond)
	default:
		err = s.Objects.Delete(r.Context(), chi.URLParam(r, "bucket"), key)
	}
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
