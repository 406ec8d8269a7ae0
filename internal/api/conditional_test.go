package api_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
)

// storedFiles records each upload as an ACTIVE file of the store (its
// bytes are not kept) and deletes it from there.
type storedFiles struct {
	api.Files
	store *sqlite.Store
}

func (f *storedFiles) Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return files.UploadResult{}, errs.Wrap(errs.Invalid, err, "read upload body")
	}
	rec := &meta.FileRecord{File: meta.File{ID: uuid.NewString(), Name: req.FileName, ContentType: "text/plain", SizeBytes: int64(len(b)),
		Status: meta.FileActive, ReplicationFactor: 1}}
	if err := f.store.CreateFile(ctx, rec); err != nil {
		return files.UploadResult{}, err
	}
	return files.UploadResult{FileID: rec.ID, SizeBytes: rec.SizeBytes, Status: rec.Status}, nil
}

func (f *storedFiles) Delete(ctx context.Context, id string) (files.DeleteResult, error) {
	return files.DeleteResult{Complete: true}, f.store.DeleteFile(ctx, id)
}

// TestNamedObjectConditionalWrites: a named object's PUT takes
// If-None-Match: * and If-Match, its DELETE If-Match, as S3's PutObject
// and DeleteObject do; a condition that does not hold is 412
// PRECONDITION_FAILED and changes nothing.
func TestNamedObjectConditionalWrites(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, store.CreateBucket(ctx, &meta.Bucket{Name: "locks", Owner: "root"}))
	fs := &storedFiles{store: store}
	h := api.New(api.Options{Files: fs, Namespace: store, Objects: &objects.Service{Files: fs, Namespace: store}})
	call := func(method, body string, hdr ...string) (int, string) {
		t.Helper()
		var r io.Reader
		if method == http.MethodPut {
			r = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, "/api/buckets/locks/object?key=state.tflock", r)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusCreated {
			return rec.Code, "" // the fake upload's result is not one to hold to the document
		}
		openapitest.ValidateRecorder(t, req, rec)
		if rec.Code < 300 {
			return rec.Code, ""
		}
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
		return rec.Code, e.Error
	}
	etag := func(s string) string {
		sum := md5.Sum([]byte(s))
		return `"` + hex.EncodeToString(sum[:]) + `"`
	}
	holds := func(want string) {
		t.Helper()
		o, err := store.GetObject(ctx, "locks", "state.tflock")
		require.NoError(t, err)
		require.Equal(t, etag(want), `"`+o.ETag+`"`)
	}
	live := func() int {
		list, total, err := store.ListFiles(ctx, meta.FileQuery{Limit: 100})
		require.NoError(t, err)
		require.Len(t, list, total)
		return total
	}

	status, code := call(http.MethodPut, "first", "If-Match", etag("first"))
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, errs.CodeObjectNotFound, code, "If-Match on a key that holds nothing")
	status, _ = call(http.MethodPut, "first", "If-None-Match", "*")
	require.Equal(t, http.StatusCreated, status)
	status, code = call(http.MethodPut, "second", "If-None-Match", "*")
	require.Equal(t, http.StatusPreconditionFailed, status)
	require.Equal(t, errs.CodePreconditionFailed, code)
	holds("first")
	status, _ = call(http.MethodPut, "second", "If-Match", etag("other"))
	require.Equal(t, http.StatusPreconditionFailed, status)
	holds("first")
	require.Equal(t, 1, live(), "no refused write left a file")
	status, _ = call(http.MethodPut, "second", "If-Match", etag("first"))
	require.Equal(t, http.StatusCreated, status)
	holds("second")
	require.Equal(t, 1, live(), "the replaced file was deleted")
	status, code = call(http.MethodPut, "third", "If-None-Match", etag("second"))
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, errs.CodeInvalidRequest, code, "If-None-Match on a write takes only *")

	status, code = call(http.MethodDelete, "", "If-Match", etag("first"))
	require.Equal(t, http.StatusPreconditionFailed, status)
	require.Equal(t, errs.CodePreconditionFailed, code)
	holds("second")
	status, code = call(http.MethodDelete, "", "If-Match", ",")
	require.Equal(t, http.StatusBadRequest, status, "an If-Match that names nothing is no unconditional delete")
	require.Equal(t, errs.CodeInvalidRequest, code)
	holds("second")
	status, _ = call(http.MethodDelete, "", "If-Match", etag("second"))
	require.Equal(t, http.StatusNoContent, status)
	require.Equal(t, 0, live())
	status, code = call(http.MethodDelete, "", "If-Match", "*")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, errs.CodeObjectNotFound, code, "a conditional delete of a key that holds nothing")
	status, _ = call(http.MethodDelete, "")
	require.Equal(t, http.StatusNoContent, status, "an unconditional one is already done")
}
