package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
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

// uploadEntries pages through ListMultipartUploads max at a time, following
// NextKeyMarker and NextUploadIdMarker, and returns every entry in order:
// "key#n" for the n-th upload started on key (from ids), "prefix:p" for a
// common prefix.
func uploadEntries(t *testing.T, c *awss3.Client, in awss3.ListMultipartUploadsInput, max int32, ids map[string]string) []string {
	t.Helper()
	var got []string
	in.MaxUploads = aws.Int32(max)
	for pages := 0; ; pages++ {
		require.Less(t, pages, 50, "the listing must end")
		out, err := c.ListMultipartUploads(context.Background(), &in)
		require.NoError(t, err)
		require.LessOrEqual(t, len(out.Uploads)+len(out.CommonPrefixes), int(max), "uploads and prefixes together fill a page")
		for _, u := range out.Uploads {
			got = append(got, ids[*u.UploadId])
		}
		for _, p := range out.CommonPrefixes {
			got = append(got, "prefix:"+*p.Prefix)
		}
		if !aws.ToBool(out.IsTruncated) {
			return got
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// TestListMultipartUploadsPages lists uploads as S3 does: by key, one key's
// uploads in the order they were started, with prefixes and a delimiter
// rolling keys up into common prefixes, and pages of every size joining
// into the same listing through the next markers.
func TestListMultipartUploadsPages(t *testing.T) {
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
	_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("ups")})
	require.NoError(t, err)
	ids := map[string]string{}
	started := map[string]int{}
	for _, k := range []string{"zz", "dir/y", "a.txt", "dir/sub/z", "e/1", "dir/x", "a.txt", "e/2", "dir/sub/w", "a.txt", "sp ace/k"} {
		out, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("ups"), Key: aws.String(k)})
		require.NoError(t, err)
		started[k]++
		ids[*out.UploadId] = k + "#" + strconv.Itoa(started[k])
	}

	cases := []struct {
		name              string
		prefix, delimiter string
		want              []string
	}{
		{"everything", "", "", []string{"a.txt#1", "a.txt#2", "a.txt#3", "dir/sub/w#1", "dir/sub/z#1", "dir/x#1", "dir/y#1", "e/1#1", "e/2#1", "sp ace/k#1", "zz#1"}},
		{"top level", "", "/", []string{"a.txt#1", "a.txt#2", "a.txt#3", "prefix:dir/", "prefix:e/", "prefix:sp ace/", "zz#1"}},
		{"one level down", "dir/", "/", []string{"prefix:dir/sub/", "dir/x#1", "dir/y#1"}},
		{"a prefix inside a name", "d", "/", []string{"prefix:dir/"}},
		{"a longer delimiter", "", "ir/", []string{"a.txt#1", "a.txt#2", "a.txt#3", "prefix:dir/", "e/1#1", "e/2#1", "sp ace/k#1", "zz#1"}},
		{"nothing under the prefix", "nope/", "/", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := awss3.ListMultipartUploadsInput{Bucket: aws.String("ups")}
			if tc.prefix != "" {
				in.Prefix = aws.String(tc.prefix)
			}
			if tc.delimiter != "" {
				in.Delimiter = aws.String(tc.delimiter)
			}
			for _, size := range []int32{1, 2, 3, 1000} {
				got := uploadEntries(t, c, in, size, ids)
				// Within a page uploads come before prefixes, so compare
				// the entries in key order, as the pages joined give them.
				require.ElementsMatch(t, tc.want, got, "pages of %d", size)
				if size == 1 {
					require.Equal(t, tc.want, got, "pages of one entry keep key order")
				}
			}
		})
	}

	t.Run("markers", func(t *testing.T) {
		var a2 string
		for id, e := range ids {
			if e == "a.txt#2" {
				a2 = id
			}
		}
		list := func(in awss3.ListMultipartUploadsInput) []string {
			return uploadEntries(t, c, in, 1000, ids)
		}
		require.Equal(t, []string{"a.txt#3", "zz#1", "prefix:dir/", "prefix:e/", "prefix:sp ace/"},
			sortedByKind(list(awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), Delimiter: aws.String("/"),
				KeyMarker: aws.String("a.txt"), UploadIdMarker: aws.String(a2)})), "after one upload of a key, its later ones")
		require.Equal(t, []string{"dir/sub/w#1", "dir/sub/z#1", "dir/x#1", "dir/y#1", "e/1#1", "e/2#1", "sp ace/k#1", "zz#1"},
			list(awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), KeyMarker: aws.String("a.txt")}), "a key marker alone passes all of that key's uploads")
		require.Equal(t, []string{"zz#1", "prefix:e/", "prefix:sp ace/"}, sortedByKind(list(awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"),
			Delimiter: aws.String("/"), KeyMarker: aws.String("dir/")})), "a key marker that is a common prefix passes every key under it")
		require.Len(t, list(awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), UploadIdMarker: aws.String(a2)}), 11,
			"an upload id marker without a key marker is ignored")
	})

	t.Run("url encoding", func(t *testing.T) {
		out, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), Prefix: aws.String("sp ace/"),
			EncodingType: types.EncodingTypeUrl})
		require.NoError(t, err)
		require.Len(t, out.Uploads, 1)
		// The SDK hands the keys back as the server encoded them.
		require.Contains(t, *out.Uploads[0].Key, "sp%20ace")
		key, err := url.QueryUnescape(*out.Uploads[0].Key)
		require.NoError(t, err)
		require.Equal(t, "sp ace/k", key)
		prefix, err := url.QueryUnescape(*out.Prefix)
		require.NoError(t, err)
		require.Equal(t, "sp ace/", prefix)
		_, err = c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), EncodingType: "base64"})
		require.Equal(t, "InvalidArgument", s3Code(t, err))
	})

	out, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), MaxUploads: aws.Int32(3), Delimiter: aws.String("/")})
	require.NoError(t, err)
	require.True(t, *out.IsTruncated)
	require.Equal(t, "a.txt", *out.NextKeyMarker)
	require.NotEmpty(t, *out.NextUploadIdMarker, "a page that ends on an upload names it")
	out, err = c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("ups"), MaxUploads: aws.Int32(4), Delimiter: aws.String("/")})
	require.NoError(t, err)
	require.Equal(t, "dir/", *out.NextKeyMarker, "a page that ends on a common prefix continues after it")
	require.Empty(t, aws.ToString(out.NextUploadIdMarker))
	require.Equal(t, "/", *out.Delimiter)
}

// sortedByKind puts a page's uploads before its common prefixes, as one
// page of the answer lists them.
func sortedByKind(entries []string) []string {
	var ups, prefixes []string
	for _, e := range entries {
		if strings.HasPrefix(e, "prefix:") {
			prefixes = append(prefixes, e)
		} else {
			ups = append(ups, e)
		}
	}
	return append(ups, prefixes...)
}
