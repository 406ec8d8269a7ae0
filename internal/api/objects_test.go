package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/auth"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// recordingFiles serves every file the store holds, with its id as its
// bytes, and remembers which files were deleted or verified.
type recordingFiles struct {
	api.Files
	store *sqlite.Store
	mu    sync.Mutex
	calls []string
}

func (f *recordingFiles) record(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

func (f *recordingFiles) Metadata(ctx context.Context, id string) (meta.FileRecord, error) {
	return f.store.GetFile(ctx, id)
}

func (f *recordingFiles) Open(ctx context.Context, id string, _ byterange.Request) (*files.Download, error) {
	rec, err := f.store.GetFile(ctx, id)
	if err != nil {
		return nil, err
	}
	return &files.Download{File: rec.File, Body: io.NopCloser(strings.NewReader(id))}, nil
}

func (f *recordingFiles) List(ctx context.Context, statuses []meta.FileStatus, page, size int, visibleTo string) ([]meta.File, int, error) {
	return f.store.ListFiles(ctx, meta.FileQuery{Statuses: statuses, Offset: page * size, Limit: size, VisibleTo: visibleTo})
}

func (f *recordingFiles) Delete(_ context.Context, id string) (files.DeleteResult, error) {
	f.record("delete " + id)
	return files.DeleteResult{Complete: true}, nil
}

func (f *recordingFiles) Verify(_ context.Context, id string) (files.VerifyResult, error) {
	f.record("verify " + id)
	return files.VerifyResult{FileID: id}, nil
}

// TestFileRoutesKeepBucketOwnership: an S3 object is a file, so the file
// routes (by id) would reach another key's objects past the bucket check of
// /api/buckets and the S3 API. A non-admin key gets 403 there on a file
// that holds an object of a bucket it does not own, and may use its own
// objects and the files uploaded without a name; an admin may use all.
func TestFileRoutesKeepBucketOwnership(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	keys, err := auth.New(store, "root-key", "root-secret", nil)
	require.NoError(t, err)
	owner, err := keys.Create(ctx, "owner", "", "", false)
	require.NoError(t, err)
	other, err := keys.Create(ctx, "other", "", "", false)
	require.NoError(t, err)

	newFile := func() string {
		rec := &meta.FileRecord{File: meta.File{ID: uuid.NewString(), Name: "f", ContentType: "text/plain", SizeBytes: 36,
			Status: meta.FileActive, ReplicationFactor: 1}}
		require.NoError(t, store.CreateFile(ctx, rec))
		return rec.ID
	}
	object, plain := newFile(), newFile()
	require.NoError(t, store.CreateBucket(ctx, &meta.Bucket{Name: "photos", Owner: owner.AccessKey}))
	_, err = store.PutObject(ctx, &meta.Object{Bucket: "photos", Key: "2024/beach.jpg", FileID: object, ETag: "e", ContentType: "image/jpeg"})
	require.NoError(t, err)

	fs := &recordingFiles{store: store}
	h := api.New(api.Options{Files: fs, Namespace: store, Objects: &objects.Service{Files: fs, Namespace: store}, Keys: keys,
		Auth: keys.REST(&sigv4.Verifier{Region: "us-east-1", Secrets: keys.Secret}), RootKey: "root-key"})
	call := func(method, path, key, secret string) int {
		req := httptest.NewRequest(method, path, nil)
		req.SetBasicAuth(key, secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	routes := func(id string) []struct{ method, path string } {
		return []struct{ method, path string }{
			{http.MethodGet, "/api/files/" + id}, {http.MethodGet, "/api/files/" + id + "/metadata"},
			{http.MethodPost, "/api/files/" + id + "/verify"}, {http.MethodDelete, "/api/files/" + id},
		}
	}

	for _, rt := range routes(object) {
		require.Equal(t, http.StatusForbidden, call(rt.method, rt.path, other.AccessKey, other.SecretKey),
			"%s %s by a key that does not own the object's bucket", rt.method, rt.path)
	}
	require.Empty(t, fs.calls, "nothing was verified or deleted for the other key")
	for _, k := range []auth.Key{owner, other} {
		for _, rt := range routes(plain) {
			require.Less(t, call(rt.method, rt.path, k.AccessKey, k.SecretKey), 300, "%s %s: a file without a name is anyone's", rt.method, rt.path)
		}
	}
	for _, k := range []auth.Key{owner, {AccessKey: "root-key", SecretKey: "root-secret"}} {
		for _, rt := range routes(object) {
			require.Less(t, call(rt.method, rt.path, k.AccessKey, k.SecretKey), 300, "%s %s by %s", rt.method, rt.path, k.AccessKey)
		}
	}

	// The file list leaves the object out for the other key alone.
	listed := func(key, secret string) []string {
		req := httptest.NewRequest(http.MethodGet, "/api/files", nil)
		req.SetBasicAuth(key, secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var page apiwire.FileList
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		var ids []string
		for _, f := range page.Items {
			ids = append(ids, f.FileID)
		}
		require.Len(t, ids, page.Total)
		return ids
	}
	require.ElementsMatch(t, []string{plain}, listed(other.AccessKey, other.SecretKey))
	require.ElementsMatch(t, []string{object, plain}, listed(owner.AccessKey, owner.SecretKey))
	require.ElementsMatch(t, []string{object, plain}, listed("root-key", "root-secret"))
}
