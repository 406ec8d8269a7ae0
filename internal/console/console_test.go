package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/console"
)

func TestTheConsoleIsServedFromTheBinary(t *testing.T) {
	h := console.Handler()
	tests := []struct {
		target, contentType string
		status              int
		contains            string
	}{
		{"/console/", "text/html; charset=utf-8", http.StatusOK, "<title>dfs console</title>"},
		{"/console/index.html", "text/html; charset=utf-8", http.StatusOK, `<script src="console.js" defer>`},
		{"/console/console.js", "text/javascript; charset=utf-8", http.StatusOK, "'use strict'"},
		{"/console/console.css", "text/css; charset=utf-8", http.StatusOK, ".panel"},
		{"/console/missing.js", "application/json", http.StatusNotFound, `"NOT_FOUND"`},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
			require.Equal(t, tc.status, rec.Code)
			require.Equal(t, tc.contentType, rec.Header().Get("Content-Type"))
			require.Contains(t, rec.Body.String(), tc.contains)
			if tc.status == http.StatusOK {
				require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")
				require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
			}
		})
	}
}

func TestTheConsoleRevalidatesWithItsETag(t *testing.T) {
	h := console.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/console.js", nil))
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)
	require.Equal(t, "no-cache", rec.Header().Get("Cache-Control"))

	req := httptest.NewRequest(http.MethodGet, "/console/console.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotModified, rec.Code)
}

func TestTheBarePathRedirectsRelatively(t *testing.T) {
	rec := httptest.NewRecorder()
	console.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console", nil))
	require.Equal(t, http.StatusMovedPermanently, rec.Code)
	require.Equal(t, "console/", rec.Header().Get("Location"))
}

// The pages load nothing from elsewhere: no absolute URL in any asset.
func TestTheAssetsNameNoOtherOrigin(t *testing.T) {
	for _, name := range []string{"", "console.js", "console.css"} {
		rec := httptest.NewRecorder()
		console.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/console/"+name, nil))
		body := rec.Body.String()
		for _, bad := range []string{"https://", "http://", "//cdn"} {
			// The SVG namespace is a name, not a request.
			body = strings.ReplaceAll(body, "http://www.w3.org/2000/svg", "")
			require.NotContains(t, body, bad, "%s names another origin", name)
		}
	}
}
