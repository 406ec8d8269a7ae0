package metatest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

func tagSet(kv ...string) []meta.Tag {
	var out []meta.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, meta.Tag{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func objectTags(t *testing.T, s NamespaceStore, bucket, key string) []meta.Tag {
	t.Helper()
	o, err := s.GetObject(ctxT(t), bucket, key)
	require.NoError(t, err)
	return o.Tags
}

// testObjectTags: an object's tags are part of its row. They read back in
// the order given, by GetObject and listings alike; PutObjectTags replaces
// them on the object the key holds; a write that moves the key (PutObject
// or an upload's final write) writes the tags it carries and drops the old
// ones; none reads as nil.
func testObjectTags(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	tags := tagSet("zeta", "1", "alpha", "", "ключ", "значение 🙂")
	o := meta.Object{Bucket: "b", Key: "k", FileID: storedFile(t, s), SizeBytes: 1, ETag: "e1", Tags: tags}
	_, err := s.PutObject(ctx, &o)
	require.NoError(t, err)
	require.Equal(t, tags, objectTags(t, s, "b", "k"), "in the order given, Unicode and empty values kept")
	listed, err := s.ObjectsAfter(ctx, meta.ObjectQuery{Bucket: "b", Limit: 10})
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, tags, listed[0].Tags)

	require.NoError(t, s.PutObjectTags(ctx, "b", "k", tagSet("new", "v")))
	got, err := s.GetObject(ctx, "b", "k")
	require.NoError(t, err)
	require.Equal(t, tagSet("new", "v"), got.Tags)
	require.Equal(t, o.FileID, got.FileID, "tagging leaves the object as it was")
	require.Equal(t, "e1", got.ETag)

	require.NoError(t, s.PutObjectTags(ctx, "b", "k", nil))
	require.Nil(t, objectTags(t, s, "b", "k"), "no tags read as nil")
	require.NoError(t, s.PutObjectTags(ctx, "b", "k", []meta.Tag{}))
	require.Nil(t, objectTags(t, s, "b", "k"), "an empty set is none")

	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(s.PutObjectTags(ctx, "b", "absent", tagSet("a", "b"))))
	requireKind(t, s.PutObjectTags(ctx, "nobucket", "k", tagSet("a", "b")), errs.NotFound)

	// A new version of the key carries its own tags, or none.
	require.NoError(t, s.PutObjectTags(ctx, "b", "k", tagSet("old", "1")))
	putObject(t, s, "b", "k")
	require.Nil(t, objectTags(t, s, "b", "k"), "an overwrite without tags drops the old ones")
	require.NoError(t, s.PutObjectTags(ctx, "b", "k", tagSet("old", "1")))
	o = meta.Object{Bucket: "b", Key: "k", FileID: storedFile(t, s), ETag: "e2", Tags: tagSet("fresh", "2")}
	_, err = s.PutObject(ctx, &o)
	require.NoError(t, err)
	require.Equal(t, tagSet("fresh", "2"), objectTags(t, s, "b", "k"), "an overwrite with tags has only its own")

	rec := pendingFile(t, s)
	commitPending(rec)
	_, err = s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "e3",
		Tags: tagSet("final", "3")})
	require.NoError(t, err)
	require.Equal(t, tagSet("final", "3"), objectTags(t, s, "b", "k"), "an upload's final write carries its tags")
	rec = pendingFile(t, s)
	commitPending(rec)
	_, err = s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "e4"})
	require.NoError(t, err)
	require.Nil(t, objectTags(t, s, "b", "k"), "and one without tags drops them")

	deleted, err := s.DeleteObject(ctx, "b", "k")
	require.NoError(t, err)
	require.Nil(t, deleted.Tags)
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(s.PutObjectTags(ctx, "b", "k", tagSet("a", "b"))),
		"a deleted key takes no tags")
}

// testObjectTagsRace: tag writes racing overwrites of the key leave it
// with one writer's whole tag set, never a mix, and never a set on a
// version it was not written with but by PutObjectTags.
func testObjectTagsRace(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	putObject(t, s, "b", "k")
	files := make([]string, 8)
	for i := range files {
		files[i] = storedFile(t, s)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			set := tagSet(fmt.Sprintf("w%d", i), "a", fmt.Sprintf("w%d-2", i), "b")
			if i%2 == 0 {
				require.NoError(t, s.PutObjectTags(ctx, "b", "k", set))
				return
			}
			_, err := s.PutObject(ctx, &meta.Object{Bucket: "b", Key: "k", FileID: files[i], ETag: "e", Tags: set})
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	got := objectTags(t, s, "b", "k")
	require.Len(t, got, 2, "%v", got)
	require.Equal(t, got[0].Key+"-2", got[1].Key, "one writer's set, whole: %v", got)
}

// testUploadTags: an upload keeps the tags its object will have.
func testUploadTags(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	tags := tagSet("project", "dfs", "tier", "hot")
	require.NoError(t, s.CreateUpload(ctx, &meta.Upload{ID: "u1", SessionID: "s1", Bucket: "b", Key: "k", Tags: tags}))
	require.NoError(t, s.CreateUpload(ctx, &meta.Upload{ID: "u2", SessionID: "s2", Bucket: "b", Key: "k"}))
	u, err := s.GetUpload(ctx, "u1")
	require.NoError(t, err)
	require.Equal(t, tags, u.Tags)
	u, err = s.GetUpload(ctx, "u2")
	require.NoError(t, err)
	require.Nil(t, u.Tags)
	listed, err := s.UploadsAfter(ctx, "b", "", "", "", 10)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.Equal(t, tags, listed[0].Tags)
}

// testBucketTags: a bucket's tag set is replaced whole and read with the
// bucket; none reads as nil.
func testBucketTags(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	newBucket(t, s, "c")
	b, err := s.GetBucket(ctx, "b")
	require.NoError(t, err)
	require.Nil(t, b.Tags)

	tags := tagSet("team", "storage", "cost-centre", "42")
	require.NoError(t, s.PutBucketTags(ctx, "b", tags))
	b, err = s.GetBucket(ctx, "b")
	require.NoError(t, err)
	require.Equal(t, tags, b.Tags)
	require.Equal(t, "AKIA1", b.Owner, "the rest of the bucket as it was")
	list, err := s.ListBuckets(ctx)
	require.NoError(t, err)
	require.Equal(t, tags, list[0].Tags)
	require.Nil(t, list[1].Tags, "another bucket's tags are its own")

	require.NoError(t, s.PutBucketTags(ctx, "b", tagSet("only", "one")))
	require.Equal(t, tagSet("only", "one"), must(s.GetBucket(ctx, "b")).Tags, "replaced whole")
	require.NoError(t, s.PutBucketTags(ctx, "b", nil))
	require.Nil(t, must(s.GetBucket(ctx, "b")).Tags)
	require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(s.PutBucketTags(ctx, "missing", tags)))

	require.NoError(t, s.PutBucketTags(ctx, "c", tags))
	require.NoError(t, s.DeleteBucket(ctx, "c"))
	require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "c", Owner: "AKIA2"}))
	require.Nil(t, must(s.GetBucket(ctx, "c")).Tags, "a bucket made again starts without the old one's tags")
}
