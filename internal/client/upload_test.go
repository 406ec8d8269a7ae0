package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
)

// generator yields n bytes without holding them: the stand-in for a file far
// larger than anything the client may buffer. It repeats a random block whose
// length is prime, so that no power-of-two buffer lines up with its period
// and a lost or repeated chunk changes the stream's hash.
type generator struct {
	block []byte
	pos   int
	left  int64
	read  atomic.Int64
}

func newGenerator(seed uint64, n int64) *generator {
	block := make([]byte, 65521)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range block {
		block[i] = byte(rng.Uint32())
	}
	return &generator{block: block, left: n}
}

func (g *generator) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	for i := 0; i < len(p); {
		n := copy(p[i:], g.block[g.pos:])
		g.pos = (g.pos + n) % len(g.block)
		i += n
	}
	g.left -= int64(len(p))
	g.read.Add(int64(len(p)))
	return len(p), nil
}

func sha256Of(t *testing.T, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	_, err := io.Copy(h, r)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// received is what the fake coordinator saw of one upload.
type received struct {
	contentLength    int64
	transferEncoding []string
	fileName         string
	partType         string
	size             int64
	checksum         string
	idempotencyKey   string
}

// uploadServer accepts uploads the way the coordinator does, streaming the
// file part into a hash, and records what it saw.
func uploadServer(t *testing.T, got chan<- received) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
			return
		}
		part, err := mr.NextPart()
		if err != nil {
			httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
			return
		}
		h := sha256.New()
		n, err := io.Copy(h, part)
		if err != nil {
			httpx.WriteErrorCode(w, r, http.StatusBadRequest, errs.CodeInvalidRequest, err.Error())
			return
		}
		_, err = mr.NextPart()
		require.ErrorIs(t, err, io.EOF, "one part only")
		rec := received{
			contentLength: r.ContentLength, transferEncoding: r.TransferEncoding,
			fileName: part.FileName(), partType: part.Header.Get("Content-Type"),
			size: n, checksum: hex.EncodeToString(h.Sum(nil)), idempotencyKey: r.Header.Get("Idempotency-Key"),
		}
		got <- rec
		w.Header().Set("Idempotent-Replayed", "true")
		httpx.WriteJSON(w, http.StatusCreated, UploadResult{
			FileID: "0f8fad5b-d9cb-469f-a165-70867728950e", FileName: rec.fileName, ContentType: rec.partType,
			SizeBytes: n, Checksum: rec.checksum, Status: FileActive, PrimaryNode: "node-1",
			Replicas: []string{"node-2", "node-3"}, ReplicationFactor: 3,
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, url string) *Client {
	t.Helper()
	c, err := New(url, Options{})
	require.NoError(t, err)
	return c
}

// TestUploadStreamsWithoutBuffering sends 64 MiB from a generator and checks
// that the process allocated only a small fraction of that meanwhile: a
// client that collected the body (or a multipart.Writer into a buffer) would
// allocate at least the file's size.
func TestUploadStreamsWithoutBuffering(t *testing.T) {
	const size = 64 << 20
	got := make(chan received, 1)
	c := newClient(t, uploadServer(t, got).URL)
	sent := sha256.New()
	src := io.TeeReader(newGenerator(42, size), sent)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := c.Upload(t.Context(), "big.bin", src, size, UploadOptions{})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	want := hex.EncodeToString(sent.Sum(nil))

	allocated := after.TotalAlloc - before.TotalAlloc
	require.Less(t, allocated, uint64(8<<20), "upload of %d bytes allocated %d bytes (client and server together)", size, allocated)
	rec := <-got
	require.Equal(t, int64(size), rec.size)
	require.Equal(t, want, rec.checksum)
	require.Equal(t, want, res.Checksum)
	require.Empty(t, rec.transferEncoding, "a known size is sent with a Content-Length")
	require.Greater(t, rec.contentLength, int64(size))
	require.Less(t, rec.contentLength, int64(size+1024), "multipart framing is a few hundred bytes")
	require.Equal(t, "big.bin", rec.fileName)
	require.Equal(t, "application/octet-stream", rec.partType)
}

func TestUploadSendsTheDeclaredPart(t *testing.T) {
	tests := []struct {
		name     string
		fileName string
		body     string
		size     int64
		opts     UploadOptions
		wantType string
		chunked  bool
	}{
		{"known size", "notes.txt", "hello, dfs\n", 11, UploadOptions{}, mime.TypeByExtension(".txt"), false},
		{"unknown size is chunked", "data.bin", "streamed from a pipe", -1, UploadOptions{}, "application/octet-stream", true},
		{"empty file", "empty", "", 0, UploadOptions{}, "application/octet-stream", false},
		{"explicit type and key", "report", "{}", 2, UploadOptions{ContentType: "application/json", IdempotencyKey: "invoice-42"}, "application/json", false},
		{"quotes in the name", `say "hi".txt`, "x", 1, UploadOptions{}, mime.TypeByExtension(".txt"), false},
		{"non-ASCII name", "résumé ✓.pdf", "%PDF", 4, UploadOptions{}, "application/pdf", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan received, 1)
			c := newClient(t, uploadServer(t, got).URL)
			res, err := c.Upload(t.Context(), tt.fileName, strings.NewReader(tt.body), tt.size, tt.opts)
			require.NoError(t, err)
			rec := <-got
			require.Equal(t, tt.fileName, rec.fileName)
			require.Equal(t, tt.wantType, rec.partType)
			require.Equal(t, int64(len(tt.body)), rec.size)
			require.Equal(t, sha256Of(t, strings.NewReader(tt.body)), rec.checksum)
			require.Equal(t, tt.opts.IdempotencyKey, rec.idempotencyKey)
			if tt.chunked {
				require.Equal(t, []string{"chunked"}, rec.transferEncoding)
			} else {
				require.Empty(t, rec.transferEncoding)
			}
			require.Equal(t, FileActive, res.Status)
			require.Equal(t, []string{"node-2", "node-3"}, res.Replicas)
			require.True(t, res.Replayed, "Idempotent-Replayed: true is reported")
		})
	}
}

func TestUploadReportsTheReadersFailure(t *testing.T) {
	tests := []struct {
		name string
		r    io.Reader
		size int64
		kind errs.Kind
		want string
	}{
		{"shorter than declared", strings.NewReader("abc"), 10, errs.Invalid, "7 bytes short"},
		{"read error", iotest.ErrReader(iotest.ErrTimeout), 10, errs.Other, iotest.ErrTimeout.Error()},
		{"read error, unknown size", io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(iotest.ErrTimeout)), -1, errs.Other, iotest.ErrTimeout.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan received, 1)
			c := newClient(t, uploadServer(t, got).URL)
			_, err := c.Upload(t.Context(), "f", tt.r, tt.size, UploadOptions{})
			require.Error(t, err)
			require.Equal(t, tt.kind, errs.KindOf(err), "%v", err)
			require.ErrorContains(t, err, tt.want)
			var ce *ConnError
			require.False(t, errors.As(err, &ce), "a failing reader is not an unreachable coordinator: %v", err)
		})
	}
}

// TestUploadRefusedEarly checks that a coordinator which refuses the
// declared length before reading the body is reported with its own answer,
// and that the client stops reading the source long before its end.
func TestUploadRefusedEarly(t *testing.T) {
	const limit, size = 1 << 20, 256 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			httpx.WriteErrorCode(w, r, http.StatusRequestEntityTooLarge, errs.CodeFileTooLarge, "request exceeds the maximum file size")
			return
		}
		t.Errorf("a request of %d bytes was not refused", r.ContentLength)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	gen := newGenerator(7, size)
	_, err := c.Upload(t.Context(), "huge.iso", gen, size, UploadOptions{})

	var apiErr *APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusRequestEntityTooLarge, apiErr.Status)
	require.Equal(t, errs.CodeFileTooLarge, apiErr.Code)
	require.Equal(t, errs.TooLarge, errs.KindOf(err))
	require.Less(t, gen.read.Load(), int64(size/4), "the client kept reading the source after the refusal")
}
