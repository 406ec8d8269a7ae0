package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
)

const fileID = "0f8fad5b-d9cb-469f-a165-70867728950e"

var content = []byte("the quick brown fox jumps over the lazy dog\n")

func checksumOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// serveFile answers a download the way the coordinator does, with the given
// declared checksum and body; a short body declares the full length, which
// the server then fails to deliver.
func serveFile(declared string, body []byte, short bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/plain")
		h.Set("Content-Disposition", `attachment; filename="fox.txt"`)
		h.Set("ETag", `"`+declared+`"`)
		h.Set("X-Checksum-Sha256", declared)
		h.Set("X-Served-By-Node", "node-2")
		h.Set("Last-Modified", "Sun, 29 Nov 2026 10:15:31 GMT")
		if rng := r.Header.Get("Range"); rng != "" {
			h.Set("Content-Range", fmt.Sprintf("bytes 4-8/%d", len(body)))
			h.Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(body[4:9])
			return
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if short {
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			// Break the connection, as the coordinator does when it finds
			// a bad copy mid-stream.
			panic(http.ErrAbortHandler)
		}
		w.Write(body)
	}
}

func TestDownload(t *testing.T) {
	good := checksumOf(content)
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		opts       DownloadOptions
		kind       errs.Kind // errs.Other with wantErr false means success
		wantErr    bool
		wantBytes  []byte
		wantVerify bool
	}{
		{name: "full download is verified", handler: serveFile(good, content, false), wantBytes: content, wantVerify: true},
		{name: "checksum mismatch", handler: serveFile(checksumOf([]byte("other")), content, false), wantErr: true, kind: errs.Corrupt, wantBytes: content},
		{name: "short body", handler: serveFile(good, content, true), wantErr: true, kind: errs.Unavailable, wantBytes: content[:len(content)/2]},
		{name: "range is not verified", handler: serveFile(good, content, false), opts: DownloadOptions{Range: "bytes=4-8"}, wantBytes: content[4:9]},
		{name: "not found", handler: func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteErrorCode(w, r, http.StatusNotFound, errs.CodeFileNotFound, "file not found")
		}, wantErr: true, kind: errs.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			var buf bytes.Buffer
			info, err := newClient(t, srv.URL).Download(t.Context(), fileID, &buf, tt.opts)
			require.Equal(t, string(tt.wantBytes), buf.String())
			if tt.wantErr {
				require.Error(t, err)
				require.Equal(t, tt.kind, errs.KindOf(err), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantVerify, info.Verified)
			require.Equal(t, "node-2", info.ServedBy)
			require.Equal(t, int64(len(content)), info.Size, "the whole file's size, also for a range")
			require.Equal(t, int64(len(tt.wantBytes)), info.Bytes)
			require.Equal(t, good, info.Checksum)
			require.Equal(t, "fox.txt", info.FileName)
			require.Equal(t, 2026, info.LastModified.Year())
		})
	}
}

func TestDownloadReportsTheWritersFailure(t *testing.T) {
	srv := httptest.NewServer(serveFile(checksumOf(content), content, false))
	defer srv.Close()
	_, err := newClient(t, srv.URL).Download(t.Context(), fileID, failingWriter{}, DownloadOptions{})
	require.ErrorIs(t, err, errDiskFull)
	var ce *ConnError
	require.False(t, errors.As(err, &ce))
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }
