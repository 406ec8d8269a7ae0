package openapi_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/openapi"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
)

func TestDocumentIsValidOpenAPI(t *testing.T) {
	doc, err := openapitest.Document()
	require.NoError(t, err)
	require.Equal(t, "3.0.3", doc.OpenAPI)

	ops, err := openapitest.Operations()
	require.NoError(t, err)
	require.NotEmpty(t, ops)
	ids := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			require.NotEmpty(t, op.Summary, "%s has no summary", name)
			require.NotEmpty(t, op.Tags, "%s has no tag", name)
			require.NotEmpty(t, op.OperationID, "%s has no operationId", name)
			require.False(t, ids[op.OperationID], "operationId %s is used twice", op.OperationID)
			ids[op.OperationID] = true
			require.Contains(t, ops, name)
		}
	}
	require.Len(t, ids, len(ops))
}

// The document's error codes must be exactly the codes declared in
// internal/errs, so a code added there is documented too. The constants are
// read from the source, as Go cannot enumerate a package's constants at run
// time.
func TestErrorCodeEnumMatchesErrs(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../errs/errs.go", nil, 0)
	require.NoError(t, err)
	var want []string
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is not a string literal", name.Name)
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				want = append(want, v)
			}
		}
	}
	require.NotEmpty(t, want)

	doc, err := openapitest.Document()
	require.NoError(t, err)
	var got []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		got = append(got, v.(string))
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got)
}

func TestHandlerServesDocumentAndUI(t *testing.T) {
	h := openapi.Handler()
	onDisk := func(name string) []byte {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		return b
	}
	tests := []struct {
		path, contentType, cache string
		body                     []byte
	}{
		{"/openapi.json", "application/json", "no-cache", onDisk("openapi.json")},
		{"/swagger-ui/", "text/html; charset=utf-8", "no-cache", onDisk("swagger-ui/index.html")},
		{"/swagger-ui/index.html", "text/html; charset=utf-8", "no-cache", onDisk("swagger-ui/index.html")},
		{"/swagger-ui/init.js", "text/javascript; charset=utf-8", "no-cache", onDisk("swagger-ui/init.js")},
		{"/swagger-ui/swagger-ui.css", "text/css; charset=utf-8", "public, max-age=86400", onDisk("swagger-ui/swagger-ui.css")},
		{"/swagger-ui/swagger-ui-bundle.js", "text/javascript; charset=utf-8", "public, max-age=86400", onDisk("swagger-ui/swagger-ui-bundle.js")},
		{"/swagger-ui/swagger-ui-standalone-preset.js", "text/javascript; charset=utf-8", "public, max-age=86400", onDisk("swagger-ui/swagger-ui-standalone-preset.js")},
		{"/swagger-ui/favicon-32x32.png", "image/png", "public, max-age=86400", onDisk("swagger-ui/favicon-32x32.png")},
		{"/swagger-ui/LICENSE", "text/plain; charset=utf-8", "public, max-age=86400", onDisk("swagger-ui/LICENSE")},
		{"/swagger-ui/NOTICE", "text/plain; charset=utf-8", "public, max-age=86400", onDisk("swagger-ui/NOTICE")},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			require.Equal(t, http.StatusOK, rec.Code)
			require.Equal(t, tc.contentType, rec.Header().Get("Content-Type"))
			require.Equal(t, tc.cache, rec.Header().Get("Cache-Control"))
			require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
			require.Equal(t, tc.body, rec.Body.Bytes())
			if strings.HasPrefix(tc.path, "/swagger-ui/") {
				require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'")
			}

			// The ETag turns a revalidation into a 304 without a body.
			etag := rec.Header().Get("ETag")
			require.NotEmpty(t, etag)
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			req.Header.Set("If-None-Match", etag)
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusNotModified, rec.Code)
			require.Empty(t, rec.Body.Bytes())
		})
	}
}

func TestDocumentIsTheEmbeddedFile(t *testing.T) {
	onDisk, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	require.Equal(t, onDisk, openapi.Document())
	require.True(t, json.Valid(openapi.Document()))
}

// Every file in swagger-ui/ but the README must be served, so a file added
// there without an embed directive and a content type is caught.
func TestEveryUIFileIsServed(t *testing.T) {
	entries, err := os.ReadDir("swagger-ui")
	require.NoError(t, err)
	h := openapi.Handler()
	for _, e := range entries {
		if e.Name() == "README.md" {
			continue
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, openapi.UIPath+e.Name(), nil))
		require.Equal(t, http.StatusOK, rec.Code, "%s is in swagger-ui/ but not served", e.Name())
	}
}

// The page must load everything from the binary: each src and href of
// index.html is relative and served, and none names another host.
func TestIndexLoadsOnlyServedAssets(t *testing.T) {
	index, err := os.ReadFile("swagger-ui/index.html")
	require.NoError(t, err)
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(index), -1)
	require.Len(t, refs, 5, "index.html should load the stylesheet, the icon and three scripts")
	h := openapi.Handler()
	for _, m := range refs {
		ref := m[1]
		require.NotContains(t, ref, "//", "%s is not served by the binary", ref)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, openapi.UIPath+ref, nil))
		require.Equal(t, http.StatusOK, rec.Code, "index.html loads %s, which is not served", ref)
	}
	init, err := os.ReadFile("swagger-ui/init.js")
	require.NoError(t, err)
	require.Contains(t, string(init), `url: "../openapi.json"`)
	require.Contains(t, string(init), "validatorUrl: null", "the default validator badge loads an image from the internet")
}

func TestHandlerRedirectsAndRefuses(t *testing.T) {
	h := openapi.Handler()
	tests := []struct {
		name, target string
		status       int
		location     string
	}{
		{"bare UI path redirects", "/swagger-ui", http.StatusMovedPermanently, "swagger-ui/"},
		{"redirect keeps the query", "/swagger-ui?urls.primaryName=x", http.StatusMovedPermanently, "swagger-ui/?urls.primaryName=x"},
		{"unknown asset", "/swagger-ui/nothing.js", http.StatusNotFound, ""},
		{"README is not served", "/swagger-ui/README.md", http.StatusNotFound, ""},
		{"no directory walk", "/swagger-ui/../openapi.go", http.StatusNotFound, ""},
		{"unknown path", "/elsewhere", http.StatusNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
			require.Equal(t, tc.status, rec.Code)
			require.Equal(t, tc.location, rec.Header().Get("Location"))
			if tc.status == http.StatusNotFound {
				var body struct{ Error string }
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
				require.Equal(t, "NOT_FOUND", body.Error)
			}
		})
	}
}
