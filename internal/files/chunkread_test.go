package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
)

// writeCounter records what was written to it and in how many writes. It
// has no ReadFrom, like the REST handler's writer.
type writeCounter struct {
	buf    bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

func (w *writeCounter) Bytes() []byte { return w.buf.Bytes() }

// sendChunked copies a download of id to a writeCounter the way the REST
// handler does (io.CopyBuffer, which takes the body's WriteTo).
func sendChunked(t *testing.T, s *Service, id string, q byterange.Request) (*writeCounter, int64, error) {
	t.Helper()
	d, err := s.Open(context.Background(), id, q)
	require.NoError(t, err)
	defer d.Body.Close()
	var w writeCounter
	n, err := io.CopyBuffer(&w, d.Body, make([]byte, 64))
	return &w, n, err
}

func TestAChunkedDownloadIsWrittenAChunkAtATimeFromItsVerifiedBuffers(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := chunkedService(t, nodes, ids, nil)
	data := randomBytes(t, 3*testChunk+testChunk/2)
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	rec, err := s.Metadata(context.Background(), res.FileID)
	require.NoError(t, err)
	require.Len(t, rec.Chunks, 4)
	// The copy of chunk 1 read first is corrupt: it costs a retry of that
	// chunk, and none of its bytes is written.
	require.True(t, nodes.stores[s.holders(rec.Chunks[1])[0]].Corrupt(rec.Chunks[1].ID))

	w, n, err := sendChunked(t, s, res.FileID, byterange.Request{})
	require.NoError(t, err)
	require.EqualValues(t, len(data), n)
	require.Equal(t, data, w.Bytes())
	require.Equal(t, 4, w.writes, "one write per chunk, not one per copy buffer")

	// A range is written as the parts of the chunks it covers.
	from, to := int64(testChunk/2), int64(2*testChunk+10)
	w, n, err = sendChunked(t, s, res.FileID, byterange.Request{Range: fmt.Sprintf("bytes=%d-%d", from, to)})
	require.NoError(t, err)
	require.Equal(t, to-from+1, n)
	require.Equal(t, data[from:to+1], w.Bytes())
	require.Equal(t, 3, w.writes)
}

func TestAChunkNoHolderCanServeEndsTheWriteAfterTheChunksBeforeIt(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := chunkedService(t, nodes, ids, nil)
	data := randomBytes(t, 4*testChunk)
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
	require.NoError(t, err)
	rec, err := s.Metadata(context.Background(), res.FileID)
	require.NoError(t, err)
	for _, n := range activeOf(rec.Chunks[2]) {
		require.True(t, nodes.stores[n].Corrupt(rec.Chunks[2].ID))
	}

	w, n, err := sendChunked(t, s, res.FileID, byterange.Request{})
	require.True(t, errs.Is(err, errs.Unavailable), "got %v", err)
	require.EqualValues(t, 2*testChunk, n, "the verified chunks before the bad one, and nothing of it")
	require.Equal(t, data[:2*testChunk], w.Bytes())
}

// TestADownloadFetchesChunkReadAheadChunksBeyondTheOneBeingSent: the first
// chunk and ChunkReadAhead after it are asked of the nodes at once, and no
// more until the first is taken; a stream closed with fetches in flight
// gives every buffer back.
func TestADownloadFetchesChunkReadAheadChunksBeyondTheOneBeingSent(t *testing.T) {
	for _, ahead := range []int{1, 3} {
		t.Run(fmt.Sprint("ahead=", ahead), func(t *testing.T) {
			ids := []string{"A", "B", "C"}
			nodes := newGateNodes(ids...)
			s, _ := chunkedService(t, nodes, ids, func(o *Options) { o.ChunkReadAhead = ahead })
			data := randomBytes(t, 8*testChunk)
			res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(data)})
			require.NoError(t, err)

			nodes.getGate, nodes.getHeld = make(chan struct{}), make(chan struct{}, 16)
			opened := make(chan *Download, 1)
			go func() {
				d, err := s.Open(context.Background(), res.FileID, byterange.Request{})
				assert.NoError(t, err)
				opened <- d
			}()
			for range ahead + 1 {
				<-nodes.getHeld
			}
			select {
			case <-nodes.getHeld:
				t.Fatalf("more than the first chunk and %d after it were fetched at once", ahead)
			case <-time.After(100 * time.Millisecond):
			}
			close(nodes.getGate)
			d := <-opened
			require.NotNil(t, d)
			got, err := io.ReadAll(d.Body)
			require.NoError(t, err)
			require.NoError(t, d.Body.Close())
			require.Equal(t, data, got)
			require.EqualValues(t, 8, nodes.gets.Load(), "each chunk read once")

			// Closed after its first chunk, with the next ones in flight.
			d, err = s.Open(context.Background(), res.FileID, byterange.Request{})
			require.NoError(t, err)
			_, err = io.ReadFull(d.Body, make([]byte, testChunk/2))
			require.NoError(t, err)
			require.NoError(t, d.Body.Close())
			require.Zero(t, s.readBufs.lent.Load(), "every buffer went back")
		})
	}
}
