package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/s3"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// countedFiles counts the uploads that reached the file service: a
// conditional write known to fail must be answered before its body is
// read and a file made of it.
type countedFiles struct {
	objects.Files
	uploads atomic.Int64
}

func (c *countedFiles) Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error) {
	c.uploads.Add(1)
	return c.Files.Upload(ctx, req)
}

// TestConditionalPut: If-None-Match: * writes only a new key, If-Match
// only over an object with an ETag named; a write refused is answered
// before its body is stored and leaves the object as it was.
func TestConditionalPut(t *testing.T) {
	var counted *countedFiles
	s := newSDKServer(t, func(f objects.Files) objects.Files { counted = &countedFiles{Files: f}; return counted })
	put := func(key, body string, hdr ...string) (int, string) {
		return call(t, s.srv, http.MethodPut, "", "/bkt/"+key, "us-east-1", []byte(body), hdr...)
	}
	get := func(key string) string {
		status, body := call(t, s.srv, http.MethodGet, "", "/bkt/"+key, "us-east-1", nil)
		require.Equal(t, http.StatusOK, status, body)
		return body
	}
	status, body := call(t, s.srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)

	status, body = put("lock", "first", "If-None-Match", "*")
	require.Equal(t, http.StatusOK, status, "a new key: %s", body)
	uploads := counted.uploads.Load()
	status, body = put("lock", "second", "If-None-Match", "*")
	require.Equal(t, http.StatusPreconditionFailed, status, body)
	require.Contains(t, body, "<Code>PreconditionFailed</Code>")
	require.Equal(t, "first", get("lock"))
	require.Equal(t, uploads, counted.uploads.Load(), "the refused body was never uploaded")

	status, body = put("missing", "x", "If-Match", `"0123456789abcdef0123456789abcdef"`)
	require.Equal(t, http.StatusNotFound, status, body)
	require.Contains(t, body, "<Code>NoSuchKey</Code>", "If-Match on a key that holds nothing")
	status, _ = call(t, s.srv, http.MethodHead, "", "/bkt/missing", "us-east-1", nil)
	require.Equal(t, http.StatusNotFound, status)

	firstETag := `"` + md5hex("first") + `"`
	status, body = put("lock", "second", "If-Match", `"0123456789abcdef0123456789abcdef"`)
	require.Equal(t, http.StatusPreconditionFailed, status, body)
	require.Equal(t, "first", get("lock"))
	require.Equal(t, uploads, counted.uploads.Load())

	held := len(s.files.data)
	for _, etag := range []string{firstETag, strings.Trim(firstETag, `"`), `"nope", ` + firstETag} {
		status, body = put("lock", "first", "If-Match", etag)
		require.Equal(t, http.StatusOK, status, "If-Match: %s: %s", etag, body)
	}
	status, body = put("lock", "second", "If-Match", "*")
	require.Equal(t, http.StatusOK, status, "If-Match: * over an object: %s", body)
	require.Equal(t, "second", get("lock"))
	require.Len(t, s.files.data, held, "each replaced file was deleted")

	// With the SDK's own fields, as an application sets them.
	ctx := context.Background()
	_, err := s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("lock"),
		Body: strings.NewReader("third"), IfNoneMatch: aws.String("*")})
	require.Equal(t, "PreconditionFailed", s3Code(t, err))
	out, err := s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("lock"),
		Body: strings.NewReader("third"), IfMatch: aws.String(`"` + md5hex("second") + `"`)})
	require.NoError(t, err)
	require.Equal(t, `"`+md5hex("third")+`"`, *out.ETag)
	require.Equal(t, "third", get("lock"))
}

// gatedFiles holds every upload until n have started, so that n
// conditional writers all pass the check made before the upload and race
// to the write that moves the key.
type gatedFiles struct {
	objects.Files
	n       int
	mu      sync.Mutex
	started int
	all     chan struct{}
}

func (g *gatedFiles) Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error) {
	g.mu.Lock()
	g.started++
	if g.started == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(10 * time.Second):
	}
	return g.Files.Upload(ctx, req)
}

// TestConditionalPutRace is a lock taken with If-None-Match: * (as
// Terraform's S3 backend takes one) by many writers at once, every one
// past the early check: exactly one wins, the others get 412, and no
// loser's file is left behind.
func TestConditionalPutRace(t *testing.T) {
	const writers = 12
	s := newSDKServer(t, func(f objects.Files) objects.Files {
		return &gatedFiles{Files: f, n: writers, all: make(chan struct{})}
	})
	status, body := call(t, s.srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			var body string
			statuses[i], body = call(t, s.srv, http.MethodPut, "", "/bkt/state.tflock", "us-east-1", fmt.Appendf(nil, "writer %d", i),
				"If-None-Match", "*")
			if statuses[i] != http.StatusOK {
				require.Contains(t, body, "<Code>PreconditionFailed</Code>")
			}
		})
	}
	wg.Wait()
	wins := 0
	winner := -1
	for i, st := range statuses {
		require.Contains(t, []int{http.StatusOK, http.StatusPreconditionFailed}, st)
		if st == http.StatusOK {
			wins, winner = wins+1, i
		}
	}
	require.Equal(t, 1, wins, "exactly one writer takes the lock: %v", statuses)
	status, body = call(t, s.srv, http.MethodGet, "", "/bkt/state.tflock", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, fmt.Sprintf("writer %d", winner), body, "the key holds the winner's bytes")
	require.Len(t, s.files.data, 1, "every loser's file was deleted")
}

// TestConditionalDelete: If-Match on DeleteObject, and an ETag in a
// DeleteObjects entry, delete only an object with that ETag.
func TestConditionalDelete(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "c"} {
		_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k), Body: strings.NewReader(k)})
		require.NoError(t, err)
	}

	_, err = s.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), IfMatch: aws.String(`"` + md5hex("b") + `"`)})
	require.Equal(t, "PreconditionFailed", s3Code(t, err))
	_, err = s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a")})
	require.NoError(t, err, "the object stays")
	status, body := call(t, s.srv, http.MethodDelete, "", "/bkt/a", "us-east-1", nil, "If-Match", " , ")
	require.Equal(t, http.StatusBadRequest, status, "an If-Match that names nothing is no unconditional delete: %s", body)
	_, err = s.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("none"), IfMatch: aws.String("*")})
	require.Equal(t, "NoSuchKey", s3Code(t, err), "a conditional delete of a key that holds nothing")
	_, err = s.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), IfMatch: aws.String(`"` + md5hex("a") + `"`)})
	require.NoError(t, err)
	_, err = s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a")})
	require.Error(t, err, "the object is gone")
	require.Len(t, s.files.data, 2, "and its file with it")

	out, err := s.c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("b"), ETag: aws.String(`"` + md5hex("not b") + `"`)},
		{Key: aws.String("c"), ETag: aws.String(`"` + md5hex("c") + `"`)},
	}}})
	require.NoError(t, err)
	require.Len(t, out.Errors, 1)
	require.Equal(t, "b", *out.Errors[0].Key)
	require.Equal(t, "PreconditionFailed", *out.Errors[0].Code)
	require.Len(t, out.Deleted, 1)
	require.Equal(t, "c", *out.Deleted[0].Key)
	require.Len(t, s.files.data, 1, "only b is left")
}

// TestConditionalCopy: If-None-Match: * and If-Match hold a CopyObject's
// destination as they hold a PutObject's.
func TestConditionalCopy(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	for _, k := range []string{"src", "dst"} {
		_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k), Body: strings.NewReader(k)})
		require.NoError(t, err)
	}
	copyTo := func(key string, in awss3.CopyObjectInput) error {
		in.Bucket, in.Key, in.CopySource = aws.String("bkt"), aws.String(key), aws.String("bkt/src")
		_, err := s.c.CopyObject(ctx, &in)
		return err
	}
	require.Equal(t, "PreconditionFailed", s3Code(t, copyTo("dst", awss3.CopyObjectInput{IfNoneMatch: aws.String("*")})))
	require.Equal(t, "PreconditionFailed", s3Code(t, copyTo("dst", awss3.CopyObjectInput{IfMatch: aws.String(`"` + md5hex("src") + `"`)})))
	require.Equal(t, "NoSuchKey", s3Code(t, copyTo("new", awss3.CopyObjectInput{IfMatch: aws.String("*")})))
	require.Len(t, s.files.data, 2, "no refused copy was stored")
	require.NoError(t, copyTo("new", awss3.CopyObjectInput{IfNoneMatch: aws.String("*")}))
	require.NoError(t, copyTo("dst", awss3.CopyObjectInput{IfMatch: aws.String(`"` + md5hex("dst") + `"`)}))
	for _, k := range []string{"new", "dst"} {
		status, body := call(t, s.srv, http.MethodGet, "", "/bkt/"+k, "us-east-1", nil)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "src", body)
	}
	require.Len(t, s.files.data, 3, "the replaced destination's file was deleted")
}

// TestConditionalComplete: CompleteMultipartUpload with If-None-Match: *
// or If-Match. A precondition that does not hold when the Complete
// arrives leaves the upload and its parts, for the client to abort.
func TestConditionalComplete(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("taken"), Body: strings.NewReader("old")})
	require.NoError(t, err)
	start := func(key string) (*string, []types.CompletedPart) {
		create, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		require.NoError(t, err)
		part, err := s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: create.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("multipart " + key))})
		require.NoError(t, err)
		return create.UploadId, []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}
	}
	complete := func(key string, id *string, parts []types.CompletedPart, ifNoneMatch, ifMatch *string) error {
		_, err := s.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key),
			UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, IfNoneMatch: ifNoneMatch, IfMatch: ifMatch})
		return err
	}

	id, parts := start("taken")
	require.Equal(t, "PreconditionFailed", s3Code(t, complete("taken", id, parts, aws.String("*"), nil)))
	require.Equal(t, "PreconditionFailed", s3Code(t, complete("taken", id, parts, nil, aws.String(`"`+md5hex("not old")+`"`))))
	listed, err := s.c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("taken"), UploadId: id})
	require.NoError(t, err, "the upload is still there")
	require.Len(t, listed.Parts, 1)
	status, body := call(t, s.srv, http.MethodGet, "", "/bkt/taken", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "old", body)
	require.NoError(t, complete("taken", id, parts, nil, aws.String(`"`+md5hex("old")+`"`)))
	status, body = call(t, s.srv, http.MethodGet, "", "/bkt/taken", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "multipart taken", body)

	id, parts = start("fresh")
	require.Equal(t, "NoSuchKey", s3Code(t, complete("fresh", id, parts, nil, aws.String("*"))))
	require.NoError(t, complete("fresh", id, parts, aws.String("*"), nil))
	require.NoError(t, complete("fresh", id, parts, aws.String("*"), nil), "a retry of the Complete that succeeded answers as it did")
	status, body = call(t, s.srv, http.MethodGet, "", "/bkt/fresh", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "multipart fresh", body)
	require.Len(t, s.files.data, 2, "the object replaced by the conditional Complete was deleted")
}

// intrudingSessions writes the key of the upload being completed just
// before the completion makes its file, as another client's PutObject
// landing between a Complete's early check and its key's move would.
type intrudingSessions struct {
	*memSessions
	store interface {
		PutObject(ctx context.Context, o *meta.Object) (string, error)
	}
	bucket, key string
}

func (s *intrudingSessions) CompleteSession(ctx context.Context, id string, parts []int) (string, int64, error) {
	res, err := s.files.Upload(ctx, files.UploadRequest{FileName: "intruder", Body: strings.NewReader("intruder")})
	if err != nil {
		return "", 0, err
	}
	if _, err := s.store.PutObject(ctx, &meta.Object{Bucket: s.bucket, Key: s.key, FileID: res.FileID, SizeBytes: res.SizeBytes,
		ETag: md5hex("intruder"), ContentType: "text/plain"}); err != nil {
		return "", 0, err
	}
	return s.memSessions.CompleteSession(ctx, id, parts)
}

// TestConditionalCompleteLosesTheRace: a Complete whose If-None-Match: *
// held when it arrived but not when its key was to move is 412; the file
// its parts made is deleted and the upload is gone with them.
func TestConditionalCompleteLosesTheRace(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	mf := &memFiles{store: store, data: map[string][]byte{}}
	sessions := &intrudingSessions{memSessions: &memSessions{files: mf, parts: map[string]map[int][]byte{}}, store: store, bucket: "bkt", key: "lock"}
	srv := httptest.NewServer(s3.New(s3.Options{Files: mf, Namespace: store, Keys: oneKey{}, Region: "us-east-1", Sessions: sessions}))
	t.Cleanup(srv.Close)
	c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SECRET-KEY", "")})
	ctx := context.Background()
	_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	create, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("lock")})
	require.NoError(t, err)
	part, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("lock"), UploadId: create.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("mine")})
	require.NoError(t, err)
	_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("lock"),
		UploadId: create.UploadId, IfNoneMatch: aws.String("*"),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
	require.Equal(t, "PreconditionFailed", s3Code(t, err))

	out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("lock")})
	require.NoError(t, err)
	defer out.Body.Close()
	require.Equal(t, `"`+md5hex("intruder")+`"`, *out.ETag, "the key holds what came first")
	require.Len(t, mf.data, 1, "the file the parts made was deleted")
	_, err = c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("lock"), UploadId: create.UploadId})
	require.Equal(t, "NoSuchUpload", s3Code(t, err), "the upload is gone with its parts")
	uploads, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	require.Empty(t, uploads.Uploads)
}
