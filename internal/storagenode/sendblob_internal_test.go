package storagenode

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// writeCounter records what was written to it and in how many writes.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Header() http.Header { return http.Header{} }
func (w *writeCounter) WriteHeader(int)     {}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestSendBlob(t *testing.T) {
	small := bytes.Repeat([]byte("s"), 4<<10)
	large := bytes.Repeat([]byte("L"), smallSendMax+1)
	broken := errors.New("disk read failed")
	get := httptest.NewRequest(http.MethodGet, "/blobs/x", nil)

	t.Run("a small blob is one read and one write", func(t *testing.T) {
		var w writeCounter
		n, err := sendBlob(&w, get, iotest.OneByteReader(bytes.NewReader(small)), int64(len(small)))
		require.NoError(t, err)
		require.EqualValues(t, len(small), n)
		require.Equal(t, small, w.Bytes())
		require.Equal(t, 1, w.writes)
	})
	t.Run("a small blob that fails is cut short where it failed", func(t *testing.T) {
		var w writeCounter
		r := io.MultiReader(bytes.NewReader(small[:100]), iotest.ErrReader(broken))
		n, err := sendBlob(&w, get, r, int64(len(small)))
		require.ErrorIs(t, err, broken)
		require.EqualValues(t, 100, n)
		require.Equal(t, small[:100], w.Bytes())
	})
	t.Run("a small blob shorter than its length is an error", func(t *testing.T) {
		var w writeCounter
		n, err := sendBlob(&w, get, bytes.NewReader(small[:10]), int64(len(small)))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		require.EqualValues(t, 10, n)
	})
	t.Run("a larger blob is streamed and stops at its length", func(t *testing.T) {
		var w writeCounter
		n, err := sendBlob(&w, get, io.MultiReader(bytes.NewReader(large), bytes.NewReader(small)), int64(len(large)))
		require.NoError(t, err)
		require.EqualValues(t, len(large), n)
		require.Equal(t, large, w.Bytes())
	})
}
