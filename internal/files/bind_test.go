package files

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// bindFixture is a service over the embedded store with bucket b, whose key
// k holds a file uploaded earlier.
type bindFixture struct {
	s     *Service
	st    meta.Store
	ns    meta.Namespace
	nodes *gateNodes
	old   string // the file k holds
}

func newBindFixture(t *testing.T, delay time.Duration) *bindFixture {
	t.Helper()
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := newService(t, nodes, ids, func(o *Options) { o.PendingRecordDelay = delay })
	ns := st.(meta.Namespace)
	ctx := context.Background()
	require.NoError(t, ns.CreateBucket(ctx, &meta.Bucket{Name: "b", Owner: "AKIA1"}))
	old, err := s.Upload(ctx, UploadRequest{FileName: "k", Body: strings.NewReader("old bytes"), Object: objectK(nil)})
	require.NoError(t, err)
	return &bindFixture{s: s, st: st, ns: ns, nodes: nodes, old: old.FileID}
}

// eachRecording runs fn with an upload's PENDING row written before its
// copies (PendingRecordDelay 0) and with its only row written at the end.
func eachRecording(t *testing.T, fn func(t *testing.T, delay time.Duration)) {
	t.Run("recorded first", func(t *testing.T) { fn(t, 0) })
	t.Run("recorded at the end", func(t *testing.T) { fn(t, time.Hour) })
}

// objectK names key k of bucket b; seen, when set, learns the file.
func objectK(seen *meta.File) func(meta.File) meta.Object {
	return func(f meta.File) meta.Object {
		if seen != nil {
			*seen = f
		}
		return meta.Object{Bucket: "b", Key: "k", FileID: f.ID, SizeBytes: f.SizeBytes, ETag: "etag", ContentType: "text/plain"}
	}
}

func (f *bindFixture) requireKeyHolds(t *testing.T, id, why string) {
	t.Helper()
	o, err := f.ns.GetObject(context.Background(), "b", "k")
	require.NoError(t, err)
	require.Equal(t, id, o.FileID, why)
}

// requireGone checks that the file is deleted: no row readable as a file
// and no copy left on any node.
func (f *bindFixture) requireGone(t *testing.T, id string) {
	t.Helper()
	rec, err := f.st.GetFile(context.Background(), id)
	if err == nil {
		require.Equal(t, meta.FileDeleted, rec.Status)
	} else {
		require.True(t, errs.Is(err, errs.NotFound), "%v", err)
	}
	for n, m := range f.nodes.stores {
		_, err := m.Stat(context.Background(), id)
		require.True(t, errs.Is(err, errs.NotFound), "node %s still holds the file: %v", n, err)
	}
}

// The key moves in the upload's final write: while the copies are being
// written it still names the old file, and once the upload has returned it
// names the new one, ACTIVE; the old file is the caller's to delete.
func TestUploadMovesItsKeyInTheFinalWrite(t *testing.T) {
	eachRecording(t, func(t *testing.T, delay time.Duration) {
		f := newBindFixture(t, delay)
		f.nodes.gate = make(chan struct{})
		var seen meta.File
		done := make(chan UploadResult)
		go func() {
			res, err := f.s.Upload(context.Background(), UploadRequest{FileName: "k", Body: strings.NewReader("new bytes"), Object: objectK(&seen)})
			assertNoError(t, err)
			done <- res
		}()
		<-f.nodes.started
		f.requireKeyHolds(t, f.old, "the key keeps the old file while the new one's copies are written")
		close(f.nodes.gate)
		res := <-done

		require.Equal(t, seen.ID, res.FileID)
		require.EqualValues(t, len("new bytes"), seen.SizeBytes, "the object is made once the body is read whole")
		require.NotNil(t, res.Object)
		require.Equal(t, res.FileID, res.Object.FileID)
		require.False(t, res.Object.ModifiedAt.IsZero(), "the result holds the object as stored")
		require.Equal(t, f.old, res.Replaced)
		f.requireKeyHolds(t, res.FileID, "the key names the new file")
		rec, err := f.st.GetFile(context.Background(), res.FileID)
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, rec.Status)
	})
}

func assertNoError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// A bucket deleted while the bytes were uploading: the upload fails with
// the bucket's error, and the new file is deleted with its copies.
func TestUploadWhoseBucketWentAwayFailsAndLeavesNothing(t *testing.T) {
	eachRecording(t, func(t *testing.T, delay time.Duration) {
		f := newBindFixture(t, delay)
		ctx := context.Background()
		_, err := f.ns.DeleteObject(ctx, "b", "k")
		require.NoError(t, err)
		f.nodes.gate = make(chan struct{})
		var seen meta.File
		failed := make(chan error)
		go func() {
			_, err := f.s.Upload(ctx, UploadRequest{FileName: "k", Body: strings.NewReader("new bytes"), Object: objectK(&seen)})
			failed <- err
		}()
		<-f.nodes.started
		require.NoError(t, f.ns.DeleteBucket(ctx, "b"))
		close(f.nodes.gate)
		err = <-failed
		require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(err), "%v", err)
		require.NotEmpty(t, seen.ID)
		f.requireGone(t, seen.ID)
	})
}

// failedFinalWrite is a store whose final writes with a key fail, as a
// transaction that could not commit does.
type failedFinalWrite struct{ meta.Store }

func (failedFinalWrite) UpdateFileAndPutObject(context.Context, *meta.FileRecord, *meta.Object) (string, error) {
	return "", errs.E(errs.Unavailable, "the final write did not commit")
}

func (failedFinalWrite) CreateFileAndPutObject(context.Context, *meta.FileRecord, *meta.Object) (string, error) {
	return "", errs.E(errs.Unavailable, "the final write did not commit")
}

// A final write that fails leaves the key with its old file, and the new
// file is not left behind without a key.
func TestAFailedFinalWriteKeepsTheOldObject(t *testing.T) {
	eachRecording(t, func(t *testing.T, delay time.Duration) {
		f := newBindFixture(t, delay)
		f.s.opt.Store = failedFinalWrite{f.st} // after the fixture's own upload
		var seen meta.File
		_, err := f.s.Upload(context.Background(), UploadRequest{FileName: "k", Body: strings.NewReader("new bytes"), Object: objectK(&seen)})
		require.True(t, errs.Is(err, errs.Unavailable), "%v", err)
		f.requireKeyHolds(t, f.old, "the key keeps the old file")
		rec, err := f.st.GetFile(context.Background(), f.old)
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, rec.Status, "and the old file is untouched")
		f.requireGone(t, seen.ID)
	})
}
