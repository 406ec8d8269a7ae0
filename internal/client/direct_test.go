package client

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/apiwire"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
)

// TestDownloadDirect: blobs come from the nodes' URLs, each checked; a blob
// whose URLs all fail comes through the coordinator; a coordinator without
// the locations route is read through whole; a missing file stays missing.
func TestDownloadDirect(t *testing.T) {
	a, b := content[:20], content[20:]
	var node *httptest.Server
	node = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Empty(t, r.Header.Get("Authorization"), "the client's key never reaches a node")
		switch r.URL.Path {
		case "/a":
			_, _ = w.Write(a)
		case "/b-damaged":
			_, _ = w.Write(bytes.ToUpper(b))
		default:
			http.Error(w, "gone", http.StatusNotFound)
		}
	}))
	defer node.Close()
	var proxied []string
	coordinator := func(locations bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/locations") && locations:
				httpx.WriteJSON(w, http.StatusOK, apiwire.FileLocations{FileID: fileID, SizeBytes: int64(len(content)), Checksum: checksumOf(content),
					Blobs: []apiwire.BlobLocation{
						{Offset: 0, SizeBytes: int64(len(a)), Checksum: checksumOf(a), URLs: []string{node.URL + "/missing", node.URL + "/a"}},
						{Offset: int64(len(a)), SizeBytes: int64(len(b)), Checksum: checksumOf(b), URLs: []string{node.URL + "/b-damaged"}},
					}})
			case strings.HasSuffix(r.URL.Path, "/locations"):
				httpx.WriteErrorCode(w, r, http.StatusNotFound, errs.CodeNotFound, "no route")
			default:
				proxied = append(proxied, r.Header.Get("Range"))
				var from, to int
				if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &from, &to); err == nil {
					w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, len(content)))
					w.WriteHeader(http.StatusPartialContent)
					_, _ = w.Write(content[from : to+1])
					return
				}
				serveFile(checksumOf(content), content, false)(w, r)
			}
		}))
	}

	srv := coordinator(true)
	defer srv.Close()
	var out bytes.Buffer
	info, err := newClient(t, srv.URL).DownloadDirect(t.Context(), fileID, &out)
	require.NoError(t, err)
	require.Equal(t, content, out.Bytes())
	require.True(t, info.Verified)
	require.False(t, info.Direct, "the second blob came through the coordinator")
	require.Equal(t, []string{fmt.Sprintf("bytes=%d-%d", len(a), len(content)-1)}, proxied, "only the blob no node could give")
	require.Equal(t, strings.TrimPrefix(node.URL, "http://"), info.ServedBy)

	proxied = nil
	old := coordinator(false)
	defer old.Close()
	out.Reset()
	info, err = newClient(t, old.URL).DownloadDirect(t.Context(), fileID, &out)
	require.NoError(t, err)
	require.Equal(t, content, out.Bytes())
	require.True(t, info.Verified)
	require.Equal(t, []string{""}, proxied, "the whole file through the coordinator")

	missing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteErrorCode(w, r, http.StatusNotFound, errs.CodeFileNotFound, "file not found")
	}))
	defer missing.Close()
	_, err = newClient(t, missing.URL).DownloadDirect(t.Context(), fileID, &out)
	require.Equal(t, errs.NotFound, errs.KindOf(err), "%v", err)
}
