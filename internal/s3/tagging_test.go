package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
)

func sdkTags(kv ...string) []types.Tag {
	var out []types.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

func tagPairs(tags []types.Tag) []string {
	var out []string
	for _, t := range tags {
		out = append(out, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
	}
	return out
}

// TestObjectTagging: an object's tags come with the write that stores it
// (x-amz-tagging on PutObject, CreateMultipartUpload and a CopyObject that
// replaces them) or by PutObjectTagging, are counted on GET and HEAD, and
// belong to that version of the key: an overwrite without tags has none.
func TestObjectTagging(t *testing.T) {
	s := newSDKServer(t, nil)
	c, ctx := s.c, context.Background()
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	get := func(key string) []string {
		t.Helper()
		out, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		require.NoError(t, err)
		return tagPairs(out.TagSet)
	}

	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v"),
		Tagging: aws.String("team=storage&note=a%20b%26c&empty=")})
	require.NoError(t, err)
	require.Equal(t, []string{"team=storage", "note=a b&c", "empty="}, get("k"), "in the order sent, decoded")
	head, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	require.NoError(t, err)
	require.EqualValues(t, 3, aws.ToInt32(head.TagCount))
	obj, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	require.NoError(t, err)
	obj.Body.Close()
	require.EqualValues(t, 3, aws.ToInt32(obj.TagCount))

	_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: sdkTags("ключ", "значение", "b", "2")}})
	require.NoError(t, err)
	require.Equal(t, []string{"ключ=значение", "b=2"}, get("k"), "replaced whole")
	_, err = c.DeleteObjectTagging(ctx, &awss3.DeleteObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	require.NoError(t, err)
	require.Empty(t, get("k"))
	head, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	require.NoError(t, err)
	require.Nil(t, head.TagCount, "no count without tags")

	_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: sdkTags("old", "1")}})
	require.NoError(t, err)
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("v2")})
	require.NoError(t, err)
	require.Empty(t, get("k"), "an overwrite without tags drops the old ones")

	// CopyObject copies the source's tags unless told to replace them.
	_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
		Tagging: &types.Tagging{TagSet: sdkTags("src", "1")}})
	require.NoError(t, err)
	_, err = c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copied"), CopySource: aws.String("bkt/k")})
	require.NoError(t, err)
	require.Equal(t, []string{"src=1"}, get("copied"))
	_, err = c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("replaced"), CopySource: aws.String("bkt/k"),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("dst=2")})
	require.NoError(t, err)
	require.Equal(t, []string{"dst=2"}, get("replaced"))
	_, err = c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("bare"), CopySource: aws.String("bkt/k"),
		TaggingDirective: types.TaggingDirectiveReplace})
	require.NoError(t, err)
	require.Empty(t, get("bare"), "REPLACE without x-amz-tagging: no tags")

	// A multipart upload's tags are given at its start and land at its end.
	create, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		Tagging: aws.String("kind=multipart")})
	require.NoError(t, err)
	part, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: create.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("one part"))})
	require.NoError(t, err)
	_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		UploadId: create.UploadId, MultipartUpload: &types.CompletedMultipartUpload{
			Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
	require.NoError(t, err)
	require.Equal(t, []string{"kind=multipart"}, get("mp"))

	_, err = c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("missing")})
	require.Equal(t, "NoSuchKey", s3Code(t, err))
	_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String("bkt"), Key: aws.String("missing"),
		Tagging: &types.Tagging{TagSet: sdkTags("a", "1")}})
	require.Equal(t, "NoSuchKey", s3Code(t, err))
}

// TestTagLimits: S3's limits on tag sets, and the Content-MD5 of a
// configuration body, each answered with S3's code and nothing stored.
func TestTagLimits(t *testing.T) {
	srv, mf := newServer(t, "us-east-1", "")
	status, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	status, body := call(t, srv, http.MethodPut, "", "/bkt/k", "us-east-1", []byte("v"), "X-Amz-Tagging", "keep=1")
	require.Equal(t, http.StatusOK, status, body)

	set := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "<Tag><Key>k%d</Key><Value>v</Value></Tag>", i)
		}
		return "<Tagging><TagSet>" + b.String() + "</TagSet></Tagging>"
	}
	one := func(k, v string) string {
		return "<Tagging><TagSet><Tag><Key>" + k + "</Key><Value>" + v + "</Value></Tag></TagSet></Tagging>"
	}
	for _, tc := range []struct {
		name, path, body, code string
	}{
		{"eleven object tags", "/bkt/k?tagging", set(11), "InvalidTag"},
		{"fifty-one bucket tags", "/bkt?tagging", set(51), "InvalidTag"},
		{"a key of 129 characters", "/bkt/k?tagging", one(strings.Repeat("é", 129), "v"), "InvalidTag"},
		{"a value of 257 characters", "/bkt/k?tagging", one("k", strings.Repeat("é", 257)), "InvalidTag"},
		{"an empty key", "/bkt/k?tagging", one("", "v"), "InvalidTag"},
		{"an aws: key", "/bkt/k?tagging", one("aws:owner", "v"), "InvalidTag"},
		{"an aws: bucket key", "/bkt?tagging", one("AWS:cost", "v"), "InvalidTag"},
		{"a duplicate key", "/bkt/k?tagging",
			"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag><Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>", "InvalidTag"},
		{"not XML", "/bkt/k?tagging", "tags please", "MalformedXML"},
		{"no TagSet", "/bkt/k?tagging", "<Tagging></Tagging>", "MalformedXML"},
		{"a tag without a value", "/bkt/k?tagging", "<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>", "MalformedXML"},
		{"another document", "/bkt?tagging", "<CORSConfiguration></CORSConfiguration>", "MalformedXML"},
	} {
		status, body := call(t, srv, http.MethodPut, "", tc.path, "us-east-1", []byte(tc.body))
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", tc.name, body)
		require.Contains(t, body, "<Code>"+tc.code+"</Code>", tc.name)
	}
	for _, bad := range []string{"a=1&a=2", "aws:x=1", "k=" + strings.Repeat("v", 257), strings.TrimSuffix(strings.Repeat("k=v&", 11), "&")} {
		status, body := call(t, srv, http.MethodPut, "", "/bkt/other", "us-east-1", []byte("x"), "X-Amz-Tagging", bad)
		require.Equal(t, http.StatusBadRequest, status, "x-amz-tagging %q: %s", bad, body)
		require.Contains(t, body, "<Code>InvalidTag</Code>")
	}
	status, body = call(t, srv, http.MethodPut, "", "/bkt/other", "us-east-1", []byte("x"), "X-Amz-Tagging", "a=%zz")
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Len(t, mf.data, 1, "no refused write stored a body")

	for _, digest := range []struct{ value, code string }{
		{"1B2M2Y8AsgTpgAmY7PhCfg==", "BadDigest"}, // the MD5 of nothing
		{"not-an-md5", "InvalidDigest"},
	} {
		status, body = call(t, srv, http.MethodPut, "", "/bkt/k?tagging", "us-east-1", []byte(one("a", "1")), "Content-MD5", digest.value)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, "<Code>"+digest.code+"</Code>")
		status, body = call(t, srv, http.MethodPut, "", "/bkt?cors", "us-east-1",
			[]byte("<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>"),
			"Content-MD5", digest.value)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, "<Code>"+digest.code+"</Code>")
	}
	status, body = call(t, srv, http.MethodGet, "", "/bkt/k?tagging", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<Key>keep</Key>", "a body refused for its digest changed nothing")
	status, body = call(t, srv, http.MethodPut, "", "/bkt/k?tagging", "us-east-1", []byte(set(10)))
	require.Equal(t, http.StatusOK, status, "ten tags are allowed: %s", body)
	status, body = call(t, srv, http.MethodPut, "", "/bkt/k?tagging", "us-east-1",
		[]byte(one(strings.Repeat("é", 128), strings.Repeat("é", 256))))
	require.Equal(t, http.StatusOK, status, "128 and 256 characters are allowed: %s", body)
	status, body = call(t, srv, http.MethodPut, "", "/bkt?tagging", "us-east-1", []byte(set(50)))
	require.Equal(t, http.StatusNoContent, status, "fifty bucket tags are allowed: %s", body)
}

// TestBucketTagging: a bucket's tag set is replaced whole, read back in
// order and, once deleted, NoSuchTagSet, as S3 answers a bucket that never
// had one.
func TestBucketTagging(t *testing.T) {
	s := newSDKServer(t, nil)
	c, ctx := s.c, context.Background()
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	_, err = c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	require.Equal(t, "NoSuchTagSet", s3Code(t, err))

	_, err = c.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: aws.String("bkt"),
		Tagging: &types.Tagging{TagSet: sdkTags("team", "storage", "cost", "42")}})
	require.NoError(t, err)
	out, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	require.Equal(t, []string{"team=storage", "cost=42"}, tagPairs(out.TagSet))

	_, err = c.DeleteBucketTagging(ctx, &awss3.DeleteBucketTaggingInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	_, err = c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String("bkt")})
	require.Equal(t, "NoSuchTagSet", s3Code(t, err), "read at once, not from a cached record")
	_, err = c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String("absent")})
	require.Equal(t, "NoSuchBucket", s3Code(t, err))
	require.Contains(t, s.routes, "PutBucketTagging")
	require.Contains(t, s.routes, "DeleteBucketTagging")
}
