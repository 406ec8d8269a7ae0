//go:build linux

package s3e2e

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"
)

func code(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	var api smithy.APIError
	require.True(t, errors.As(err, &api), "not an API error: %v", err)
	return api.ErrorCode()
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func readAll(t *testing.T, out *s3.GetObjectOutput, err error) []byte {
	t.Helper()
	require.NoError(t, err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	return b
}

func keysOf(out *s3.ListObjectsV2Output) []string {
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, *o.Key)
	}
	for _, p := range out.CommonPrefixes {
		keys = append(keys, "prefix:"+*p.Prefix)
	}
	return keys
}

// TestS3WithTheGoClients runs one cluster through what aws-sdk-go-v2 and
// minio-go do: buckets, objects with their metadata, ranges, conditions,
// listings, copies, deletes, presigned URLs, other keys' buckets and the
// requests that must fail without storing anything.
func TestS3WithTheGoClients(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := c.sdk(rootKey, rootSecret)

	_, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("photos")})
	require.NoError(t, err)
	_, err = root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("photos")})
	require.Equal(t, "BucketAlreadyOwnedByYou", code(t, err))
	_, err = root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("Bad_Name")})
	require.Equal(t, "InvalidBucketName", code(t, err))
	_, err = root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("photos")})
	require.NoError(t, err)
	_, err = root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("nothing-here")})
	require.Error(t, err)
	loc, err := root.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("photos")})
	require.NoError(t, err)
	require.Equal(t, types.BucketLocationConstraint(""), loc.LocationConstraint)

	t.Run("objects", func(t *testing.T) {
		data := bytes.Repeat([]byte("dfs speaks s3\n"), 500)
		put, err := root.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"), Body: bytes.NewReader(data),
			ContentType: aws.String("image/jpeg"), Metadata: map[string]string{"camera": "x100"},
			CacheControl: aws.String("max-age=60"),
		})
		require.NoError(t, err)
		require.Equal(t, `"`+md5hex(data)+`"`, *put.ETag, "a single-part ETag is the MD5 of the bytes")

		got, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg")})
		require.Equal(t, data, readAll(t, got, err))
		require.Equal(t, "image/jpeg", *got.ContentType)
		require.Equal(t, "x100", got.Metadata["camera"])
		require.Equal(t, "max-age=60", *got.CacheControl)
		require.Equal(t, *put.ETag, *got.ETag)

		part, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			Range: aws.String("bytes=14-27")})
		require.Equal(t, data[14:28], readAll(t, part, err))
		require.Equal(t, fmt.Sprintf("bytes 14-27/%d", len(data)), *part.ContentRange)
		_, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			Range: aws.String(fmt.Sprintf("bytes=%d-", len(data)+10))})
		require.Equal(t, "InvalidRange", code(t, err))

		_, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			IfMatch: aws.String(`"0123"`)})
		require.Equal(t, "PreconditionFailed", code(t, err))
		_, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			IfNoneMatch: put.ETag})
		var re interface{ HTTPStatusCode() int }
		require.True(t, errors.As(err, &re))
		require.Equal(t, http.StatusNotModified, re.HTTPStatusCode())
		_, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			IfUnmodifiedSince: aws.Time(time.Now().Add(-time.Hour))})
		require.Equal(t, "PreconditionFailed", code(t, err))
		over, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			ResponseContentType: aws.String("text/plain"), ResponseContentDisposition: aws.String("attachment")})
		readAll(t, over, err)
		require.Equal(t, "text/plain", *over.ContentType)
		require.Equal(t, "attachment", *over.ContentDisposition)

		head, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg")})
		require.NoError(t, err)
		require.Equal(t, int64(len(data)), *head.ContentLength)
		_, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("missing")})
		require.Equal(t, "NoSuchKey", code(t, err))

		// The REST metadata of the file names its bucket and key.
		var list struct{ Items []struct{ FileID string } }
		status, body := c.rest(http.MethodGet, "/api/files", nil, rootKey, rootSecret)
		require.Equal(t, http.StatusOK, status, string(body))
		require.NoError(t, json.Unmarshal(body, &list))
		require.Len(t, list.Items, 1)
		status, body = c.rest(http.MethodGet, "/api/files/"+list.Items[0].FileID+"/metadata", nil, rootKey, rootSecret)
		require.Equal(t, http.StatusOK, status)
		var md struct{ Bucket, Key string }
		require.NoError(t, json.Unmarshal(body, &md))
		require.Equal(t, "photos", md.Bucket)
		require.Equal(t, "2024/summer/beach.jpg", md.Key)

		// Overwriting replaces the bytes and deletes the old file.
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg"),
			Body: strings.NewReader("second version")})
		require.NoError(t, err)
		got, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2024/summer/beach.jpg")})
		require.Equal(t, "second version", string(readAll(t, got, err)))
		status, body = c.rest(http.MethodGet, "/api/files/"+list.Items[0].FileID+"/metadata", nil, rootKey, rootSecret)
		require.Equal(t, http.StatusNotFound, status, "the replaced file is deleted: %s", body)
	})

	t.Run("listings", func(t *testing.T) {
		keys := []string{"a/1", "a/2", "a/b/3", "b", "c/d/e", "c/x"}
		for _, k := range keys {
			_, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("list/" + k), Body: strings.NewReader(k)})
			require.NoError(t, err)
		}
		out, err := root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("photos"), Prefix: aws.String("list/"), Delimiter: aws.String("/")})
		require.NoError(t, err)
		require.Equal(t, []string{"list/b", "prefix:list/a/", "prefix:list/c/"}, keysOf(out))
		var all []string
		p := s3.NewListObjectsV2Paginator(root, &s3.ListObjectsV2Input{Bucket: aws.String("photos"), Prefix: aws.String("list/"), MaxKeys: aws.Int32(2)})
		pages := 0
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			require.NoError(t, err)
			all = append(all, keysOf(page)...)
			pages++
		}
		require.Equal(t, 3, pages)
		require.Equal(t, []string{"list/a/1", "list/a/2", "list/a/b/3", "list/b", "list/c/d/e", "list/c/x"}, all)
		out, err = root.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("photos"), Prefix: aws.String("list/"), StartAfter: aws.String("list/b")})
		require.NoError(t, err)
		require.Equal(t, []string{"list/c/d/e", "list/c/x"}, keysOf(out))
		v1, err := root.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String("photos"), Prefix: aws.String("list/"), Marker: aws.String("list/a/b/3"), MaxKeys: aws.Int32(1)})
		require.NoError(t, err)
		require.Len(t, v1.Contents, 1)
		require.Equal(t, "list/b", *v1.Contents[0].Key)
		require.True(t, *v1.IsTruncated)
	})

	t.Run("copies and deletes", func(t *testing.T) {
		_, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("archive")})
		require.NoError(t, err)
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("src.txt"),
			Body: strings.NewReader("copy me"), ContentType: aws.String("text/plain"), Metadata: map[string]string{"k": "v"}})
		require.NoError(t, err)
		_, err = root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("archive"), Key: aws.String("copied.txt"),
			CopySource: aws.String("photos/src.txt")})
		require.NoError(t, err)
		got, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String("copied.txt")})
		require.Equal(t, "copy me", string(readAll(t, got, err)))
		require.Equal(t, "v", got.Metadata["k"], "COPY keeps the metadata")
		_, err = root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("photos"), Key: aws.String("src.txt"),
			CopySource: aws.String("photos/src.txt"), MetadataDirective: types.MetadataDirectiveReplace,
			ContentType: aws.String("text/markdown"), Metadata: map[string]string{"k": "new"}})
		require.NoError(t, err)
		head, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("src.txt")})
		require.NoError(t, err)
		require.Equal(t, "text/markdown", *head.ContentType)
		require.Equal(t, "new", head.Metadata["k"])
		_, err = root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("photos"), Key: aws.String("src.txt"), CopySource: aws.String("photos/src.txt")})
		require.Equal(t, "InvalidRequest", code(t, err), "a copy onto itself must change something")

		_, err = root.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("archive")})
		require.Equal(t, "BucketNotEmpty", code(t, err))
		del, err := root.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("archive"), Delete: &types.Delete{
			Objects: []types.ObjectIdentifier{{Key: aws.String("copied.txt")}, {Key: aws.String("never-was")}}}})
		require.NoError(t, err)
		require.Len(t, del.Deleted, 2)
		_, err = root.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("archive")})
		require.NoError(t, err)
		_, err = root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("photos"), Key: aws.String("src.txt")})
		require.NoError(t, err)
		_, err = root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("src.txt")})
		require.Error(t, err)
	})

	t.Run("presigned URLs", func(t *testing.T) {
		_, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("shared.txt"), Body: strings.NewReader("shared")})
		require.NoError(t, err)
		ps := s3.NewPresignClient(root)
		req, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("shared.txt")},
			s3.WithPresignExpires(time.Minute))
		require.NoError(t, err)
		resp, err := c.http.Get(req.URL)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		require.Equal(t, "shared", string(b))

		expired, err := ps.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("shared.txt")},
			s3.WithPresignExpires(time.Second), func(o *s3.PresignOptions) {
				o.Presigner = backdated{v4.NewSigner(func(so *v4.SignerOptions) { so.DisableURIPathEscaping = true }), time.Hour}
			})
		require.NoError(t, err)
		resp, err = c.http.Get(expired.URL)
		require.NoError(t, err)
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
		require.Contains(t, string(b), "<Code>AccessDenied</Code>")
		require.Contains(t, string(b), "Request has expired")
		require.Contains(t, string(b), "<RequestId>")
	})

	t.Run("other keys", func(t *testing.T) {
		ak, sk := c.createKey("backup")
		other := c.sdk(ak, sk)
		_, err := other.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("intruder"), Body: strings.NewReader("x")})
		require.Equal(t, "AccessDenied", code(t, err))
		_, err = root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("intruder")})
		require.Equal(t, "NotFound", code(t, err), "the refused PUT stored nothing")
		_, err = other.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("shared.txt")})
		require.Equal(t, "AccessDenied", code(t, err))
		_, err = other.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("photos")})
		require.Equal(t, "BucketAlreadyExists", code(t, err))
		_, err = other.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("backups")})
		require.NoError(t, err)
		mine, err := other.ListBuckets(ctx, &s3.ListBucketsInput{})
		require.NoError(t, err)
		require.Len(t, mine.Buckets, 1, "a key sees its own buckets")
		require.Equal(t, "backups", *mine.Buckets[0].Name)
		everything, err := root.ListBuckets(ctx, &s3.ListBucketsInput{})
		require.NoError(t, err)
		require.Len(t, everything.Buckets, 2, "the admin sees them all")
		_, err = root.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("backups")})
		require.NoError(t, err, "an admin may use any bucket")

		// REST: the key works with Basic, but not on admin paths.
		status, _ := c.rest(http.MethodGet, "/api/files", nil, ak, sk)
		require.Equal(t, http.StatusOK, status)
		status, body := c.rest(http.MethodGet, "/api/admin/keys", nil, ak, sk)
		require.Equal(t, http.StatusForbidden, status, string(body))
		require.Contains(t, string(body), `"FORBIDDEN"`)

		// Revoked, the key is refused at once.
		status, _ = c.rest(http.MethodDelete, "/api/admin/keys/"+ak, nil, rootKey, rootSecret)
		require.Equal(t, http.StatusNoContent, status)
		_, err = other.ListBuckets(ctx, &s3.ListBucketsInput{})
		require.Equal(t, "InvalidAccessKeyId", code(t, err))
	})

	t.Run("bad requests store nothing", func(t *testing.T) {
		wrong := c.sdk(rootKey, "not-the-root-secret")
		_, err := wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("forged"), Body: strings.NewReader("x")})
		require.Equal(t, "SignatureDoesNotMatch", code(t, err))
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String(strings.Repeat("k", 1025)), Body: strings.NewReader("x")})
		require.Equal(t, "KeyTooLongError", code(t, err))
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("digest"), Body: strings.NewReader("x"),
			ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")}) // the MD5 of nothing
		require.Equal(t, "BadDigest", code(t, err))
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("crc"), Body: strings.NewReader("x"),
			ChecksumCRC32: aws.String("AAAAAA==")}) // the CRC32 of nothing
		require.Equal(t, "BadDigest", code(t, err))
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("huge"),
			Body: bytes.NewReader(make([]byte, 17<<20))}) // MAX_FILE_SIZE is 16MiB
		require.Equal(t, "EntityTooLarge", code(t, err))
		_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("nowhere"), Key: aws.String("k"), Body: strings.NewReader("x")})
		require.Equal(t, "NoSuchBucket", code(t, err))
		mp, err := root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("photos"), Key: aws.String("big")})
		require.NoError(t, err)
		_, err = root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("photos"), Key: aws.String("big"),
			UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: aws.String(`"` + md5hex(nil) + `"`)}}}})
		require.Equal(t, "InvalidPart", code(t, err), "a part never sent")
		_, err = root.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("photos"), Key: aws.String("big"), UploadId: mp.UploadId})
		require.NoError(t, err)

		status, body := c.signed(http.MethodPost, "/photos?delete", []byte("<Delete><Object><Key>shared.txt</Key></Object"))
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, string(body), "<Code>MalformedXML</Code>")
		status, body = c.signed(http.MethodGet, "/photos?policy", nil)
		require.Equal(t, http.StatusNotImplemented, status)
		require.Contains(t, string(body), "<Code>NotImplemented</Code>")
		resp, err := c.http.Get(c.s3URL + "/photos/shared.txt")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "an anonymous request")

		for _, k := range []string{"forged", "digest", "crc", "huge", strings.Repeat("k", 1025)} {
			_, err := root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String(k)})
			require.Error(t, err, "%s must not be stored", k[:min(len(k), 10)])
		}
		_, err = root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("photos"), Key: aws.String("shared.txt")})
		require.NoError(t, err, "the malformed delete deleted nothing")
		status, _ = c.rest(http.MethodGet, "/api/files", nil, "", "")
		require.Equal(t, http.StatusUnauthorized, status, "REST needs a key once a root key is set")
		status, _ = c.rest(http.MethodGet, "/health/live", nil, "", "")
		require.Equal(t, http.StatusOK, status)
	})

	t.Run("multipart", func(t *testing.T) {
		mp, err := root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin"),
			ContentType: aws.String("application/x-parts")})
		require.NoError(t, err)
		first, last := bytes.Repeat([]byte("p"), 5<<20), []byte("and the rest")
		// A part whose bytes do not match its Content-MD5 is refused and
		// not kept: the session's chunks of it are dropped.
		_, err = root.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(last), ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")}) // the MD5 of nothing
		require.Equal(t, "BadDigest", code(t, err))
		parts, err := root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin"), UploadId: mp.UploadId})
		require.NoError(t, err)
		require.Empty(t, parts.Parts, "the refused part is not listed")
		var done []types.CompletedPart
		for i, b := range [][]byte{first, last} {
			out, err := root.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin"), UploadId: mp.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(b)})
			require.NoError(t, err)
			require.Equal(t, `"`+md5hex(b)+`"`, *out.ETag)
			done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag})
		}
		parts, err = root.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin"), UploadId: mp.UploadId})
		require.NoError(t, err)
		require.Len(t, parts.Parts, 2)
		fin, err := root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin"),
			UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(*fin.ETag, `-2"`), *fin.ETag)
		got, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("parts.bin")})
		require.Equal(t, append(append([]byte{}, first...), last...), readAll(t, got, err), "the parts, in order, byte-exact")
		require.Equal(t, *fin.ETag, *got.ETag)
		require.Equal(t, "application/x-parts", *got.ContentType)
	})

	t.Run("multipart listing", func(t *testing.T) {
		_, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("uploads")})
		require.NoError(t, err)
		byID := map[string]string{}
		for _, k := range []string{"top", "logs/2026/a", "logs/2026/b", "logs/2027/c", "media/x", "top"} {
			mp, err := root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("uploads"), Key: aws.String(k)})
			require.NoError(t, err)
			byID[*mp.UploadId] = k
		}
		// Pages of two across the common prefixes, by the next markers.
		var got []string
		in := &s3.ListMultipartUploadsInput{Bucket: aws.String("uploads"), Delimiter: aws.String("/"), MaxUploads: aws.Int32(2)}
		for page := 0; ; page++ {
			require.Less(t, page, 10)
			out, err := root.ListMultipartUploads(ctx, in)
			require.NoError(t, err)
			for _, u := range out.Uploads {
				got = append(got, byID[*u.UploadId])
			}
			for _, p := range out.CommonPrefixes {
				got = append(got, "prefix:"+*p.Prefix)
			}
			if !*out.IsTruncated {
				break
			}
			in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
		}
		require.Equal(t, []string{"prefix:logs/", "prefix:media/", "top", "top"}, got)
		out, err := root.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("uploads"), Prefix: aws.String("logs/"),
			Delimiter: aws.String("/")})
		require.NoError(t, err)
		require.Empty(t, out.Uploads)
		require.Len(t, out.CommonPrefixes, 2)
		require.Equal(t, "logs/2026/", *out.CommonPrefixes[0].Prefix)
		require.Equal(t, "logs/2027/", *out.CommonPrefixes[1].Prefix)
		for id, k := range byID {
			_, err := root.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("uploads"), Key: aws.String(k), UploadId: aws.String(id)})
			require.NoError(t, err)
		}
		_, err = root.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("uploads")})
		require.NoError(t, err)
	})

	t.Run("minio-go", func(t *testing.T) {
		mc, err := minio.New(strings.TrimPrefix(c.s3URL, "http://"), &minio.Options{
			Creds: miniocreds.NewStaticV4(rootKey, rootSecret, ""), Region: region, BucketLookup: minio.BucketLookupPath,
		})
		require.NoError(t, err)
		data := bytes.Repeat([]byte("minio "), 40000) // sent as a signed aws-chunked stream
		info, err := mc.PutObject(ctx, "photos", "minio/object.bin", bytes.NewReader(data), int64(len(data)),
			minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true})
		require.NoError(t, err)
		require.Equal(t, md5hex(data), info.ETag)
		obj, err := mc.GetObject(ctx, "photos", "minio/object.bin", minio.GetObjectOptions{})
		require.NoError(t, err)
		b, err := io.ReadAll(obj)
		require.NoError(t, err)
		require.Equal(t, data, b)
		var listed []string
		for o := range mc.ListObjects(ctx, "photos", minio.ListObjectsOptions{Prefix: "minio/", Recursive: true}) {
			require.NoError(t, o.Err)
			listed = append(listed, o.Key)
		}
		require.Equal(t, []string{"minio/object.bin"}, listed)
		require.NoError(t, mc.RemoveObject(ctx, "photos", "minio/object.bin", minio.RemoveObjectOptions{}))
	})
}

// backdated presigns as if it were earlier by ago.
type backdated struct {
	s   *v4.Signer
	ago time.Duration
}

func (b backdated) PresignHTTP(ctx context.Context, cr aws.Credentials, r *http.Request, payload, service, region string,
	at time.Time, opts ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return b.s.PresignHTTP(ctx, cr, r, payload, service, region, at.Add(-b.ago), opts...)
}

// signed sends a raw request signed by the root key.
func (c *cluster) signed(method, path string, body []byte) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.s3URL+path, bytes.NewReader(body))
	require.NoError(c.t, err)
	sum := sha256hex(body)
	req.Header.Set("X-Amz-Content-Sha256", sum)
	require.NoError(c.t, v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: rootKey, SecretAccessKey: rootSecret}, req, sum, "s3", region, time.Now()))
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, b
}
