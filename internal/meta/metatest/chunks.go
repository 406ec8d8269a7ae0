package metatest

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// newSession creates an upload session expiring after ttl.
func newSession(t *testing.T, s meta.Store, ttl time.Duration) meta.UploadSession {
	t.Helper()
	u := meta.UploadSession{ID: uuid.NewString(), FileName: "big.iso", ContentType: "application/octet-stream",
		ExpectedSHA256: "ab", ExpiresAt: time.Now().Add(ttl)}
	require.NoError(t, s.CreateSession(ctxT(t), &u))
	return u
}

// newPart begins an attempt at part number of session u.
func newPart(t *testing.T, s meta.Store, u meta.UploadSession, number int) meta.UploadPart {
	t.Helper()
	p := meta.UploadPart{PartID: uuid.NewString(), SessionID: u.ID, Number: number}
	require.NoError(t, s.BeginPart(ctxT(t), &p))
	return p
}

// addChunks creates n ACTIVE chunks of size bytes each under parent, with a
// copy on each of nodes.
func addChunks(t *testing.T, s meta.Store, parent string, n int, size int64, nodes ...string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		st := map[string]meta.ReplicaStatus{}
		for _, node := range nodes {
			st[node] = meta.ReplicaActive
		}
		rec := newFile(int64(1000+i), st)
		rec.SizeBytes = size
		rec.Chunk = meta.ChunkRef{ParentID: parent, Index: i, Offset: int64(i) * size}
		createFile(t, s, rec)
		ids = append(ids, rec.ID)
	}
	return ids
}

func finishPart(t *testing.T, s meta.Store, p meta.UploadPart, size int64) []string {
	t.Helper()
	p.SizeBytes, p.SHA256, p.MD5 = size, "sha", "md5"
	dropped, err := s.FinishPart(ctxT(t), &p)
	require.NoError(t, err)
	require.True(t, p.Done)
	return dropped
}

func testChunkedFileLifecycle(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1", "n2")
	u := newSession(t, s, time.Hour)
	p1, p2 := newPart(t, s, u, 1), newPart(t, s, u, 2)
	c1 := addChunks(t, s, p1.PartID, 2, 100, "n1", "n2")
	c2 := addChunks(t, s, p2.PartID, 1, 50, "n1")

	// Chunks are blobs: the repair and sweep walks see them, the listing and
	// the counts of files do not.
	got, err := s.ChunksOf(ctx, p1.PartID)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, c1, []string{got[0].ID, got[1].ID})
	require.Len(t, got[0].Replicas, 2)
	require.Equal(t, meta.ChunkRef{ParentID: p1.PartID, Index: 1, Offset: 100}, got[1].Chunk)
	files, total, err := s.ListFiles(ctx, meta.FileQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, files)
	require.Zero(t, total)
	counts, err := s.CountFilesByStatus(ctx)
	require.NoError(t, err)
	require.Zero(t, counts[meta.FileActive])
	ids, err := s.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileActive}, time.Now().Add(time.Minute), 10)
	require.NoError(t, err)
	require.ElementsMatch(t, append(append([]string{}, c1...), c2...), ids)

	// Only finished parts are listed.
	_, parts, err := s.GetSession(ctx, u.ID)
	require.NoError(t, err)
	require.Empty(t, parts)
	finishPart(t, s, p1, 200)
	finishPart(t, s, p2, 50)
	got2, parts, err := s.GetSession(ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, u.FileName, got2.FileName)
	require.Equal(t, u.ExpectedSHA256, got2.ExpectedSHA256)
	require.Len(t, parts, 2)
	require.Equal(t, []int{1, 2}, []int{parts[0].Number, parts[1].Number})
	require.Equal(t, int64(200), parts[0].SizeBytes)
	require.Equal(t, "md5", parts[1].MD5)

	// Completing makes the parts, in the order given, the file's chunks.
	m := newFile(5, nil)
	m.SizeBytes, m.ChunkCount = 250, 3
	dropped, err := s.CompleteSession(ctx, u.ID, m, []string{p1.PartID, p2.PartID})
	require.NoError(t, err)
	require.Empty(t, dropped)
	require.Equal(t, int64(1), m.Version)
	_, _, err = s.GetSession(ctx, u.ID)
	requireKind(t, err, errs.NotFound)
	require.Equal(t, errs.CodeUploadNotFound, errs.CodeOf(err))
	got, err = s.ChunksOf(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []int64{0, 100, 200}, []int64{got[0].Chunk.Offset, got[1].Chunk.Offset, got[2].Chunk.Offset})
	require.Equal(t, []int{1, 1, 2}, []int{got[0].Chunk.Part, got[1].Chunk.Part, got[2].Chunk.Part})
	require.Equal(t, c2[0], got[2].ID)
	for _, c := range got {
		one, err := s.GetFile(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, one, c, "a chunk listed is the chunk read alone, copies and every field")
	}
	left, err := s.ChunksOf(ctx, p1.PartID)
	require.NoError(t, err)
	require.Empty(t, left)

	back, err := s.GetFile(ctx, m.ID)
	require.NoError(t, err)
	require.True(t, back.Manifest())
	require.Equal(t, 3, back.ChunkCount)
	require.False(t, back.IsChunk())
	files, total, err = s.ListFiles(ctx, meta.FileQuery{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, m.ID, files[0].ID)

	// A manifest has no blob: the blob walks leave it out, and the
	// durability report counts its chunks, not it.
	page, err := s.FilesAfter(ctx, "", 100)
	require.NoError(t, err)
	for _, r := range page {
		require.NotEqual(t, m.ID, r.ID)
	}
	require.Len(t, page, 3)
	ids, err = s.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileActive}, time.Now().Add(time.Minute), 10)
	require.NoError(t, err)
	require.NotContains(t, ids, m.ID)
	ids, err = s.FileIDsInRanges(ctx, []meta.PositionRange{{From: 0, To: 1 << 40}})
	require.NoError(t, err)
	require.NotContains(t, ids, m.ID)
	d, err := s.Durability(ctx, []string{"n1", "n2"})
	require.NoError(t, err)
	require.Equal(t, map[int]int{1: 1}, d.FilesByCopies, "one file, as safe as its chunk with one copy")

	// Deleting the manifest deletes its chunks through the blob path.
	require.NoError(t, s.DeleteFile(ctx, m.ID))
	got, err = s.ChunksOf(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for _, c := range got {
		require.Equal(t, meta.FileDeleted, c.Status)
		for _, r := range c.Replicas {
			require.Equal(t, meta.ReplicaDeleting, r.Status)
		}
	}
	ids, err = s.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileDeleted}, time.Now().Add(time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, ids, 3)
}

func testChunkedManifestDeletedIsWalked(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	u := newSession(t, s, time.Hour)
	p := newPart(t, s, u, 1)
	addChunks(t, s, p.PartID, 1, 10)
	finishPart(t, s, p, 10)
	m := newFile(7, nil)
	m.ChunkCount = 1
	_, err := s.CompleteSession(ctx, u.ID, m, []string{p.PartID})
	require.NoError(t, err)
	m.Status = meta.FileDeleted
	require.NoError(t, s.UpdateFile(ctx, m))
	// A DELETED manifest is listed so that the repair loop finishes it.
	ids, err := s.FileIDsByStatus(ctx, []meta.FileStatus{meta.FileDeleted}, time.Now().Add(time.Minute), 10)
	require.NoError(t, err)
	require.Equal(t, []string{m.ID}, ids)
	page, err := s.FilesAfter(ctx, "", 10)
	require.NoError(t, err)
	var seen []string
	for _, r := range page {
		seen = append(seen, r.ID)
	}
	require.Contains(t, seen, m.ID)
}

func testPartReplacement(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1")
	u := newSession(t, s, time.Hour)
	first := newPart(t, s, u, 3)
	old := addChunks(t, s, first.PartID, 2, 10, "n1")
	finishPart(t, s, first, 20)
	second := newPart(t, s, u, 3)
	fresh := addChunks(t, s, second.PartID, 1, 5, "n1")
	// An unfinished attempt is not listed and drops nothing.
	_, parts, err := s.GetSession(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.Equal(t, first.PartID, parts[0].PartID)
	dropped := finishPart(t, s, second, 5)
	require.ElementsMatch(t, old, dropped)
	_, parts, err = s.GetSession(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.Equal(t, second.PartID, parts[0].PartID)
	require.Equal(t, int64(5), parts[0].SizeBytes)
	for _, id := range old {
		rec, err := s.GetFile(ctx, id)
		require.NoError(t, err)
		require.Equal(t, meta.FileDeleted, rec.Status)
		require.Equal(t, meta.ReplicaDeleting, rec.Replicas[0].Status)
	}
	rec, err := s.GetFile(ctx, fresh[0])
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, rec.Status)
	// The replaced attempt is gone.
	first.SizeBytes = 20
	_, err = s.FinishPart(ctx, &first)
	requireKind(t, err, errs.NotFound)

	// Completing with a part that is not a finished attempt changes nothing.
	m := newFile(9, nil)
	m.ChunkCount = 1
	_, err = s.CompleteSession(ctx, u.ID, m, []string{first.PartID})
	requireKind(t, err, errs.Invalid)
	_, err = s.GetFile(ctx, m.ID)
	requireKind(t, err, errs.NotFound)
	_, _, err = s.GetSession(ctx, u.ID)
	require.NoError(t, err)
}

// testRacingPartAttempts: attempts at one part number sent at once (a
// client's retry while its first send is in flight) never drop each other
// unfinished: the one that finishes last is the part, whatever the order
// they began in, and when they finish together exactly one survives.
func testRacingPartAttempts(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1")
	u := newSession(t, s, time.Hour)
	first, retry := newPart(t, s, u, 1), newPart(t, s, u, 1)
	firstChunks := addChunks(t, s, first.PartID, 1, 10, "n1")
	retryChunks := addChunks(t, s, retry.PartID, 1, 10, "n1")
	require.Empty(t, finishPart(t, s, retry, 10), "an unfinished attempt is not dropped")
	require.ElementsMatch(t, retryChunks, finishPart(t, s, first, 10), "the last to finish wins")
	_, parts, err := s.GetSession(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	require.Equal(t, first.PartID, parts[0].PartID)
	rec, err := s.GetFile(ctx, firstChunks[0])
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, rec.Status)

	const n = 8
	attempts := make([]meta.UploadPart, n)
	for i := range attempts {
		attempts[i] = newPart(t, s, u, 2)
		addChunks(t, s, attempts[i].PartID, 1, 10, "n1")
	}
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for _, p := range attempts {
		wg.Go(func() {
			p.SizeBytes, p.SHA256, p.MD5 = 10, "sha", "md5"
			_, err := s.FinishPart(ctx, &p)
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			requireKind(t, err, errs.NotFound) // dropped by a later finish before its own
		}
	}
	_, parts, err = s.GetSession(ctx, u.ID)
	require.NoError(t, err)
	require.Len(t, parts, 2, "one attempt of part 2 survives beside part 1")
}

func testSessionExpiryAndDelete(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1")
	old := newSession(t, s, -time.Minute)
	live := newSession(t, s, time.Hour)
	ids, err := s.ExpiredSessions(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Equal(t, []string{old.ID}, ids)
	_, err = s.ExpiredSessions(ctx, time.Now(), 0)
	requireKind(t, err, errs.Invalid)

	all, err := s.ListSessions(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Less(t, all[0].ID, all[1].ID)
	rest, err := s.ListSessions(ctx, all[0].ID, 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, all[1].ID, rest[0].ID)

	p := newPart(t, s, old, 1)
	chunks := addChunks(t, s, p.PartID, 2, 10, "n1")
	unfinished := newPart(t, s, old, 2)
	chunks = append(chunks, addChunks(t, s, unfinished.PartID, 1, 10, "n1")...)
	finishPart(t, s, p, 20)
	dropped, err := s.DeleteSession(ctx, old.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, chunks, dropped)
	_, _, err = s.GetSession(ctx, old.ID)
	requireKind(t, err, errs.NotFound)
	dropped, err = s.DeleteSession(ctx, old.ID)
	require.NoError(t, err)
	require.Empty(t, dropped)
	for _, id := range chunks {
		rec, err := s.GetFile(ctx, id)
		require.NoError(t, err)
		require.Equal(t, meta.FileDeleted, rec.Status)
	}

	// Parts and completions of a session that is gone are NotFound.
	gone := meta.UploadPart{PartID: uuid.NewString(), SessionID: old.ID, Number: 1}
	requireKind(t, s.BeginPart(ctx, &gone), errs.NotFound)
	m := newFile(1, nil)
	m.ChunkCount = 1
	_, err = s.CompleteSession(ctx, old.ID, m, nil)
	requireKind(t, err, errs.NotFound)
	bad := meta.UploadPart{PartID: uuid.NewString(), SessionID: live.ID, Number: 10001}
	requireKind(t, s.BeginPart(ctx, &bad), errs.Invalid)
	requireKind(t, s.CreateSession(ctx, &meta.UploadSession{ID: "nope", ExpiresAt: time.Now()}), errs.Invalid)
	dup := live
	requireKind(t, s.CreateSession(ctx, &dup), errs.Conflict)
}

func testChunkValidation(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1")
	rec := newFile(1, nil)
	rec.Chunk = meta.ChunkRef{ParentID: "not-a-uuid"}
	requireKind(t, s.CreateFile(ctx, rec), errs.Invalid)
	rec = newFile(1, nil)
	rec.Chunk = meta.ChunkRef{Index: 2}
	requireKind(t, s.CreateFile(ctx, rec), errs.Invalid)
	rec = newFile(1, map[string]meta.ReplicaStatus{"n1": meta.ReplicaActive})
	rec.ChunkCount = 2
	requireKind(t, s.CreateFile(ctx, rec), errs.Invalid)
}

// testChunkWritesAreReadBack is testFileWritesAreReadBack for the methods
// that change chunk records they do not name: a caching store must drop
// those too.
func testChunkWritesAreReadBack(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1")
	status := func(id string) meta.FileStatus {
		t.Helper()
		rec, err := s.GetFile(ctx, id)
		require.NoError(t, err)
		return rec.Status
	}
	u := newSession(t, s, time.Hour)
	first := newPart(t, s, u, 1)
	replaced := addChunks(t, s, first.PartID, 1, 10, "n1")
	finishPart(t, s, first, 10)
	require.Equal(t, meta.FileActive, status(replaced[0]))
	second := newPart(t, s, u, 1)
	kept := addChunks(t, s, second.PartID, 1, 10, "n1")
	finishPart(t, s, second, 10)
	require.Equal(t, meta.FileDeleted, status(replaced[0]), "FinishPart is read back")

	other := newPart(t, s, u, 2)
	dropped := addChunks(t, s, other.PartID, 1, 10, "n1")
	finishPart(t, s, other, 10)
	require.Equal(t, meta.FileActive, status(dropped[0]))
	before, err := s.GetFile(ctx, kept[0])
	require.NoError(t, err)
	require.Equal(t, second.PartID, before.Chunk.ParentID)
	m := newFile(3, nil)
	m.ChunkCount = 1
	_, err = s.CompleteSession(ctx, u.ID, m, []string{second.PartID})
	require.NoError(t, err)
	require.Equal(t, meta.FileDeleted, status(dropped[0]), "CompleteSession is read back")
	after, err := s.GetFile(ctx, kept[0])
	require.NoError(t, err)
	require.Equal(t, m.ID, after.Chunk.ParentID, "CompleteSession is read back")

	require.NoError(t, s.DeleteFile(ctx, m.ID))
	require.Equal(t, meta.FileDeleted, status(kept[0]), "DeleteFile of a manifest is read back")

	v := newSession(t, s, time.Hour)
	p := newPart(t, s, v, 1)
	gone := addChunks(t, s, p.PartID, 1, 10, "n1")
	require.Equal(t, meta.FileActive, status(gone[0]))
	_, err = s.DeleteSession(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, meta.FileDeleted, status(gone[0]), "DeleteSession is read back")
}

// testManifestStatusFollowsChunks checks that a chunked file's stored status,
// the one the listing and the counts read, is the one its chunks give after
// every write that changes a chunk: a lost node, a repair, a failed chunk,
// and a manifest writer that brings an outdated status.
func testManifestStatusFollowsChunks(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "n1", "n2", "n3")
	all := map[string]meta.ReplicaStatus{"n1": meta.ReplicaActive, "n2": meta.ReplicaActive, "n3": meta.ReplicaActive}
	u := newSession(t, s, time.Hour)
	p := newPart(t, s, u, 1)
	var chunks []string
	for i := range 3 {
		rec := newFile(int64(2000+i), all)
		rec.SizeBytes = 10
		rec.Chunk = meta.ChunkRef{ParentID: p.PartID, Index: i, Offset: int64(i) * 10}
		createFile(t, s, rec)
		chunks = append(chunks, rec.ID)
	}
	finishPart(t, s, p, 30)
	m := newFile(7, nil)
	m.SizeBytes, m.ChunkCount = 30, 3
	// The caller's status is not kept when the chunks say otherwise.
	m.Status, m.StatusReason = meta.FileDegraded, "stale"
	_, err := s.CompleteSession(ctx, u.ID, m, []string{p.PartID})
	require.NoError(t, err)
	require.Equal(t, meta.FileActive, m.Status, "CompleteSession returns the status its chunks give")

	listed := func(status meta.FileStatus) []string {
		t.Helper()
		files, _, err := s.ListFiles(ctx, meta.FileQuery{Statuses: []meta.FileStatus{status}, Limit: 10})
		require.NoError(t, err)
		ids := []string{}
		for _, f := range files {
			ids = append(ids, f.ID)
		}
		return ids
	}
	expect := func(status meta.FileStatus, reasonHas string) meta.FileRecord {
		t.Helper()
		back, err := s.GetFile(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, status, back.Status, back.StatusReason)
		require.Contains(t, back.StatusReason, reasonHas)
		require.Equal(t, []string{m.ID}, listed(status))
		counts, err := s.CountFilesByStatus(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, counts[status], "counts %v", counts)
		return back
	}
	before := expect(meta.FileActive, "")
	require.Empty(t, before.StatusReason)

	// A lost disk under one chunk's copy degrades the file, naming the chunk
	// and the reason, without moving the manifest's version.
	changed, err := s.MarkNodeCopiesLost(ctx, "n2", "disk replaced")
	require.NoError(t, err)
	require.Contains(t, changed, m.ID, "the manifest's status changed with its chunks")
	require.Len(t, changed, 4)
	got := expect(meta.FileDegraded, "3 of 3 chunks are short of copies")
	require.Contains(t, got.StatusReason, "disk replaced")
	require.Equal(t, before.Version, got.Version)
	require.Empty(t, listed(meta.FileActive))

	// Repairing two chunks is not enough; the third makes the file ACTIVE.
	repair := func(id string) {
		t.Helper()
		c, err := s.GetFile(ctx, id)
		require.NoError(t, err)
		for i := range c.Replicas {
			c.Replicas[i].Status = meta.ReplicaActive
		}
		c.Status, c.StatusReason = meta.FileActive, ""
		require.NoError(t, s.UpdateFile(ctx, &c))
	}
	repair(chunks[0])
	repair(chunks[1])
	got = expect(meta.FileDegraded, "1 of 3 chunks are short of copies: chunk 2 ("+chunks[2]+")")
	repair(chunks[2])
	expect(meta.FileActive, "")

	// A chunk with no readable copy left makes the file FAILED.
	c, err := s.GetFile(ctx, chunks[1])
	require.NoError(t, err)
	for i := range c.Replicas {
		c.Replicas[i].Status = meta.ReplicaFailed
	}
	c.Status, c.StatusReason = meta.FileFailed, "every copy is gone"
	require.NoError(t, s.UpdateFile(ctx, &c))
	expect(meta.FileFailed, "chunk 1 ("+chunks[1]+")")

	// A writer of the manifest holding the record read before all this (its
	// version is still current) renames it; the status it carries, ACTIVE,
	// is not stored over what the chunks say, and it is told so.
	before.Name = "renamed.iso"
	require.NoError(t, s.UpdateFile(ctx, &before))
	require.Equal(t, meta.FileFailed, before.Status)
	got = expect(meta.FileFailed, "chunk 1")
	require.Equal(t, "renamed.iso", got.Name)

	// PENDING and DELETED manifests are left to their upload and delete.
	require.NoError(t, s.DeleteFile(ctx, m.ID))
	_, err = s.GetFile(ctx, m.ID)
	requireKind(t, err, errs.NotFound)
}

// chunkedFile stores a manifest of size bytes and, under it, one ACTIVE
// chunk per entry of chunks with a copy on each of that entry's nodes.
func chunkedFile(t *testing.T, s meta.Store, status meta.FileStatus, size int64, chunks ...[]string) {
	t.Helper()
	m := newFile(1, nil)
	m.Status, m.SizeBytes, m.ChunkCount = status, size, len(chunks)
	createFile(t, s, m)
	for i, nodes := range chunks {
		addChunk(t, s, m.ID, i, nodes...)
	}
}

// addChunk stores chunk index of parent, ACTIVE, with a copy on each of nodes.
func addChunk(t *testing.T, s meta.Store, parent string, index int, nodes ...string) {
	t.Helper()
	copies := map[string]meta.ReplicaStatus{}
	for _, node := range nodes {
		copies[node] = meta.ReplicaActive
	}
	c := newFile(int64(2000+index), copies)
	c.SizeBytes = 7
	c.Chunk = meta.ChunkRef{ParentID: parent, Index: index, Offset: int64(index) * 7}
	createFile(t, s, c)
}

// testDurabilityChunked: a chunked file counts once, by the fewest healthy
// copies of its chunks, with its whole size at risk; the chunks of an
// upload session not completed are not files and count nowhere. node-4 is
// down.
func testDurabilityChunked(t *testing.T, s meta.Store) {
	ctx := ctxT(t)
	addNodes(t, s, "node-1", "node-2", "node-3", "node-4")
	healthy := []string{"node-1", "node-2", "node-3"}
	all3 := []string{"node-1", "node-2", "node-3"}
	// Two healthy copies: its middle chunk's third is on the down node-4.
	chunkedFile(t, s, meta.FileActive, 300, all3, []string{"node-1", "node-2", "node-4"}, all3)
	// One: two chunks whose only copy is on node-3; node-3's failure
	// would leave the file with none, counted once.
	chunkedFile(t, s, meta.FileDegraded, 500, []string{"node-3"}, all3, []string{"node-3"})
	// Three: safe.
	chunkedFile(t, s, meta.FileActive, 200, all3, all3)
	// Not readable: counted nowhere.
	chunkedFile(t, s, meta.FilePending, 900, []string{"node-1"})
	// A whole-file blob beside them, with two healthy copies.
	blob := newFile(1, map[string]meta.ReplicaStatus{"node-1": meta.ReplicaActive, "node-2": meta.ReplicaActive})
	blob.SizeBytes = 10
	createFile(t, s, blob)
	// An upload in progress: its chunks, with one copy each, are no file.
	u := newSession(t, s, time.Hour)
	p := newPart(t, s, u, 1)
	addChunks(t, s, p.PartID, 2, 100, "node-1")
	finishPart(t, s, p, 200)
	addChunks(t, s, newPart(t, s, u, 2).PartID, 1, 100, "node-2")

	d, err := s.Durability(ctx, healthy)
	require.NoError(t, err)
	require.Equal(t, map[int]int{3: 1, 2: 2, 1: 1}, d.FilesByCopies)
	require.Equal(t, int64(300+500+10), d.BytesAtRisk)
	require.Equal(t, []meta.NodeDurability{
		{NodeID: "node-1", FilesLeftWithOneCopy: 2},
		{NodeID: "node-2", FilesLeftWithOneCopy: 2},
		{NodeID: "node-3", FilesLeftWithNoCopy: 1},
	}, d.Nodes)

	// node-4 comes back: the first file's chunks all have three copies.
	d, err = s.Durability(ctx, append(healthy, "node-4"))
	require.NoError(t, err)
	require.Equal(t, map[int]int{3: 2, 2: 1, 1: 1}, d.FilesByCopies)
	require.Equal(t, int64(500+10), d.BytesAtRisk)
	require.Equal(t, []meta.NodeDurability{
		{NodeID: "node-1", FilesLeftWithOneCopy: 1},
		{NodeID: "node-2", FilesLeftWithOneCopy: 1},
		{NodeID: "node-3", FilesLeftWithNoCopy: 1},
		{NodeID: "node-4"},
	}, d.Nodes)

	// With no healthy node, every readable file has none.
	d, err = s.Durability(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, map[int]int{0: 4}, d.FilesByCopies)
	require.Equal(t, int64(300+500+200+10), d.BytesAtRisk)
}
