package metatest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// testBucketCORS: a bucket's CORS rules are replaced whole and read with
// the bucket, every field as written; they and the bucket's tags change
// independently; none reads as nil.
func testBucketCORS(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	newBucket(t, s, "c")
	require.Nil(t, must(s.GetBucket(ctx, "b")).CORS)

	age := 3000
	zero := 0
	cors := []meta.CORSRule{
		{ID: "app", AllowedOrigins: []string{"https://app.example.com", "https://*.example.org"}, AllowedMethods: []string{"GET", "PUT"},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag", "x-amz-request-id"}, MaxAgeSeconds: &age},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"HEAD"}, MaxAgeSeconds: &zero},
		{AllowedOrigins: []string{"http://localhost:3000"}, AllowedMethods: []string{"DELETE"}},
	}
	require.NoError(t, s.PutBucketCORS(ctx, "b", cors))
	b := must(s.GetBucket(ctx, "b"))
	require.Equal(t, cors, b.CORS, "every rule and field as written, a zero max age kept apart from none")
	list, err := s.ListBuckets(ctx)
	require.NoError(t, err)
	require.Equal(t, cors, list[0].CORS)
	require.Nil(t, list[1].CORS)

	tags := tagSet("team", "web")
	require.NoError(t, s.PutBucketTags(ctx, "b", tags))
	b = must(s.GetBucket(ctx, "b"))
	require.Equal(t, cors, b.CORS, "a tag change leaves the CORS rules")
	require.NoError(t, s.PutBucketCORS(ctx, "b", cors[2:]))
	b = must(s.GetBucket(ctx, "b"))
	require.Equal(t, tags, b.Tags, "a CORS change leaves the tags")
	require.Equal(t, cors[2:], b.CORS, "replaced whole")

	require.NoError(t, s.PutBucketCORS(ctx, "b", nil))
	require.Nil(t, must(s.GetBucket(ctx, "b")).CORS)
	require.NoError(t, s.PutBucketCORS(ctx, "b", []meta.CORSRule{}))
	require.Nil(t, must(s.GetBucket(ctx, "b")).CORS, "no rules is none")
	require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(s.PutBucketCORS(ctx, "missing", cors)))

	require.NoError(t, s.PutBucketCORS(ctx, "c", cors))
	require.NoError(t, s.DeleteBucket(ctx, "c"))
	require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "c", Owner: "AKIA2"}))
	require.Nil(t, must(s.GetBucket(ctx, "c")).CORS, "a bucket made again starts without the old one's rules")
}
