package s3_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/s3"
)

// sdkServer is a front end over memory, multipart included, with an
// aws-sdk-go-v2 client for it and the routes its metrics were given.
type sdkServer struct {
	srv      *httptest.Server
	files    *memFiles
	sessions *memSessions
	c        *awss3.Client

	mu     sync.Mutex
	routes []string
}

func newSDKServer(t *testing.T, wrap func(objects.Files) objects.Files) *sdkServer {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	s := &sdkServer{files: &memFiles{store: store, data: map[string][]byte{}}}
	s.sessions = &memSessions{files: s.files, parts: map[string]map[int][]byte{}}
	var f objects.Files = s.files
	if wrap != nil {
		f = wrap(f)
	}
	s.srv = httptest.NewServer(s3.New(s3.Options{Files: f, Namespace: store, Keys: oneKey{}, Region: "us-east-1", Sessions: s.sessions,
		Observe: func(route, _ string, _ int, _ float64) {
			s.mu.Lock()
			s.routes = append(s.routes, route)
			s.mu.Unlock()
		}}))
	t.Cleanup(s.srv.Close)
	s.c = awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.srv.URL), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SECRET-KEY", "")})
	return s
}

// raw sends req over a connection of its own and returns the answer as
// the bytes on the wire (the Go client would canonicalize header names).
// A body shorter than req.ContentLength is sent as it is, then the
// connection's write side closed. (A closed write side cancels a request
// whose body has been read, so it is kept open otherwise.)
func raw(t *testing.T, srv *httptest.Server, req *http.Request, body string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.Host)
	require.NoError(t, req.Header.Write(w))
	if req.ContentLength > 0 {
		fmt.Fprintf(w, "Content-Length: %d\r\n", req.ContentLength)
	}
	fmt.Fprintf(w, "Connection: close\r\n\r\n%s", body)
	require.NoError(t, w.Flush())
	if int64(len(body)) < req.ContentLength {
		require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	}
	b, err := io.ReadAll(conn)
	require.NoError(t, err)
	return string(b)
}

// TestDetailsClientsCompare: what clients compare in an answer is given
// as S3 gives it.
func TestDetailsClientsCompare(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)

	t.Run("metadata names are lower-case on the wire", func(t *testing.T) {
		req := signed(t, http.MethodPut, s.srv.URL+"/bkt/meta", "us-east-1", strings.NewReader("v"), "UNSIGNED-PAYLOAD", "X-Amz-Meta-Foo", "bar")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		create, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
			Metadata: map[string]string{"Foo": "bar"}})
		require.NoError(t, err)
		part, err := s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: create.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
		require.NoError(t, err)
		_, err = s.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
			UploadId: create.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
		require.NoError(t, err)
		for _, key := range []string{"meta", "mp"} {
			answer := raw(t, s.srv, signed(t, http.MethodHead, s.srv.URL+"/bkt/"+key, "us-east-1", nil, emptySHA256), "")
			require.Contains(t, answer, "\r\nx-amz-meta-foo: bar\r\n", "%s:\n%s", key, answer)
		}
	})

	t.Run("Content-Encoding byte for byte", func(t *testing.T) {
		for key, enc := range map[string]string{"deflated": "deflate, gzip", "spaced": "gzip,  br", "chunked": "aws-chunked, gzip"} {
			_, err := s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("v"),
				ContentEncoding: aws.String(enc)})
			require.NoError(t, err)
			head, err := s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
			require.NoError(t, err)
			want := enc
			if key == "chunked" {
				want = "gzip" // aws-chunked is the transfer's, not the object's
			}
			require.Equal(t, want, aws.ToString(head.ContentEncoding), key)
		}
	})

	t.Run("listing details", func(t *testing.T) {
		_, err := s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("foo/a b*c~"), Body: strings.NewReader("v")})
		require.NoError(t, err)
		status, body := call(t, s.srv, http.MethodGet, "", "/bkt?list-type=2&continuation-token=&start-after=", "us-east-1", nil)
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, "<ContinuationToken></ContinuationToken>", "an empty token sent is given back")
		require.Contains(t, body, "<StartAfter></StartAfter>")
		status, body = call(t, s.srv, http.MethodGet, "", "/bkt", "us-east-1", nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, "ContinuationToken", "a V1 listing has none")
		out, err := s.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("bkt"), ContinuationToken: aws.String("")})
		require.NoError(t, err)
		require.NotNil(t, out.ContinuationToken)
		status, body = call(t, s.srv, http.MethodGet, "", "/bkt?list-type=2&encoding-type=url&prefix=foo/&delimiter=/&start-after=foo/%20", "us-east-1", nil)
		require.Equal(t, http.StatusOK, status, body)
		for _, want := range []string{"<Prefix>foo/</Prefix>", "<Delimiter>/</Delimiter>", "<StartAfter>foo/%20</StartAfter>", "<Key>foo/a%20b*c%7E</Key>"} {
			require.Contains(t, body, want)
		}
	})

	t.Run("the owner's ACL", func(t *testing.T) {
		for _, get := range []func() (*types.Owner, []types.Grant, error){
			func() (*types.Owner, []types.Grant, error) {
				out, err := s.c.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String("bkt")})
				if err != nil {
					return nil, nil, err
				}
				return out.Owner, out.Grants, nil
			},
			func() (*types.Owner, []types.Grant, error) {
				out, err := s.c.GetObjectAcl(ctx, &awss3.GetObjectAclInput{Bucket: aws.String("bkt"), Key: aws.String("meta")})
				if err != nil {
					return nil, nil, err
				}
				return out.Owner, out.Grants, nil
			},
		} {
			o, grants, err := get()
			require.NoError(t, err)
			require.Equal(t, "AK", aws.ToString(o.ID))
			require.Len(t, grants, 1)
			require.Equal(t, types.PermissionFullControl, grants[0].Permission)
			require.Equal(t, types.TypeCanonicalUser, grants[0].Grantee.Type)
			require.Equal(t, "AK", aws.ToString(grants[0].Grantee.ID))
		}
		_, err := s.c.GetObjectAcl(ctx, &awss3.GetObjectAclInput{Bucket: aws.String("bkt"), Key: aws.String("absent")})
		require.Equal(t, "NoSuchKey", s3Code(t, err))
	})
}

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// TestDeleteBucketTakesItsUploads: a bucket whose only contents are
// unfinished uploads is deleted with them, parts and all; one that holds an
// object is not empty and keeps its uploads.
func TestDeleteBucketTakesItsUploads(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	start := func(bucket, key string) {
		_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)})
		if err != nil {
			require.Equal(t, "BucketAlreadyOwnedByYou", s3Code(t, err))
		}
		create, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		require.NoError(t, err)
		_, err = s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: create.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
		require.NoError(t, err)
	}
	start("open", "a")
	start("open", "b/c")
	require.Len(t, s.sessions.parts, 2)
	_, err := s.c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("open")})
	require.NoError(t, err)
	require.Empty(t, s.sessions.parts, "the uploads' parts went with the bucket")
	_, err = s.c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String("open")})
	require.Error(t, err)

	start("full", "a")
	_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("full"), Key: aws.String("k"), Body: strings.NewReader("v")})
	require.NoError(t, err)
	_, err = s.c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("full")})
	require.Equal(t, "BucketNotEmpty", s3Code(t, err))
	uploads, err := s.c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("full")})
	require.NoError(t, err)
	require.Len(t, uploads.Uploads, 1, "a bucket that is not empty keeps its uploads")
}

// TestIncompleteBody: a body shorter than its Content-Length is S3's
// IncompleteBody, and nothing is stored.
func TestIncompleteBody(t *testing.T) {
	s := newSDKServer(t, nil)
	_, err := s.c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	req := signed(t, http.MethodPut, s.srv.URL+"/bkt/short", "us-east-1", nil, "UNSIGNED-PAYLOAD")
	req.ContentLength = 100
	answer := raw(t, s.srv, req, "only ten b")
	require.Contains(t, answer, "HTTP/1.1 400 ")
	require.Contains(t, answer, "<Code>IncompleteBody</Code>", answer)
	require.Empty(t, s.files.data)
}

// leakyFiles fails every upload and download with err, whose text is
// what a driver, a node or the metadata store would say.
type leakyFiles struct {
	objects.Files
	err error
}

func (f leakyFiles) Upload(context.Context, files.UploadRequest) (files.UploadResult, error) {
	return files.UploadResult{}, f.err
}

func (f leakyFiles) Open(context.Context, string, byterange.Request) (*files.Download, error) {
	return nil, f.err
}

// TestErrorsSayNothingInternal sweeps the error answers of every kind of
// failure below the front end for the words of its cause.
func TestErrorsSayNothingInternal(t *testing.T) {
	const secret = `metadata store: insert file: FOREIGN KEY constraint failed (787) at node-7 (dial tcp 10.0.0.7:9001)`
	cause := errors.New(secret)
	for _, k := range []errs.Kind{errs.Other, errs.Invalid, errs.NotFound, errs.Conflict, errs.Unavailable, errs.TooLarge,
		errs.NoSpace, errs.Corrupt, errs.Unsatisfiable, errs.Forbidden} {
		t.Run(k.String(), func(t *testing.T) {
			s := newSDKServer(t, func(f objects.Files) objects.Files {
				return leakyFiles{f, errs.Wrap(k, cause, "store on %s", "node-7")}
			})
			status, body := call(t, s.srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
			require.Equal(t, http.StatusOK, status, body)
			status, body = call(t, s.srv, http.MethodPut, "", "/bkt/k", "us-east-1", []byte("v"))
			require.GreaterOrEqual(t, status, 400)
			for _, word := range []string{"node-7", "FOREIGN", "metadata store", "dial tcp", "787"} {
				require.NotContains(t, body, word, "a PUT failing with %s", k)
			}
		})
	}
	// And the one this used to leak: a bucket deleted while an upload
	// starts in it is not empty, in S3's words.
	s := newSDKServer(t, nil)
	status, body := call(t, s.srv, http.MethodDelete, "", "/absent", "us-east-1", nil)
	require.Equal(t, http.StatusNotFound, status, body)
	require.Contains(t, body, "<Code>NoSuchBucket</Code>")
}

// TestMetricsNameTheOperation: every S3 request is observed under its
// operation's name, a failed one too.
func TestMetricsNameTheOperation(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v")})
	require.NoError(t, err)
	_, err = s.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("absent")})
	require.Error(t, err)
	_, err = s.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	create, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
	require.NoError(t, err)
	_, err = s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: create.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	require.NoError(t, err)
	_, err = s.c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	status, _ := call(t, s.srv, http.MethodGet, "", "/bkt?policy", "us-east-1", nil)
	require.Equal(t, http.StatusNotImplemented, status)
	want := []string{"CreateBucket", "PutObject", "GetObject", "ListObjectsV2", "CreateMultipartUpload", "UploadPart",
		"GetBucketVersioning", "Unsupported"}
	// A request is observed once its answer has gone, so the last may
	// still be on its way, and two in a row may be observed out of order.
	routes := func() []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return slices.Clone(s.routes)
	}
	require.Eventually(t, func() bool { return len(routes()) == len(want) }, 10*time.Second, 5*time.Millisecond)
	require.ElementsMatch(t, want, routes())
}

// TestCompleteRetried: a Complete sent again after it succeeded (its
// answer lost) answers the same result; one naming other parts, or sent
// once the key holds something else, is NoSuchUpload.
func TestCompleteRetried(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	create, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
	require.NoError(t, err)
	var parts []types.CompletedPart
	for n, body := range []string{strings.Repeat("a", 5<<20), "tail"} {
		out, err := s.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: create.UploadId,
			PartNumber: aws.Int32(int32(n + 1)), Body: strings.NewReader(body)})
		require.NoError(t, err)
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(n + 1)), ETag: out.ETag})
	}
	complete := func(parts []types.CompletedPart) (*awss3.CompleteMultipartUploadOutput, error) {
		return s.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
			UploadId: create.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	}
	first, err := complete(parts)
	require.NoError(t, err)
	again, err := complete(parts)
	require.NoError(t, err, "a retry of a Complete that succeeded")
	require.Equal(t, aws.ToString(first.ETag), aws.ToString(again.ETag))
	require.Equal(t, aws.ToString(first.Location), aws.ToString(again.Location))
	_, err = complete(parts[1:])
	require.Equal(t, "NoSuchUpload", s3Code(t, err), "other parts than the Complete that succeeded")
	_, err = s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), Body: strings.NewReader("new")})
	require.NoError(t, err)
	_, err = complete(parts)
	require.Equal(t, "NoSuchUpload", s3Code(t, err), "the key holds something else now")
	require.Len(t, s.files.data, 1)
}

// TestNullVersions: a bucket without versioning lists each object once, as
// its null version, page by page, and the null version id addresses the
// object; any other version id is none dfs keeps.
func TestNullVersions(t *testing.T) {
	s := newSDKServer(t, nil)
	ctx := context.Background()
	_, err := s.c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "dir/c", "dir/d"} {
		_, err := s.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k), Body: strings.NewReader(k)})
		require.NoError(t, err)
	}
	var listed []string
	in := &awss3.ListObjectVersionsInput{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(2), Delimiter: aws.String("/")}
	for page := 0; ; page++ {
		require.Less(t, page, 5)
		out, err := s.c.ListObjectVersions(ctx, in)
		require.NoError(t, err)
		for _, v := range out.Versions {
			require.Equal(t, "null", aws.ToString(v.VersionId))
			require.True(t, aws.ToBool(v.IsLatest))
			listed = append(listed, aws.ToString(v.Key))
		}
		for _, p := range out.CommonPrefixes {
			listed = append(listed, "prefix:"+aws.ToString(p.Prefix))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	require.Equal(t, []string{"a", "b", "prefix:dir/"}, listed)

	got, err := s.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), VersionId: aws.String("null")})
	require.NoError(t, err)
	got.Body.Close()
	status, _ := call(t, s.srv, http.MethodGet, "", "/bkt/a?versionId=3HL4kqtJlcpXroDTDmjVBH40Nrjfkd", "us-east-1", nil)
	require.Equal(t, http.StatusNotImplemented, status, "a version dfs never kept")

	del, err := s.c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("a"), VersionId: aws.String("null")}, {Key: aws.String("b"), VersionId: aws.String("3HL4kqtJlcpXroDTDmjVBH40Nrjfkd")}}}})
	require.NoError(t, err)
	require.Len(t, del.Deleted, 1)
	require.Equal(t, "a", aws.ToString(del.Deleted[0].Key))
	require.Len(t, del.Errors, 1)
	require.Equal(t, "NoSuchVersion", aws.ToString(del.Errors[0].Code))
	_, err = s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("b")})
	require.NoError(t, err, "a delete of another version keeps the object")
}
