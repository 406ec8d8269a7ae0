package files

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// folded is how many leading parts the session's fold covers now.
func folded(s *Service, sessionID string) int {
	f := s.foldOf(sessionID)
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parts)
}

func TestSessionChecksumIsFoldedWhilePartsArriveSoCompletionReadsNothingBack(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := chunkedService(t, nodes, ids, nil)
	ctx := context.Background()
	parts := [][]byte{randomBytes(t, 2*testChunk+1), randomBytes(t, 3*testChunk), randomBytes(t, 7), randomBytes(t, testChunk)}
	whole := slices.Concat(parts...)
	sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
	require.NoError(t, err)
	// Out of order: part 3 cannot be folded until 2 is there.
	for _, i := range []int{0, 2, 1, 3} {
		_, err := s.PutPart(ctx, sess.ID, i+1, bytes.NewReader(parts[i]), -1)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return folded(s, sess.ID) == 4 }, 10*time.Second, 5*time.Millisecond)

	before := nodes.gets.Load()
	rec, err := s.CompleteSession(ctx, sess.ID, nil, sum256(whole))
	require.NoError(t, err)
	require.Equal(t, sum256(whole), rec.Checksum)
	require.Equal(t, before, nodes.gets.Load(), "every part was folded: the completion read no chunk back")
	require.Nil(t, s.foldOf(sess.ID), "a completed session's fold is gone")
	require.Equal(t, whole, download(t, s, rec.ID, byterange.Request{}))
}

func TestSessionChecksumIsRightWhateverTheFoldMissed(t *testing.T) {
	ids := []string{"A", "B", "C"}
	ctx := context.Background()
	cases := []struct {
		name string
		// run sends the parts, possibly completes with a subset, and
		// returns the bytes the file must hold and the parts to complete.
		run func(t *testing.T, s *Service, id string, parts [][]byte) ([]byte, []int)
	}{
		{"a folded part replaced", func(t *testing.T, s *Service, id string, parts [][]byte) ([]byte, []int) {
			for i, p := range parts {
				_, err := s.PutPart(ctx, id, i+1, bytes.NewReader(p), -1)
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return folded(s, id) == 3 }, 10*time.Second, 5*time.Millisecond)
			again := randomBytes(t, testChunk+5)
			_, err := s.PutPart(ctx, id, 2, bytes.NewReader(again), -1)
			require.NoError(t, err)
			return slices.Concat(parts[0], again, parts[2]), nil
		}},
		{"a part skipped by the completion", func(t *testing.T, s *Service, id string, parts [][]byte) ([]byte, []int) {
			for i, p := range parts {
				_, err := s.PutPart(ctx, id, i+1, bytes.NewReader(p), -1)
				require.NoError(t, err)
			}
			return slices.Concat(parts[0], parts[2]), []int{1, 3}
		}},
		{"no fold (a restarted coordinator)", func(t *testing.T, s *Service, id string, parts [][]byte) ([]byte, []int) {
			for i, p := range parts {
				_, err := s.PutPart(ctx, id, i+1, bytes.NewReader(p), -1)
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return folded(s, id) == 3 }, 10*time.Second, 5*time.Millisecond)
			s.dropFold(id)
			return slices.Concat(parts...), nil
		}},
		{"numbers with a gap", func(t *testing.T, s *Service, id string, parts [][]byte) ([]byte, []int) {
			for i, p := range parts {
				_, err := s.PutPart(ctx, id, 2*i+1, bytes.NewReader(p), -1)
				require.NoError(t, err)
			}
			return slices.Concat(parts...), nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodes := newGateNodes(ids...)
			s, _ := chunkedService(t, nodes, ids, nil)
			sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
			require.NoError(t, err)
			parts := [][]byte{randomBytes(t, 2*testChunk), randomBytes(t, testChunk+3), randomBytes(t, 9)}
			want, numbers := c.run(t, s, sess.ID, parts)
			rec, err := s.CompleteSession(ctx, sess.ID, numbers, "")
			require.NoError(t, err)
			require.Equal(t, sum256(want), rec.Checksum)
			require.Equal(t, want, download(t, s, rec.ID, byterange.Request{}))
		})
	}
}

func TestChunkBuffersAreOneBudgetThatWaitersShare(t *testing.T) {
	c := newChunkBuffers(64, 1, 2)
	ctx := context.Background()
	a, err := c.get(ctx)
	require.NoError(t, err)
	b, err := c.get(ctx)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = c.get(short)
	require.True(t, errs.Is(err, errs.Unavailable), "a spent budget makes a taker wait, until its context ends: %v", err)

	got := make(chan *[]byte)
	go func() { b, _ := c.get(ctx); got <- b }()
	require.Eventually(t, func() bool { return c.waiting.Load() == 1 }, time.Second, time.Millisecond)
	c.put(a)
	third := <-got
	require.Same(t, a, third, "a buffer given back goes to the waiting taker")
	require.Equal(t, int64(2), c.made.Load())

	// Downloads borrow idle buffers and never wait.
	r := c.unbudgeted()
	c.put(b)
	c.put(third) // beyond keep (1): freed
	require.Len(t, c.free, 1)
	x, err := r.get(ctx)
	require.NoError(t, err)
	require.Same(t, b, x, "a download borrows the idle buffer")
	y, err := r.get(ctx)
	require.NoError(t, err, "and makes its own when none is idle")
	w1, err := c.get(ctx)
	require.NoError(t, err)
	w2, err := c.get(ctx)
	require.NoError(t, err, "what downloads hold is outside the budget")
	r.put(x)
	r.put(y)
	require.Empty(t, c.free, "the budget is spent: a download's buffer does not join it")
	c.put(w1)
	c.put(w2)
	require.Len(t, c.free, 1)
}

func TestChunkBuffersBoundEveryPartInFlight(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	ctx := context.Background()
	for _, budget := range []int{1, 2, 5} {
		// CHUNK_UPLOAD_CONCURRENCY 2: alone, four parts would hold 12.
		s, _ := chunkedService(t, nodes, ids, func(o *Options) { o.ChunkBuffers = budget })
		sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
		require.NoError(t, err)
		parts := make([][]byte, 4)
		var wg sync.WaitGroup
		for i := range parts {
			parts[i] = randomBytes(t, 6*testChunk)
			wg.Go(func() {
				_, err := s.PutPart(ctx, sess.ID, i+1, bytes.NewReader(parts[i]), -1)
				require.NoError(t, err)
			})
		}
		wg.Wait()
		rec, err := s.CompleteSession(ctx, sess.ID, nil, "")
		require.NoError(t, err)
		require.Equal(t, meta.FileActive, rec.Status)
		require.Equal(t, sum256(slices.Concat(parts...)), rec.Checksum)
		require.Equal(t, int64(budget), int64(cap(s.chunkBufs.tokens)))
		require.Positive(t, s.chunkBufs.peak.Load())
		require.LessOrEqual(t, int(s.chunkBufs.peak.Load()), budget, "never more than CHUNK_BUFFERS buffers at once")
	}
}

// failAfter yields data, then fails: a body that must not be read to its end.
type failAfter struct {
	r    *bytes.Reader
	read int
}

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	f.read += n
	if err != nil {
		return n, errs.E(errs.Invalid, "the body was read to its end")
	}
	return n, nil
}

func TestChunkedIdempotencyKeyIsCheckedBeforeTheBodyStreams(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	nodes.quiet = true
	s, _ := chunkedService(t, nodes, ids, nil)
	ctx := context.Background()
	data := randomBytes(t, 20*testChunk+3)
	first, err := s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(data), IdempotencyKey: "big-1"})
	require.NoError(t, err)
	require.False(t, first.Replayed)

	// The same key and bytes: the body is read and hashed, nothing is
	// written to a node, and the first upload's result is the answer.
	puts := nodes.puts.Load()
	again, err := s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(data), IdempotencyKey: "big-1"})
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, first.FileID, again.FileID)
	require.Equal(t, puts, nodes.puts.Load(), "a replay stores nothing")

	// A first chunk other than the file's: a conflict found before the rest
	// of the body is read.
	other := slices.Clone(data)
	other[10]++
	body := &failAfter{r: bytes.NewReader(other)}
	_, err = s.Upload(ctx, UploadRequest{FileName: "big", Body: body, IdempotencyKey: "big-1"})
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.Contains(t, err.Error(), "different content")
	require.LessOrEqual(t, body.read, testChunk+1+64<<10, "at most the first chunk (and what a read brings with it) was read")

	// The same first chunk and size, another last byte: still a conflict,
	// and nothing stored.
	tail := slices.Clone(data)
	tail[len(tail)-1]++
	_, err = s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(tail), IdempotencyKey: "big-1"})
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.Contains(t, err.Error(), "different content")
	// And a longer body that starts with the same bytes.
	_, err = s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(append(slices.Clone(data), 'x')), IdempotencyKey: "big-1"})
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.Equal(t, puts, nodes.puts.Load(), "a conflict stores nothing")

	// A chunked upload with a new key in flight: a second one with that key
	// is a conflict at once, and the key is free again after the first.
	nodes.gate = make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(data), IdempotencyKey: "big-2"})
		done <- err
	}()
	require.Eventually(t, func() bool { return nodes.inFlight.Load() > 0 }, 5*time.Second, time.Millisecond)
	body = &failAfter{r: bytes.NewReader(data)}
	_, err = s.Upload(ctx, UploadRequest{FileName: "big", Body: body, IdempotencyKey: "big-2"})
	require.True(t, errs.Is(err, errs.Conflict), "%v", err)
	require.Contains(t, err.Error(), "still in progress")
	close(nodes.gate)
	require.NoError(t, <-done)
	res, err := s.Upload(ctx, UploadRequest{FileName: "big", Body: bytes.NewReader(data), IdempotencyKey: "big-2"})
	require.NoError(t, err)
	require.True(t, res.Replayed)
}

// foldRunning says whether a goroutine is folding the session's parts now.
func foldRunning(s *Service, sessionID string) bool {
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	f := s.folds.m[sessionID]
	return f != nil && f.running
}

func TestShutdownStopsTheSessionFoldsAndWaitsForThem(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := newService(t, nodes, ids, func(o *Options) { o.ChunkSize, o.ChunkConcurrency = testChunk, 2 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { s.Run(ctx); close(stopped) }()

	parts := [][]byte{randomBytes(t, 2*testChunk), randomBytes(t, testChunk+3), randomBytes(t, 9)}
	sess, err := s.CreateSession(ctx, SessionSpec{FileName: "f"})
	require.NoError(t, err)
	_, err = s.PutPart(ctx, sess.ID, 1, bytes.NewReader(parts[0]), -1)
	require.NoError(t, err)
	// Part 2 can only be folded by reading it back: hold that read.
	nodes.getGate, nodes.getHeld = make(chan struct{}), make(chan struct{}, 16)
	_, err = s.PutPart(ctx, sess.ID, 2, bytes.NewReader(parts[1]), -1)
	require.NoError(t, err)
	<-nodes.getHeld

	cancel()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return while a fold was reading a part back")
	}
	require.False(t, foldRunning(s, sess.ID), "Run returned before the fold did")
	require.Equal(t, 1, folded(s, sess.ID), "the fold was stopped before part 2")

	// Closed, the Service starts no fold, and the completion reads back
	// what none folded.
	_, err = s.PutPart(context.Background(), sess.ID, 3, bytes.NewReader(parts[2]), -1)
	require.NoError(t, err)
	require.False(t, foldRunning(s, sess.ID), "a fold started after Run returned")
	close(nodes.getGate)
	whole := slices.Concat(parts...)
	rec, err := s.CompleteSession(context.Background(), sess.ID, nil, sum256(whole))
	require.NoError(t, err)
	require.Equal(t, sum256(whole), rec.Checksum)
}
