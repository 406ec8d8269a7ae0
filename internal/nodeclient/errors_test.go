package nodeclient_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/nodeclient"
)

func TestStatusesBecomeKinds(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   errs.Kind
	}{
		{http.StatusBadRequest, errs.Invalid},
		{http.StatusUnauthorized, errs.Unauthorized},
		{http.StatusForbidden, errs.Unauthorized},
		{http.StatusNotFound, errs.NotFound},
		{http.StatusConflict, errs.Conflict},
		{http.StatusRequestEntityTooLarge, errs.TooLarge},
		{http.StatusMethodNotAllowed, errs.Other},
		{http.StatusRequestedRangeNotSatisfiable, errs.Unsatisfiable},
		{http.StatusUnprocessableEntity, errs.Corrupt},
		{http.StatusInsufficientStorage, errs.NoSpace},
		{http.StatusInternalServerError, errs.Unavailable},
		{http.StatusBadGateway, errs.Unavailable},
		{http.StatusServiceUnavailable, errs.Unavailable},
		{http.StatusGatewayTimeout, errs.Unavailable},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				httpx.WriteErrorCode(w, r, tc.status, "SOME_CODE", "what went wrong")
			}))
			defer srv.Close()
			c := nodeclient.New(nodeclient.Options{})
			ctx := context.Background()

			_, _, err := c.Put(ctx, srv.URL, "abcd", strings.Repeat("0", 64), 1, strings.NewReader("x"))
			requireKind(t, tc.want, err)
			var se *nodeclient.StatusError
			require.ErrorAs(t, err, &se)
			require.Equal(t, nodeclient.StatusError{Status: tc.status, Code: "SOME_CODE", Message: "what went wrong"}, *se)
			require.Contains(t, err.Error(), srv.URL)

			_, err = c.Get(ctx, srv.URL, "abcd", nil)
			requireKind(t, tc.want, err)
			_, err = c.Stats(ctx, srv.URL)
			requireKind(t, tc.want, err)
			requireKind(t, tc.want, c.Delete(ctx, srv.URL, "abcd"))
		})
	}
}

func TestAnswerThatIsNotTheErrorShape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream proxy says no", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, err := nodeclient.New(nodeclient.Options{}).Stats(context.Background(), srv.URL)
	requireKind(t, errs.Unavailable, err)
	var se *nodeclient.StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "upstream proxy says no", se.Message)
}

// hang answers nothing until the test ends.
func hang(t *testing.T) *httptest.Server {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	return srv
}

func TestTimeouts(t *testing.T) {
	srv := hang(t)
	c := nodeclient.New(nodeclient.Options{Timeout: 20 * time.Millisecond, VerifyTimeout: 20 * time.Millisecond})
	ctx := context.Background()

	_, err := c.Stats(ctx, srv.URL)
	requireKind(t, errs.Unavailable, err)
	require.Contains(t, err.Error(), "timed out")
	_, err = c.Get(ctx, srv.URL, "abcd", nil)
	requireKind(t, errs.Unavailable, err)
	require.Contains(t, err.Error(), "did not answer in time")
	_, _, err = c.Put(ctx, srv.URL, "abcd", strings.Repeat("0", 64), 5, strings.NewReader("hello"))
	requireKind(t, errs.Unavailable, err)
	require.Contains(t, err.Error(), "did not answer in time")
	_, err = c.Rehash(ctx, srv.URL, "abcd")
	requireKind(t, errs.Unavailable, err)
}

// slowReader yields its data in small pieces with a pause before each.
type slowReader struct {
	data  []byte
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := copy(p, s.data[:min(len(s.data), 8)])
	s.data = s.data[n:]
	return n, nil
}

// flushWriter sends every write at once.
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.w.(http.Flusher).Flush()
	return n, err
}

// TestStreamsOutliveTheTimeout moves bodies that take several times the
// client's timeouts: streaming calls are bounded by their waits for an
// answer, never by the length of the transfer.
func TestStreamsOutliveTheTimeout(t *testing.T) {
	// Six pieces, each after a pause of half the timeout: three timeouts in all.
	const pause = 100 * time.Millisecond
	data := []byte("a body that trickles in over several timeouts")
	sum := sha256.Sum256(data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("X-Blob-Size", "46")
			w.Header().Set("X-Checksum-Sha256", hex.EncodeToString(sum[:]))
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			_, _ = io.Copy(flushWriter{w}, &slowReader{data: data, pause: pause})
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"abcd","size":` + strconv.Itoa(len(b)) + `,"checksum":"x"}`))
		}
	}))
	defer srv.Close()
	// The server answers PUTs only.
	c := nodeclient.New(nodeclient.Options{Timeout: 2 * pause, VerifyTimeout: 2 * pause, BatchMax: 1})
	ctx := context.Background()

	obj, err := c.Get(ctx, srv.URL, "abcd", nil)
	require.NoError(t, err)
	got, err := io.ReadAll(obj.Body)
	require.NoError(t, err, "a slow body is not cut off")
	require.NoError(t, obj.Body.Close())
	require.Equal(t, data, got)

	info, created, err := c.Put(ctx, srv.URL, "abcd", hex.EncodeToString(sum[:]), int64(len(data)), &slowReader{data: data, pause: pause})
	require.NoError(t, err, "a slow upload is not cut off")
	require.True(t, created)
	require.Equal(t, int64(len(data)), info.Size)
}

// watchedReader yields size bytes, each Read after the first one slowly,
// and records a Read still running after the test declared the call over.
type watchedReader struct {
	left     int
	reads    int
	over     *atomic.Bool
	lateRead *atomic.Bool
}

func (w *watchedReader) Read(p []byte) (int, error) {
	defer func() {
		if w.over.Load() {
			w.lateRead.Store(true)
		}
	}()
	if w.left == 0 {
		return 0, io.EOF
	}
	if w.reads++; w.reads > 1 {
		time.Sleep(100 * time.Millisecond)
	}
	n := min(len(p), w.left, 8<<10)
	w.left -= n
	return n, nil
}

// TestPutLetsGoOfTheBody has a node refuse a write while the transport is in
// the middle of reading the body: the refusal reaches the caller, and Put
// returns only once the transport is done with the caller's reader.
func TestPutLetsGoOfTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteErrorCode(w, r, http.StatusConflict, errs.CodeConflict, "held with another checksum")
	}))
	defer srv.Close()
	c := nodeclient.New(nodeclient.Options{})
	var over, late atomic.Bool
	const size = 900 << 10 // below the Expect: 100-continue threshold: the body is sent at once
	_, _, err := c.Put(context.Background(), srv.URL, "abcd", strings.Repeat("0", 64), size,
		&watchedReader{left: size, over: &over, lateRead: &late})
	over.Store(true)
	requireKind(t, errs.Conflict, err)
	time.Sleep(200 * time.Millisecond) // time for a Read in progress to finish
	require.False(t, late.Load(), "the body was still being read after Put returned")
}
