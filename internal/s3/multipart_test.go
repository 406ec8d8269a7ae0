package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/s3"
)

// memSessions keeps upload sessions in memory and completes one into a
// file of memFiles, as the file service's sessions do with chunks.
type memSessions struct {
	files *memFiles
	mu    sync.Mutex
	parts map[string]map[int][]byte
}

func (m *memSessions) CreateSession(context.Context, string, string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := uuid.NewString()
	m.parts[id] = map[int][]byte{}
	return id, nil
}

func (m *memSessions) PutPart(_ context.Context, id string, n int, body io.Reader, _ int64) (s3.Part, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return s3.Part{}, errs.Wrap(errs.Invalid, err, "part body")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parts[id] == nil {
		return s3.Part{}, errs.E(errs.NotFound, "no session %s", id)
	}
	m.parts[id][n] = b
	sum := md5.Sum(b)
	return s3.Part{Number: n, SizeBytes: int64(len(b)), MD5: hex.EncodeToString(sum[:]), CreatedAt: time.Now()}, nil
}

func (m *memSessions) Parts(_ context.Context, id string) ([]s3.Part, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []s3.Part
	for n := 1; n <= 10000; n++ {
		if b, ok := m.parts[id][n]; ok {
			sum := md5.Sum(b)
			out = append(out, s3.Part{Number: n, SizeBytes: int64(len(b)), MD5: hex.EncodeToString(sum[:]), CreatedAt: time.Now()})
		}
	}
	return out, nil
}

func (m *memSessions) CompleteSession(ctx context.Context, id string, parts []int) (string, int64, error) {
	m.mu.Lock()
	var all []byte
	for _, n := range parts {
		all = append(all, m.parts[id][n]...)
	}
	delete(m.parts, id)
	m.mu.Unlock()
	res, err := m.files.Upload(ctx, files.UploadRequest{FileName: "x", Body: bytes.NewReader(all)})
	return res.FileID, res.SizeBytes, err
}

func (m *memSessions) AbortSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parts, id)
	return nil
}

func s3Code(t *testing.T, err error) string {
	t.Helper()
	var api smithy.APIError
	require.True(t, errors.As(err, &api), "%v", err)
	return api.ErrorCode()
}

// TestMultipartAgainstSessions runs the multipart operations with
// aws-sdk-go-v2 over a session service kept in memory: the S3 side that
// the file service's upload sessions plug into.
func TestMultipartAgainstSessions(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	mf := &memFiles{store: store, data: map[string][]byte{}}
	srv := httptest.NewServer(s3.New(s3.Options{Files: mf, Namespace: store, Keys: oneKey{}, Region: "us-east-1",
		Sessions: &memSessions{files: mf, parts: map[string]map[int][]byte{}}}))
	t.Cleanup(srv.Close)
	c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SECRET-KEY", "")})
	ctx := context.Background()
	_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("mpb")})
	require.NoError(t, err)

	create, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin"),
		ContentType: aws.String("application/x-big"), Metadata: map[string]string{"m": "1"}})
	require.NoError(t, err)
	id := create.UploadId
	part1 := bytes.Repeat([]byte{1}, 5<<20)
	part2 := []byte("the short last part")
	put := func(n int32, b []byte) string {
		out, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin"), UploadId: id,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(b)})
		require.NoError(t, err)
		return *out.ETag
	}
	e1, e2 := put(1, part1), put(2, part2)
	small := put(3, []byte("too small to be anything but the last"))

	parts, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin"), UploadId: id})
	require.NoError(t, err)
	require.Len(t, parts.Parts, 3)
	uploads, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("mpb")})
	require.NoError(t, err)
	require.Len(t, uploads.Uploads, 1)
	require.Equal(t, *id, *uploads.Uploads[0].UploadId)

	complete := func(ps ...types.CompletedPart) error {
		_, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin"),
			UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: ps}})
		return err
	}
	cp := func(n int32, etag string) types.CompletedPart {
		return types.CompletedPart{PartNumber: aws.Int32(n), ETag: aws.String(etag)}
	}
	require.Equal(t, "InvalidPart", s3Code(t, complete(cp(1, e1), cp(2, `"00000000000000000000000000000000"`))))
	require.Equal(t, "InvalidPart", s3Code(t, complete(cp(1, e1), cp(7, e2))))
	require.Equal(t, "InvalidPartOrder", s3Code(t, complete(cp(2, e2), cp(1, e1))))
	require.Equal(t, "EntityTooSmall", s3Code(t, complete(cp(2, e2), cp(3, small))))
	_, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin")})
	require.Error(t, err, "a refused completion stores nothing")

	require.NoError(t, complete(cp(1, e1), cp(2, e2)))
	got, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin")})
	require.NoError(t, err)
	b, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	require.Equal(t, append(append([]byte{}, part1...), part2...), b)
	s1, s2 := md5.Sum(part1), md5.Sum(part2)
	both := md5.Sum(append(s1[:], s2[:]...))
	require.Equal(t, `"`+hex.EncodeToString(both[:])+`-2"`, *got.ETag, "the MD5 of the part MD5s, and the count")
	require.Equal(t, "application/x-big", *got.ContentType)
	require.Equal(t, "1", got.Metadata["m"])
	_, err = c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("mpb"), Key: aws.String("big.bin"), UploadId: id})
	require.Equal(t, "NoSuchUpload", s3Code(t, err), "a completed upload is gone")

	// A part copied from a range of an object, then an abort.
	second, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("mpb"), Key: aws.String("copy.bin")})
	require.NoError(t, err)
	copied, err := c.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: aws.String("mpb"), Key: aws.String("copy.bin"), UploadId: second.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String("mpb/big.bin"), CopySourceRange: aws.String("bytes=" + strconv.Itoa(5<<20) + "-" + strconv.Itoa(5<<20+2))})
	require.NoError(t, err)
	tag := md5.Sum([]byte("the"))
	require.Equal(t, `"`+hex.EncodeToString(tag[:])+`"`, *copied.CopyPartResult.ETag)
	_, err = c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String("mpb"), Key: aws.String("copy.bin"), UploadId: second.UploadId})
	require.NoError(t, err)
	_, err = c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("mpb"), Key: aws.String("copy.bin"), UploadId: second.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("x"))})
	require.Equal(t, "NoSuchUpload", s3Code(t, err))
	_, err = c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("mpb"), Key: aws.String("other"), UploadId: id,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("x"))})
	require.Equal(t, "NoSuchUpload", s3Code(t, err), "an upload id belongs to its key")
}
