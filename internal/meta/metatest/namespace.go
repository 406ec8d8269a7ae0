package metatest

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// NamespaceStore is a metadata store that also keeps the S3 namespace.
type NamespaceStore interface {
	meta.Store
	meta.Namespace
}

// RunNamespace runs the conformance suite of meta.Namespace: buckets,
// objects and their atomic replacement (by PutObject, and by an upload's
// final write, meta.Store.UpdateFileAndPutObject), listings in byte order
// with prefixes, delimiters and pages, the tie of an object to its file,
// access keys, conditional writes and deletes (meta.Precondition),
// checked atomically with the write, the tag sets of objects, uploads
// and buckets, and buckets' CORS rules.
func RunNamespace(t *testing.T, open func(t *testing.T) NamespaceStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s NamespaceStore)
	}{
		{"Buckets", testBuckets},
		{"PutObjectReplaces", testPutObjectReplaces},
		{"ConcurrentPutsEachLearnTheReplaced", testConcurrentPuts},
		{"FinalWriteMovesTheKey", testFinalWriteMovesTheKey},
		{"FinalWriteIsAllOrNothing", testFinalWriteIsAllOrNothing},
		{"FirstWriteCreatesTheFileAndMovesTheKey", testFirstWriteMovesTheKey},
		{"ConcurrentFinalWritesEachLearnTheReplaced", testConcurrentFinalWrites},
		{"ObjectValidation", testObjectValidation},
		{"ObjectFollowsItsFile", testObjectFollowsItsFile},
		{"FileListLeavesOutOthersObjects", testFileListLeavesOutOthersObjects},
		{"ListingMatchesAModel", testListingMatchesAModel},
		{"AccessKeys", testAccessKeys},
		{"Uploads", testUploads},
		{"ConditionalPut", testConditionalPut},
		{"ConditionalFinalWrite", testConditionalFinalWrite},
		{"ConditionalCreatesRaceExactlyOneWins", testConditionalCreatesRace},
		{"ConditionalSwapsRaceExactlyOneWins", testConditionalSwapsRace},
		{"ConditionalDelete", testConditionalDelete},
		{"ObjectTags", testObjectTags},
		{"ObjectTagsRace", testObjectTagsRace},
		{"UploadTags", testUploadTags},
		{"BucketTags", testBucketTags},
		{"BucketCORS", testBucketCORS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// storedFile creates an ACTIVE file for an object to point at.
func storedFile(t *testing.T, s NamespaceStore) string {
	t.Helper()
	if _, err := s.GetNode(ctxT(t), "node-1"); errs.Is(err, errs.NotFound) {
		addNodes(t, s, "node-1")
	}
	return createFile(t, s, newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})).ID
}

func newBucket(t *testing.T, s NamespaceStore, name string) {
	t.Helper()
	require.NoError(t, s.CreateBucket(ctxT(t), &meta.Bucket{Name: name, Owner: "AKIA1"}))
}

func putObject(t *testing.T, s NamespaceStore, bucket, key string) (meta.Object, string) {
	t.Helper()
	o := meta.Object{Bucket: bucket, Key: key, FileID: storedFile(t, s), SizeBytes: 5, ETag: "abc",
		ContentType: "text/plain", Headers: map[string]string{"x-amz-meta-k": "v"}}
	replaced, err := s.PutObject(ctxT(t), &o)
	require.NoError(t, err)
	return o, replaced
}

func testBuckets(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	list, err := s.ListBuckets(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	newBucket(t, s, "zeta")
	newBucket(t, s, "alpha")
	err = s.CreateBucket(ctx, &meta.Bucket{Name: "alpha", Owner: "other"})
	requireKind(t, err, errs.Conflict)
	require.Equal(t, errs.CodeBucketExists, errs.CodeOf(err))
	requireKind(t, s.CreateBucket(ctx, &meta.Bucket{Name: ""}), errs.Invalid)
	requireKind(t, s.CreateBucket(ctx, &meta.Bucket{Name: strings.Repeat("a", 64)}), errs.Invalid)

	b, err := s.GetBucket(ctx, "alpha")
	require.NoError(t, err)
	require.Equal(t, "AKIA1", b.Owner, "the creator keeps the bucket")
	require.False(t, b.CreatedAt.IsZero())
	list, err = s.ListBuckets(ctx)
	require.NoError(t, err)
	require.Equal(t, []meta.Bucket{b, must(s.GetBucket(ctx, "zeta"))}, list, "buckets in name order")

	_, err = s.GetBucket(ctx, "missing")
	require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(err))
	require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(s.DeleteBucket(ctx, "missing")))

	putObject(t, s, "alpha", "k")
	err = s.DeleteBucket(ctx, "alpha")
	require.Equal(t, errs.CodeBucketNotEmpty, errs.CodeOf(err), "%v", err)
	_, err = s.DeleteObject(ctx, "alpha", "k")
	require.NoError(t, err)
	// An unfinished multipart upload holds the bucket too: its caller
	// aborts the uploads first, and one that started meanwhile is a
	// BucketNotEmpty answer, never the store's own words.
	require.NoError(t, s.CreateUpload(ctx, &meta.Upload{ID: "u-alpha", SessionID: "s-alpha", Bucket: "alpha", Key: "k"}))
	err = s.DeleteBucket(ctx, "alpha")
	require.Equal(t, errs.CodeBucketNotEmpty, errs.CodeOf(err), "%v", err)
	require.NoError(t, s.DeleteUpload(ctx, "u-alpha"))
	require.NoError(t, s.DeleteBucket(ctx, "alpha"))
	_, err = s.GetBucket(ctx, "alpha")
	requireKind(t, err, errs.NotFound)

	_, err = s.PutObject(ctx, &meta.Object{Bucket: "alpha", Key: "k", FileID: storedFile(t, s)})
	require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(err), "no object in a bucket that is gone")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func testPutObjectReplaces(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	first, replaced := putObject(t, s, "b", "dir/ключ.txt")
	require.Empty(t, replaced, "a new key replaces nothing")
	got, err := s.GetObject(ctx, "b", "dir/ключ.txt")
	require.NoError(t, err)
	require.Equal(t, first, got, "an object reads back as written")

	second, replaced := putObject(t, s, "b", "dir/ключ.txt")
	require.Equal(t, first.FileID, replaced, "the caller learns which file to delete")
	got, err = s.GetObject(ctx, "b", "dir/ключ.txt")
	require.NoError(t, err)
	require.Equal(t, second.FileID, got.FileID)

	again := second
	replaced, err = s.PutObject(ctx, &again)
	require.NoError(t, err)
	require.Empty(t, replaced, "pointing a key at the file it holds replaces nothing")

	byFile, err := s.ObjectByFile(ctx, second.FileID)
	require.NoError(t, err)
	require.Equal(t, "dir/ключ.txt", byFile.Key)
	_, err = s.ObjectByFile(ctx, first.FileID)
	requireKind(t, err, errs.NotFound)

	deleted, err := s.DeleteObject(ctx, "b", "dir/ключ.txt")
	require.NoError(t, err)
	require.Equal(t, second.FileID, deleted.FileID)
	_, err = s.DeleteObject(ctx, "b", "dir/ключ.txt")
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err))
	_, err = s.GetObject(ctx, "b", "dir/ключ.txt")
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err))
}

// testConcurrentPuts writes one key from many goroutines: every file but
// the one the key ends on must be reported replaced exactly once, or a file
// would be left behind with no key.
func testConcurrentPuts(t *testing.T, s NamespaceStore) {
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = storedFile(t, s)
	}
	concurrentWrites(t, s, ids, func(id string) (string, error) {
		return s.PutObject(ctxT(t), &meta.Object{Bucket: "b", Key: "k", FileID: id, ETag: "e"})
	})
}

// testConcurrentFinalWrites is testConcurrentPuts with each key moved by
// its upload's final write.
func testConcurrentFinalWrites(t *testing.T, s NamespaceStore) {
	recs := map[string]*meta.FileRecord{}
	var ids []string
	for range 8 {
		rec := pendingFile(t, s)
		recs[rec.ID] = rec
		ids = append(ids, rec.ID)
	}
	concurrentWrites(t, s, ids, func(id string) (string, error) {
		rec := recs[id]
		commitPending(rec)
		return s.UpdateFileAndPutObject(ctxT(t), rec, &meta.Object{Bucket: "b", Key: "k", FileID: id, ETag: "e"})
	})
}

// concurrentWrites creates bucket b, points its key k at each of ids from
// a goroutine of its own with write, and checks that every file but the
// one the key ends on was reported replaced exactly once.
func concurrentWrites(t *testing.T, s NamespaceStore, ids []string, write func(id string) (string, error)) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	var mu sync.Mutex
	var replaced []string
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			r, err := write(id)
			if !assertNoError(t, err) {
				return
			}
			if r != "" {
				mu.Lock()
				replaced = append(replaced, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	final, err := s.GetObject(ctx, "b", "k")
	require.NoError(t, err)
	want := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == final.FileID })
	slices.Sort(want)
	slices.Sort(replaced)
	require.Equal(t, want, replaced)
}

// pendingFile creates a PENDING file, as an upload does before it writes
// its copies.
func pendingFile(t *testing.T, s NamespaceStore) *meta.FileRecord {
	t.Helper()
	if _, err := s.GetNode(ctxT(t), "node-1"); errs.Is(err, errs.NotFound) {
		addNodes(t, s, "node-1")
	}
	rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaPending})
	rec.Status, rec.PrimaryNodeID = meta.FilePending, ""
	return createFile(t, s, rec)
}

// commitPending makes rec what an upload's final write records: its copy
// written, the file DEGRADED (one copy of three).
func commitPending(rec *meta.FileRecord) {
	rec.Status, rec.StatusReason, rec.PrimaryNodeID = meta.FileDegraded, "1 of 3 copies written", "node-1"
	rec.Replicas[0].Status = meta.ReplicaActive
}

// testFinalWriteMovesTheKey commits uploads with their keys: the file and
// its key change together, the caller learns the file the key held, and
// the file's record reads back as written (a store that caches records
// must drop what it held).
func testFinalWriteMovesTheKey(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	old, _ := putObject(t, s, "b", "k")

	rec := pendingFile(t, s)
	commitPending(rec)
	o := meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, SizeBytes: rec.SizeBytes, ETag: "new",
		ContentType: "text/plain", Headers: map[string]string{"x-amz-meta-k": "v2"}}
	replaced, err := s.UpdateFileAndPutObject(ctx, rec, &o)
	require.NoError(t, err)
	require.Equal(t, old.FileID, replaced, "the caller learns which file to delete")
	require.EqualValues(t, 2, rec.Version, "rec takes the stored version")
	require.False(t, o.ModifiedAt.IsZero())
	got, err := s.GetObject(ctx, "b", "k")
	require.NoError(t, err)
	require.Equal(t, o, got, "the object reads back as written")
	stored, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, stored.Status)
	require.Equal(t, meta.ReplicaActive, stored.Replicas[0].Status)
	require.Equal(t, rec.Version, stored.Version)

	// Read, so a cache holds it; the next final write must not be hidden.
	_, err = s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	rec.StatusReason = "written again"
	replaced, err = s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "other", FileID: rec.ID, ETag: "e"})
	require.NoError(t, err)
	require.Empty(t, replaced, "a new key replaces nothing")
	stored, err = s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, "written again", stored.StatusReason, "UpdateFileAndPutObject is read back")

	replaced, err = s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "e"})
	require.NoError(t, err)
	require.Empty(t, replaced, "pointing a key at the file it holds replaces nothing")
}

// testFirstWriteMovesTheKey commits uploads that have no row yet with
// their keys (CreateFileAndPutObject): the file and its key appear
// together, the caller learns the file the key held, and a write that
// fails in either part leaves neither.
func testFirstWriteMovesTheKey(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	old, _ := putObject(t, s, "b", "k")
	fresh := func() *meta.FileRecord {
		rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
		rec.Status, rec.StatusReason, rec.PrimaryNodeID = meta.FileDegraded, "1 of 3 copies written", "node-1"
		return rec
	}

	rec := fresh()
	o := meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, SizeBytes: rec.SizeBytes, ETag: "new",
		ContentType: "text/plain", Headers: map[string]string{"x-amz-meta-k": "v2"}}
	replaced, err := s.CreateFileAndPutObject(ctx, rec, &o)
	require.NoError(t, err)
	require.Equal(t, old.FileID, replaced, "the caller learns which file to delete")
	require.EqualValues(t, 1, rec.Version, "rec takes the stored version")
	require.NotZero(t, rec.Replicas[0].ID, "rec takes the copies' ids")
	got, err := s.GetObject(ctx, "b", "k")
	require.NoError(t, err)
	require.Equal(t, o, got, "the object reads back as written")
	stored, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDegraded, stored.Status)
	require.Equal(t, rec.Replicas, stored.Replicas)

	for name, write := range map[string]func(rec *meta.FileRecord) error{
		"bucket gone": func(rec *meta.FileRecord) error {
			_, err := s.CreateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "gone", Key: "k", FileID: rec.ID, ETag: "e"})
			requireKind(t, err, errs.NotFound)
			require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(err))
			return err
		},
		"invalid key": func(rec *meta.FileRecord) error {
			_, err := s.CreateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "a\xffb", FileID: rec.ID, ETag: "e"})
			requireKind(t, err, errs.Invalid)
			return err
		},
		"file exists": func(*meta.FileRecord) error {
			again := fresh()
			again.ID = stored.ID
			_, err := s.CreateFileAndPutObject(ctx, again, &meta.Object{Bucket: "b", Key: "k", FileID: again.ID, ETag: "e"})
			requireKind(t, err, errs.Conflict)
			return err
		},
	} {
		rec := fresh()
		before := *rec
		require.Error(t, write(rec), name)
		require.Equal(t, before.Version, rec.Version, "%s: rec is left as it was", name)
		_, err := s.GetFile(ctx, rec.ID)
		requireKind(t, err, errs.NotFound)
		got, err := s.GetObject(ctx, "b", "k")
		require.NoError(t, err)
		require.Equal(t, o.FileID, got.FileID, "%s: the key keeps its file", name)
	}
}

// testFinalWriteIsAllOrNothing fails the write in each of its parts: the
// file's record and the key are both left as they were.
func testFinalWriteIsAllOrNothing(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	old, _ := putObject(t, s, "b", "k")
	requireUnchanged := func(name string, rec meta.FileRecord) {
		t.Helper()
		got, err := s.GetObject(ctx, "b", "k")
		require.NoError(t, err)
		require.Equal(t, old.FileID, got.FileID, "%s: the key keeps its file", name)
		stored, err := s.GetFile(ctx, rec.ID)
		if errs.Is(err, errs.NotFound) {
			return
		}
		require.NoError(t, err)
		require.Equal(t, meta.FilePending, stored.Status, "%s: the file is not committed", name)
		require.Equal(t, rec.Version, stored.Version, "%s", name)
	}

	object := func(rec *meta.FileRecord) *meta.Object {
		return &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "e"}
	}
	cases := []struct {
		name  string
		write func(rec *meta.FileRecord) error
		check func(t *testing.T, err error)
	}{
		{"bucket gone", func(rec *meta.FileRecord) error {
			o := object(rec)
			o.Bucket = "gone"
			_, err := s.UpdateFileAndPutObject(ctx, rec, o)
			return err
		}, func(t *testing.T, err error) {
			requireKind(t, err, errs.NotFound)
			require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(err))
		}},
		{"invalid key", func(rec *meta.FileRecord) error {
			o := object(rec)
			o.Key = "a\xffb"
			_, err := s.UpdateFileAndPutObject(ctx, rec, o)
			return err
		}, func(t *testing.T, err error) { requireKind(t, err, errs.Invalid) }},
		{"stale file version", func(rec *meta.FileRecord) error {
			stale := *rec
			stale.Version++
			_, err := s.UpdateFileAndPutObject(ctx, &stale, object(rec))
			return err
		}, func(t *testing.T, err error) { requireKind(t, err, errs.Conflict) }},
		{"file gone", func(rec *meta.FileRecord) error {
			require.NoError(t, s.DeleteFile(ctx, rec.ID))
			_, err := s.UpdateFileAndPutObject(ctx, rec, object(rec))
			return err
		}, func(t *testing.T, err error) { requireKind(t, err, errs.NotFound) }},
	}
	for _, c := range cases {
		rec := pendingFile(t, s)
		before := *rec
		commitPending(rec)
		err := c.write(rec)
		c.check(t, err)
		require.Equal(t, before.Version, rec.Version, "%s: rec is left as it was", c.name)
		requireUnchanged(c.name, *rec)
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func testObjectValidation(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	id := storedFile(t, s)
	for name, o := range map[string]meta.Object{
		"empty key":     {Bucket: "b", Key: "", FileID: id},
		"key too long":  {Bucket: "b", Key: strings.Repeat("k", meta.MaxKeyBytes+1), FileID: id},
		"invalid UTF-8": {Bucket: "b", Key: "a\xffb", FileID: id},
		"bad file id":   {Bucket: "b", Key: "k", FileID: "nope"},
		"unknown file":  {Bucket: "b", Key: "k", FileID: "00000000-0000-4000-8000-000000000000"},
	} {
		_, err := s.PutObject(ctx, &o)
		require.Equal(t, errs.Invalid, errs.KindOf(err), "%s: %v", name, err)
		_, err = s.GetObject(ctx, "b", "k")
		require.Equal(t, errs.NotFound, errs.KindOf(err), "%s: nothing stored", name)
	}
	o := meta.Object{Bucket: "b", Key: strings.Repeat("k", meta.MaxKeyBytes), FileID: id}
	_, err := s.PutObject(ctx, &o)
	require.NoError(t, err, "a key of exactly %d bytes is allowed", meta.MaxKeyBytes)
}

// testObjectFollowsItsFile deletes an object's file row (as the REST API's
// delete does): the key goes with it.
func testObjectFollowsItsFile(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	o, _ := putObject(t, s, "b", "k")
	require.NoError(t, s.DeleteFile(ctx, o.FileID))
	_, err := s.GetObject(ctx, "b", "k")
	requireKind(t, err, errs.NotFound)
	require.NoError(t, s.DeleteBucket(ctx, "b"), "the bucket is empty again")
}

// testFileListLeavesOutOthersObjects: a file list for a key (VisibleTo)
// leaves out, from its page and its total, the files that hold objects of
// buckets another key owns; the key's own objects and files that are no
// object stay, and a list for no key has them all.
func testFileListLeavesOutOthersObjects(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "mine", Owner: "AKIAMINE"}))
	require.NoError(t, s.CreateBucket(ctx, &meta.Bucket{Name: "theirs", Owner: "AKIATHEIRS"}))
	mine, _ := putObject(t, s, "mine", "a")
	theirs, _ := putObject(t, s, "theirs", "a")
	theirs2, _ := putObject(t, s, "theirs", "b")
	plain := storedFile(t, s)
	ids := func(q meta.FileQuery) ([]string, int) {
		t.Helper()
		files, total, err := s.ListFiles(ctx, q)
		require.NoError(t, err)
		var out []string
		for _, f := range files {
			out = append(out, f.ID)
		}
		slices.Sort(out)
		return out, total
	}
	sorted := func(v ...string) []string { slices.Sort(v); return v }

	got, total := ids(meta.FileQuery{Limit: 10, VisibleTo: "AKIAMINE"})
	require.Equal(t, sorted(mine.FileID, plain), got)
	require.Equal(t, 2, total)
	got, total = ids(meta.FileQuery{Limit: 1, Offset: 1, VisibleTo: "AKIAMINE"})
	require.Len(t, got, 1, "pages are cut after the filter")
	require.Equal(t, 2, total)
	got, total = ids(meta.FileQuery{Limit: 10, VisibleTo: "AKIATHEIRS"})
	require.Equal(t, sorted(theirs.FileID, theirs2.FileID, plain), got)
	require.Equal(t, 3, total)
	got, total = ids(meta.FileQuery{Limit: 10})
	require.Equal(t, sorted(mine.FileID, theirs.FileID, theirs2.FileID, plain), got)
	require.Equal(t, 4, total)
}

// testListingMatchesAModel lists a set of keys chosen to catch ordering and
// prefix mistakes (upper case before lower, multi-byte UTF-8 after ASCII, a
// key equal to a common prefix, delimiters of more than one byte) every way
// a client asks, page by page, and compares with a listing computed by
// brute force.
func testListingMatchesAModel(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	newBucket(t, s, "other")
	keys := []string{"a", "a/", "a/b", "a/b/c", "a/c", "a//d", "B", "b/x", "b/y/z", "é", "é/1", "z~", "zz::1", "zz::2", "photos/2024/1.jpg",
		"photos/2024/2.jpg", "photos/2025/1.jpg", "photos/index.html"}
	for _, k := range keys {
		putObject(t, s, "b", k)
	}
	putObject(t, s, "other", "a/b")
	sorted := slices.Clone(keys)
	slices.Sort(sorted) // Go compares strings by byte, as S3 does
	for _, q := range []meta.ListQuery{
		{}, {Delimiter: "/"}, {Prefix: "a/"}, {Prefix: "a/", Delimiter: "/"}, {Prefix: "photos/", Delimiter: "/"},
		{Delimiter: "::"}, {Prefix: "zz", Delimiter: "::"}, {Prefix: "é"}, {Prefix: "nothing"}, {After: "b/x"},
		{After: "a/", Delimiter: "/"}, {Prefix: "photos/20", Delimiter: "/", After: "photos/2024/"},
	} {
		q.Bucket = "b"
		want := modelList(sorted, q)
		for _, pageSize := range []int{1, 2, 3, 1000} {
			var got []string
			after := q.After
			for range 100 {
				pq := q
				pq.MaxKeys, pq.After = pageSize, after
				page, err := meta.List(ctx, s, pq)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page.Objects)+len(page.Prefixes), pageSize)
				got = append(got, entries(page)...)
				if !page.Truncated {
					break
				}
				after = page.Next
			}
			require.Equal(t, want, got, "query %+v, pages of %d", q, pageSize)
		}
	}
	page, err := meta.List(ctx, s, meta.ListQuery{Bucket: "b", MaxKeys: 0})
	require.NoError(t, err)
	require.Empty(t, page.Objects)
}

// entries is a page's objects and prefixes in key order, prefixes marked.
func entries(p meta.ListPage) []string {
	var out []string
	for _, o := range p.Objects {
		out = append(out, o.Key)
	}
	for _, cp := range p.Prefixes {
		out = append(out, "prefix:"+cp)
	}
	slices.SortFunc(out, func(a, b string) int {
		return strings.Compare(strings.TrimPrefix(a, "prefix:"), strings.TrimPrefix(b, "prefix:"))
	})
	return out
}

func modelList(sorted []string, q meta.ListQuery) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range sorted {
		if !strings.HasPrefix(k, q.Prefix) || k <= q.After {
			continue
		}
		if q.Delimiter != "" {
			if i := strings.Index(k[len(q.Prefix):], q.Delimiter); i >= 0 {
				cp := k[:len(q.Prefix)+i+len(q.Delimiter)]
				if !seen[cp] && cp > q.After {
					out = append(out, "prefix:"+cp)
				}
				seen[cp] = true
				continue
			}
		}
		out = append(out, k)
	}
	return out
}

func testAccessKeys(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	list, err := s.ListAccessKeys(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	k := meta.AccessKey{AccessKey: "AKB", Name: "backup", Secret: "sealed-b"}
	require.NoError(t, s.CreateAccessKey(ctx, &k))
	admin := meta.AccessKey{AccessKey: "AKA", Name: "ops", Secret: "sealed-a", Admin: true}
	require.NoError(t, s.CreateAccessKey(ctx, &admin))
	requireKind(t, s.CreateAccessKey(ctx, &meta.AccessKey{AccessKey: "AKB", Name: "again", Secret: "x"}), errs.Conflict)
	requireKind(t, s.CreateAccessKey(ctx, &meta.AccessKey{AccessKey: "AKC", Name: "no secret"}), errs.Invalid)

	got, err := s.GetAccessKey(ctx, "AKB")
	require.NoError(t, err)
	require.Equal(t, k, got)
	list, err = s.ListAccessKeys(ctx)
	require.NoError(t, err)
	require.Equal(t, []meta.AccessKey{admin, k}, list)

	require.NoError(t, s.DeleteAccessKey(ctx, "AKB"))
	_, err = s.GetAccessKey(ctx, "AKB")
	require.Equal(t, errs.CodeAccessKeyNotFound, errs.CodeOf(err))
	require.Equal(t, errs.CodeAccessKeyNotFound, errs.CodeOf(s.DeleteAccessKey(ctx, "AKB")))
}

func testUploads(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	_, err := s.GetUpload(ctx, "none")
	require.Equal(t, errs.CodeMultipartNotFound, errs.CodeOf(err))
	requireKind(t, s.CreateUpload(ctx, &meta.Upload{ID: "u0", SessionID: "s0", Bucket: "nobucket", Key: "k"}), errs.NotFound)
	newBucket(t, s, "b")
	newBucket(t, s, "c")
	mk := func(id, bucket, key string) meta.Upload {
		u := meta.Upload{ID: id, SessionID: "session-" + id, Bucket: bucket, Key: key, Owner: "AKIA1", ContentType: "text/plain",
			Headers: map[string]string{"x-amz-meta-a": "1"}}
		require.NoError(t, s.CreateUpload(ctx, &u))
		return u
	}
	u1 := mk("u1", "b", "dir/x")
	mk("u3", "b", "dir/x")
	mk("u2", "b", "dir/y")
	mk("u4", "b", "other")
	mk("u5", "c", "dir/x")
	requireKind(t, s.CreateUpload(ctx, &meta.Upload{ID: "u1", SessionID: "s", Bucket: "b", Key: "k"}), errs.Conflict)
	got, err := s.GetUpload(ctx, "u1")
	require.NoError(t, err)
	require.Equal(t, u1, got)

	ids := func(us []meta.Upload) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.ID)
		}
		return out
	}
	all, err := s.UploadsAfter(ctx, "b", "", "", "", 100)
	require.NoError(t, err)
	require.Equal(t, []string{"u1", "u3", "u2", "u4"}, ids(all), "by key, then by upload id")
	page, err := s.UploadsAfter(ctx, "b", "dir/", "dir/x", "u1", 100)
	require.NoError(t, err)
	require.Equal(t, []string{"u3", "u2"}, ids(page), "after a (key, id) marker, inside the prefix")
	page, err = s.UploadsAfter(ctx, "b", "", "", "", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"u1"}, ids(page))

	require.NoError(t, s.DeleteUpload(ctx, "u1"))
	require.Equal(t, errs.CodeMultipartNotFound, errs.CodeOf(s.DeleteUpload(ctx, "u1")))
	_, err = s.GetUpload(ctx, "u1")
	requireKind(t, err, errs.NotFound)
}
