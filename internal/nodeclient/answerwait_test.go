package nodeclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

func TestAnswerWaitGrowsWithSizeUpToTheVerifyTimeout(t *testing.T) {
	c := New(Options{Timeout: 5 * time.Second, VerifyTimeout: 2 * time.Minute})
	require.Equal(t, 10*time.Second, c.answerWait(4096))
	require.Equal(t, 42*time.Second, c.answerWait(1<<30))
	require.Equal(t, 2*time.Minute, c.answerWait(10<<30))
	require.Equal(t, 2*time.Minute, c.answerWait(-1), "unknown size: the whole verify timeout")
}

// A node that takes a small blob and never answers (a paused process) is
// given up on after the answer wait, not after the verify timeout.
func TestPutGivesUpOnANodeThatNeverAnswers(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-hang
	}))
	defer srv.Close()
	defer close(hang)
	c := New(Options{Timeout: 50 * time.Millisecond, VerifyTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := c.Put(ctx, srv.URL, "abcd", strings.Repeat("0", 64), 4, strings.NewReader("data"))
	require.True(t, errs.Is(err, errs.Unavailable), "%v", err)
	require.NoError(t, ctx.Err(), "gave up on its own, well before the caller's deadline")
}

// A small body is read into the call's own buffer before it is sent, so a
// body shorter or longer than its declared size is refused before any
// request leaves; a body of the right size arrives whole.
func TestPutSmallBodyMustMatchItsSize(t *testing.T) {
	var requests atomic.Int32
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"abcd","size":4}`)
	}))
	defer srv.Close()
	c := New(Options{BatchMax: 1}) // the server answers PUTs only
	ctx := context.Background()
	sum := strings.Repeat("0", 64)

	for _, body := range []string{"dat", "data!"} {
		_, _, err := c.Put(ctx, srv.URL, "abcd", sum, 4, strings.NewReader(body))
		require.True(t, errs.Is(err, errs.Unavailable), "%q: %v", body, err)
	}
	require.Zero(t, requests.Load(), "a body of the wrong size is not sent")

	_, created, err := c.Put(ctx, srv.URL, "abcd", sum, 4, bytes.NewReader([]byte("data")))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "data", string(got))
	require.EqualValues(t, 1, requests.Load())
}
