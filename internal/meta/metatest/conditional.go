package metatest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// requirePreconditionFailed checks that err refuses a conditional write
// because the key's object does not meet its precondition.
func requirePreconditionFailed(t *testing.T, err error) {
	t.Helper()
	requireKind(t, err, errs.Precondition)
	require.True(t, errors.Is(err, meta.ErrPreconditionFailed), "%v", err)
}

// requireHolds checks that bucket/key holds fileID with etag.
func requireHolds(t *testing.T, s NamespaceStore, bucket, key, fileID, etag string) {
	t.Helper()
	got, err := s.GetObject(ctxT(t), bucket, key)
	require.NoError(t, err)
	require.Equal(t, fileID, got.FileID)
	require.Equal(t, etag, got.ETag)
	require.Nil(t, got.Precondition, "a precondition is never stored")
}

var (
	mustBeAbsent = &meta.Precondition{Absent: true}
	anyObject    = &meta.Precondition{ETags: []string{"*"}}
)

func mustHave(etags ...string) *meta.Precondition { return &meta.Precondition{ETags: etags} }

// testConditionalPut writes a key with every kind of precondition: an
// absent key (If-None-Match: *), an ETag the key's object must have
// (If-Match), any object ("*"). A write refused leaves the key as it was.
func testConditionalPut(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	put := func(etag string, p *meta.Precondition) (meta.Object, string, error) {
		o := meta.Object{Bucket: "b", Key: "k", FileID: storedFile(t, s), SizeBytes: 1, ETag: etag, Precondition: p}
		replaced, err := s.PutObject(ctx, &o)
		return o, replaced, err
	}

	_, _, err := put("one", mustHave("one"))
	requireKind(t, err, errs.NotFound)
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err), "If-Match on a key that holds nothing: %v", err)
	_, _, err = put("one", anyObject)
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err), "If-Match: * on a key that holds nothing: %v", err)
	_, err = s.GetObject(ctx, "b", "k")
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err), "and nothing was written")

	first, replaced, err := put("one", mustBeAbsent)
	require.NoError(t, err, "If-None-Match: * on a new key")
	require.Empty(t, replaced)
	requireHolds(t, s, "b", "k", first.FileID, "one")

	_, _, err = put("two", mustBeAbsent)
	requirePreconditionFailed(t, err)
	requireHolds(t, s, "b", "k", first.FileID, "one")

	_, _, err = put("two", mustHave("other", "another"))
	requirePreconditionFailed(t, err)
	requireHolds(t, s, "b", "k", first.FileID, "one")

	second, replaced, err := put("two", mustHave("other", "one"))
	require.NoError(t, err, "If-Match with one of the ETags the object has")
	require.Equal(t, first.FileID, replaced, "the caller learns which file to delete")
	requireHolds(t, s, "b", "k", second.FileID, "two")

	third, replaced, err := put("three", anyObject)
	require.NoError(t, err, "If-Match: * on a key that holds an object")
	require.Equal(t, second.FileID, replaced)
	requireHolds(t, s, "b", "k", third.FileID, "three")

	_, _, err = put("four", &meta.Precondition{Absent: true, ETags: []string{"three"}})
	requirePreconditionFailed(t, err)
	requireHolds(t, s, "b", "k", third.FileID, "three")

	other := meta.Object{Bucket: "gone", Key: "k", FileID: storedFile(t, s), ETag: "e", Precondition: mustBeAbsent}
	_, err = s.PutObject(ctx, &other)
	require.Equal(t, errs.CodeBucketNotFound, errs.CodeOf(err), "a missing bucket is answered as without a precondition")
}

// testConditionalFinalWrite holds an upload's final write (first or not)
// to the precondition of the object it moves: refused, neither the file's
// record nor the key changes.
func testConditionalFinalWrite(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	held, _ := putObject(t, s, "b", "k")

	rec := pendingFile(t, s)
	commitPending(rec)
	version := rec.Version
	_, err := s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "new", Precondition: mustBeAbsent})
	requirePreconditionFailed(t, err)
	require.Equal(t, version, rec.Version, "rec is left as it was")
	stored, err := s.GetFile(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FilePending, stored.Status, "the file's update is undone with the key's")
	requireHolds(t, s, "b", "k", held.FileID, held.ETag)

	_, err = s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "new", Precondition: mustHave("not it")})
	requirePreconditionFailed(t, err)
	requireHolds(t, s, "b", "k", held.FileID, held.ETag)

	replaced, err := s.UpdateFileAndPutObject(ctx, rec, &meta.Object{Bucket: "b", Key: "k", FileID: rec.ID, ETag: "new", Precondition: mustHave(held.ETag)})
	require.NoError(t, err)
	require.Equal(t, held.FileID, replaced)
	requireHolds(t, s, "b", "k", rec.ID, "new")

	fresh := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
	fresh.Status, fresh.PrimaryNodeID = meta.FileDegraded, "node-1"
	_, err = s.CreateFileAndPutObject(ctx, fresh, &meta.Object{Bucket: "b", Key: "k", FileID: fresh.ID, ETag: "newer", Precondition: mustBeAbsent})
	requirePreconditionFailed(t, err)
	_, err = s.GetFile(ctx, fresh.ID)
	requireKind(t, err, errs.NotFound)
	requireHolds(t, s, "b", "k", rec.ID, "new")

	_, err = s.CreateFileAndPutObject(ctx, fresh, &meta.Object{Bucket: "b", Key: "new-key", FileID: fresh.ID, ETag: "newer", Precondition: mustHave("new")})
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err), "If-Match on a key that holds nothing: %v", err)
	_, err = s.GetFile(ctx, fresh.ID)
	requireKind(t, err, errs.NotFound)

	replaced, err = s.CreateFileAndPutObject(ctx, fresh, &meta.Object{Bucket: "b", Key: "new-key", FileID: fresh.ID, ETag: "newer", Precondition: mustBeAbsent})
	require.NoError(t, err)
	require.Empty(t, replaced)
	requireHolds(t, s, "b", "new-key", fresh.ID, "newer")
}

// testConditionalCreatesRace races writers of one new key, each with
// If-None-Match: *, by PutObject and by final writes: exactly one wins,
// every other is refused, and the key holds the winner's file.
func testConditionalCreatesRace(t *testing.T, s NamespaceStore) {
	newBucket(t, s, "b")
	const writers = 16
	type entry struct {
		id    string
		write func() error
	}
	var entries []entry
	for i := range writers {
		key := "lock"
		switch i % 3 {
		case 0:
			id := storedFile(t, s)
			entries = append(entries, entry{id, func() error {
				_, err := s.PutObject(ctxT(t), &meta.Object{Bucket: "b", Key: key, FileID: id, ETag: id, Precondition: mustBeAbsent})
				return err
			}})
		case 1:
			rec := pendingFile(t, s)
			entries = append(entries, entry{rec.ID, func() error {
				commitPending(rec)
				_, err := s.UpdateFileAndPutObject(ctxT(t), rec, &meta.Object{Bucket: "b", Key: key, FileID: rec.ID, ETag: rec.ID, Precondition: mustBeAbsent})
				return err
			}})
		default:
			rec := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive})
			rec.Status, rec.PrimaryNodeID = meta.FileDegraded, "node-1"
			entries = append(entries, entry{rec.ID, func() error {
				_, err := s.CreateFileAndPutObject(ctxT(t), rec, &meta.Object{Bucket: "b", Key: key, FileID: rec.ID, ETag: rec.ID, Precondition: mustBeAbsent})
				return err
			}})
		}
	}
	winner := raceWriters(t, entries, func(e entry) (string, error) { return e.id, e.write() })
	requireHolds(t, s, "b", "lock", winner, winner)
}

// testConditionalSwapsRace races writers that each replace the object
// they read (If-Match its ETag), as a compare-and-swap: exactly one wins.
func testConditionalSwapsRace(t *testing.T, s NamespaceStore) {
	newBucket(t, s, "b")
	held, _ := putObject(t, s, "b", "k")
	var ids []string
	for range 12 {
		ids = append(ids, storedFile(t, s))
	}
	winner := raceWriters(t, ids, func(id string) (string, error) {
		replaced, err := s.PutObject(ctxT(t), &meta.Object{Bucket: "b", Key: "k", FileID: id, ETag: id, Precondition: mustHave(held.ETag)})
		if err == nil && replaced != held.FileID {
			return id, fmt.Errorf("the winner replaced %s, not the file it read", replaced)
		}
		return id, err
	})
	requireHolds(t, s, "b", "k", winner, winner)
}

// raceWriters runs write for each of entries at once and checks that
// exactly one succeeded and that every other was refused by its
// precondition; it returns the winner's id.
func raceWriters[E any](t *testing.T, entries []E, write func(E) (string, error)) string {
	t.Helper()
	start := make(chan struct{})
	var mu sync.Mutex
	var wins []string
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Go(func() {
			<-start
			id, err := write(e)
			if err == nil {
				mu.Lock()
				wins = append(wins, id)
				mu.Unlock()
				return
			}
			assert.True(t, errs.KindOf(err) == errs.Precondition && errors.Is(err, meta.ErrPreconditionFailed),
				"a loser is refused by its precondition: %v", err)
		})
	}
	close(start)
	wg.Wait()
	require.Len(t, wins, 1, "exactly one conditional write wins")
	return wins[0]
}

// testConditionalDelete deletes a key only if its object has the ETag
// named (or is any object, "*"): a mismatch keeps it, a missing key is
// NotFound.
func testConditionalDelete(t *testing.T, s NamespaceStore) {
	ctx := ctxT(t)
	newBucket(t, s, "b")
	_, err := s.DeleteObjectIf(ctx, "b", "k", meta.Precondition{ETags: []string{"abc"}})
	requireKind(t, err, errs.NotFound)
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err))

	held, _ := putObject(t, s, "b", "k")
	_, err = s.DeleteObjectIf(ctx, "b", "k", meta.Precondition{ETags: []string{"not it"}})
	requirePreconditionFailed(t, err)
	requireHolds(t, s, "b", "k", held.FileID, held.ETag)

	deleted, err := s.DeleteObjectIf(ctx, "b", "k", meta.Precondition{ETags: []string{"x", held.ETag}})
	require.NoError(t, err)
	require.Equal(t, held.FileID, deleted.FileID, "the caller learns which file to delete")
	_, err = s.GetObject(ctx, "b", "k")
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err))

	held, _ = putObject(t, s, "b", "k")
	deleted, err = s.DeleteObjectIf(ctx, "b", "k", meta.Precondition{ETags: []string{"*"}})
	require.NoError(t, err)
	require.Equal(t, held.FileID, deleted.FileID)
	_, err = s.DeleteObjectIf(ctx, "b", "k", meta.Precondition{ETags: []string{"*"}})
	require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(err))

	// Racing a compare-and-swap: the delete of the ETag read and the swap
	// cannot both succeed.
	held, _ = putObject(t, s, "b", "k")
	next := storedFile(t, s)
	var wg sync.WaitGroup
	var delErr, putErr error
	wg.Go(func() {
		_, delErr = s.DeleteObjectIf(ctxT(t), "b", "k", meta.Precondition{ETags: []string{held.ETag}})
	})
	wg.Go(func() {
		_, putErr = s.PutObject(ctxT(t), &meta.Object{Bucket: "b", Key: "k", FileID: next, ETag: "next", Precondition: mustHave(held.ETag)})
	})
	wg.Wait()
	require.True(t, (delErr == nil) != (putErr == nil), "exactly one of the delete (%v) and the swap (%v) succeeds", delErr, putErr)
	if delErr == nil {
		require.Equal(t, errs.CodeObjectNotFound, errs.CodeOf(putErr), "the swap after the delete finds no object: %v", putErr)
	} else {
		requirePreconditionFailed(t, delErr)
		requireHolds(t, s, "b", "k", next, "next")
	}
}
