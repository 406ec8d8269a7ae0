package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkDownload4KiB measures the client's side of a small download from
// a trivial server on loopback: request, hashing, copy. -benchmem shows what
// each download allocates.
func BenchmarkDownload4KiB(b *testing.B) {
	data := bytes.Repeat([]byte("d"), 4<<10)
	sum := sha256.Sum256(data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Checksum-Sha256", hex.EncodeToString(sum[:]))
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	}))
	b.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		info, err := c.Download(b.Context(), "00000000-0000-4000-8000-000000000000", io.Discard, DownloadOptions{})
		if err != nil || !info.Verified {
			b.Fatal(err, info)
		}
	}
}
