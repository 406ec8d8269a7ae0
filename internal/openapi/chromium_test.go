//go:build linux

package openapi_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/openapi"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
	"github.com/dfs-project/dfs/internal/testenv/browsertest"
)

// requestLog records the paths the browser asked the server for.
type requestLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.paths = append(l.paths, r.URL.Path)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.paths)
}

func TestSwaggerUIRendersInHeadlessChromium(t *testing.T) {
	bin := browsertest.Chromium(t)
	var log requestLog
	srv := httptest.NewServer(log.wrap(openapi.Handler()))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), "the test server must be on loopback: %s", srv.URL)

	doc, err := openapitest.Document()
	require.NoError(t, err)
	// A deep link opens the upload, so its answers and their examples are
	// rendered too; the other operations stay listed.
	upload := doc.Paths.Find("/api/files").Post
	dom, requested := browsertest.Load(t, bin, srv.URL, openapi.UIPath+"#/"+upload.Tags[0]+"/"+upload.OperationID, 10*time.Second)
	// Swagger UI breaks paths with zero-width spaces so they can wrap.
	text := strings.ReplaceAll(html.UnescapeString(dom), "\u200b", "")

	has := func(want, what string) {
		t.Helper()
		if !strings.Contains(text, want) {
			// The end of the DOM holds Swagger UI's own error, if it had one.
			t.Fatalf("%s: the rendered page lacks %q; the end of its DOM:\n%s", what, want, text[max(0, len(text)-3000):])
		}
	}
	has(doc.Info.Title, "the document's title is not rendered")
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			has(`data-path="`+path+`"`, method+" "+path+" is not listed")
			has(`class="opblock-summary-description">`+op.Summary+"<", "the summary of "+method+" "+path+" is not listed")
		}
	}
	has("/api/files/{fileId}/verify", "the verify operation is not listed")
	has("Re-hash every copy of a file", "the verify operation's summary is not listed")

	// Each answer shows its own example, not one made up from the schema
	// (which once put {"status": 599, "error": "FILE_NOT_FOUND"} under every
	// error): the upload's first 201 example, and error examples with their
	// own status and code.
	active := upload.Responses.Status(http.StatusCreated).Value.Content.Get("application/json").Examples["active"].Value.Value.(map[string]any)
	for _, tc := range []struct {
		status int
		want   []string
	}{
		{http.StatusCreated, []string{`"fileId": "` + active["fileId"].(string) + `"`, `"status": "ACTIVE"`}},
		{http.StatusBadRequest, []string{`"status": 400`, `"error": "INVALID_REQUEST"`}},
		{http.StatusRequestEntityTooLarge, []string{`"status": 413`, `"error": "FILE_TOO_LARGE"`}},
		{http.StatusServiceUnavailable, []string{`"status": 503`, `"error": "NO_HEALTHY_NODES"`}},
	} {
		row := responseRow(t, dom, tc.status)
		for _, want := range tc.want {
			require.Contains(t, row, want, "the upload's %d answer does not show its example", tc.status)
		}
	}

	// Everything the page asked for came from the binary: no request it
	// started left the test server, and the server saw the assets.
	require.GreaterOrEqual(t, len(requested), 5, "the network log shows too few of the page's requests: %v", requested)
	for _, u := range requested {
		require.True(t, strings.HasPrefix(u, srv.URL+"/"), "the page requested %s, outside the coordinator", u)
	}
	seen := log.seen()
	for _, want := range []string{"/swagger-ui/", "/swagger-ui/swagger-ui-bundle.js", "/swagger-ui/swagger-ui-standalone-preset.js",
		"/swagger-ui/init.js", "/swagger-ui/swagger-ui.css", "/openapi.json"} {
		require.Contains(t, seen, want, "the browser never asked for %s; it asked for %v", want, seen)
	}
}

// responseRow returns the text of the row of Swagger UI's response table for
// status, tags stripped and white space collapsed, as a reader sees it.
func responseRow(t *testing.T, dom string, status int) string {
	t.Helper()
	start := strings.Index(dom, `data-code="`+strconv.Itoa(status)+`"`)
	require.GreaterOrEqual(t, start, 0, "no response row for %d is rendered", status)
	row := dom[start:]
	if end := strings.Index(row[1:], `<tr class="response`); end >= 0 {
		row = row[:end+1]
	}
	row = html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(row, ""))
	return strings.Join(strings.Fields(strings.ReplaceAll(row, "\u200b", "")), " ")
}
