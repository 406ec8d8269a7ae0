package objects

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
)

// storeFiles is a file service over the embedded store that keeps no
// bytes: an upload records a file and, when it is told of an object and
// bind is set, moves the key in its final write, as the file service does
// with a body it stores whole (without bind: as with one it stores as
// chunks).
type storeFiles struct {
	st      *sqlite.Store
	bind    bool
	deleted []string
}

func (f *storeFiles) Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error) {
	n, err := io.Copy(io.Discard, req.Body)
	if err != nil {
		return files.UploadResult{}, err
	}
	rec := &meta.FileRecord{File: meta.File{ID: uuid.NewString(), Name: req.FileName, SizeBytes: n,
		Status: meta.FilePending, ReplicationFactor: 1}}
	if err := f.st.CreateFile(ctx, rec); err != nil {
		return files.UploadResult{}, err
	}
	rec.Status = meta.FileActive
	res := files.UploadResult{FileID: rec.ID, SizeBytes: n}
	if req.Object == nil || !f.bind {
		return res, f.st.UpdateFile(ctx, rec)
	}
	o := req.Object(rec.File)
	res.Replaced, err = f.st.UpdateFileAndPutObject(ctx, rec, &o)
	res.Object = &o
	return res, err
}

func (f *storeFiles) Open(context.Context, string, byterange.Request) (*files.Download, error) {
	panic("not used")
}

func (f *storeFiles) Delete(ctx context.Context, id string) (files.DeleteResult, error) {
	f.deleted = append(f.deleted, id)
	return files.DeleteResult{}, f.st.DeleteFile(ctx, id)
}

// Put stores the key whether the file service moved it in the upload's
// final write or left it to Put, and deletes the file the key held either
// way.
func TestPutOverwritesAndDeletesTheOldFile(t *testing.T) {
	for _, bind := range []bool{true, false} {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.CreateBucket(ctx, &meta.Bucket{Name: "b", Owner: "AK"}))
		fs := &storeFiles{st: st, bind: bind}
		s := &Service{Files: fs, Namespace: st}

		first, _, err := s.Put(ctx, PutRequest{Bucket: "b", Key: "dir/k", Body: strings.NewReader("one")})
		require.NoError(t, err)
		second, res, err := s.Put(ctx, PutRequest{Bucket: "b", Key: "dir/k", Body: strings.NewReader("two!"),
			ContentType: "text/plain", Headers: map[string]string{"x-amz-meta-a": "b"}})
		require.NoError(t, err)
		require.Equal(t, res.FileID, second.FileID)
		require.EqualValues(t, 4, second.SizeBytes)
		require.Equal(t, "9f5b6d9a034d175868bf593885b7dc4e", second.ETag, "MD5 of the bytes")
		require.False(t, second.ModifiedAt.IsZero(), "the object is returned as stored")
		stored, err := st.GetObject(ctx, "b", "dir/k")
		require.NoError(t, err)
		require.Equal(t, second, stored, "bind %v", bind)
		require.Equal(t, []string{first.FileID}, fs.deleted, "bind %v: the old file is deleted", bind)
	}
}
