// Package openapi serves the coordinator's OpenAPI 3 document and Swagger UI.
//
// Both are embedded in the binary: the document at /openapi.json and the UI
// under /swagger-ui/, whose every asset (vendored from swagger-ui-dist, see
// swagger-ui/README.md) comes from the coordinator itself, so the API can be
// explored on a machine with no network access beyond the coordinator.
//
// The document is written by hand and kept true by tests: internal/api
// proves every route has an operation and every operation a route, and
// package openapitest lets integration tests validate real answers against
// it.
package openapi

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/httpx"
)

// Where Handler answers. It expects the full request path, so mount it at
// these paths rather than under a stripped prefix.
const (
	DocumentPath = "/openapi.json"
	UIPath       = "/swagger-ui/"
)

// uiBarePath is UIPath without its slash, which redirects to UIPath.
const uiBarePath = "/swagger-ui"

//go:embed openapi.json
var document []byte

// Only the files the page loads are embedded; swagger-ui/README.md is not.
//
//go:embed swagger-ui/index.html swagger-ui/init.js swagger-ui/swagger-ui.css
//go:embed swagger-ui/swagger-ui-bundle.js swagger-ui/swagger-ui-standalone-preset.js
//go:embed swagger-ui/favicon-32x32.png swagger-ui/LICENSE swagger-ui/NOTICE
var uiFiles embed.FS

// Cache policies. Our own files change with the binary and are revalidated on
// every use (the ETag makes that a 304); the vendored ones change only on an
// upgrade, and their names carry no version, so they are cached for a day
// rather than forever.
const (
	revalidate = "no-cache"
	vendored   = "public, max-age=86400"
)

// contentSecurityPolicy lets the UI load nothing but what this binary serves:
// scripts only from files (no inline script), styles from files and the
// inline styles Swagger UI sets, images from files, data: URLs and blob: URLs
// (the preview of a downloaded image in "Try it out"), and fetches (the
// document, "Try it out") to this origin only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

const (
	jsType   = "text/javascript; charset=utf-8"
	textType = "text/plain; charset=utf-8"
)

// uiAssets names every file under /swagger-ui/ with its type and cache policy;
// Content-Type is set from here, never sniffed or taken from the host's MIME
// tables.
var uiAssets = []struct{ name, contentType, cache string }{
	{"index.html", "text/html; charset=utf-8", revalidate},
	{"init.js", jsType, revalidate},
	{"swagger-ui.css", "text/css; charset=utf-8", vendored},
	{"swagger-ui-bundle.js", jsType, vendored},
	{"swagger-ui-standalone-preset.js", jsType, vendored},
	{"favicon-32x32.png", "image/png", vendored},
	{"LICENSE", textType, vendored},
	{"NOTICE", textType, vendored},
}

// Document returns a copy of the embedded OpenAPI document (JSON).
func Document() []byte { return bytes.Clone(document) }

type asset struct {
	body        []byte
	contentType string
	cache       string
	etag        string
}

func newAsset(body []byte, contentType, cache string) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, contentType: contentType, cache: cache, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

// assets maps a request path to what it serves; it is built once, on first
// use, and only read afterwards.
var assets = sync.OnceValue(func() map[string]asset {
	m := map[string]asset{DocumentPath: newAsset(document, "application/json", revalidate)}
	for _, a := range uiAssets {
		body, err := uiFiles.ReadFile("swagger-ui/" + a.name)
		if err != nil {
			// The embed directives and uiAssets disagree: a build mistake
			// that the package's tests catch.
			panic("openapi: asset " + a.name + " is not embedded: " + err.Error())
		}
		m[UIPath+a.name] = newAsset(body, a.contentType, a.cache)
	}
	m[UIPath] = m[UIPath+"index.html"]
	return m
})

// Handler serves GET (and HEAD) of DocumentPath, UIPath and the UI's assets,
// and redirects the UI's path without its trailing slash to UIPath. Any other
// path answers the common 404 error.
// The assets are built on the first request, not here: a coordinator whose
// Swagger UI nobody opens does not hold a copy of it (2.4 MiB) in its heap.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == uiBarePath {
			redirectToUI(w, r)
			return
		}
		a, ok := assets()[r.URL.Path]
		if !ok {
			httpx.NotFoundHandler(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", a.cache)
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		if strings.HasPrefix(r.URL.Path, UIPath) {
			h.Set("Content-Security-Policy", contentSecurityPolicy)
		}
		// ServeContent answers If-None-Match with 304 and honours Range.
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	})
}

// redirectToUI sends /swagger-ui to /swagger-ui/ with a relative Location, so
// the redirect also works behind a proxy that adds a path prefix.
func redirectToUI(w http.ResponseWriter, r *http.Request) {
	target := "swagger-ui/"
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	w.Header().Set("Location", target)
	w.WriteHeader(http.StatusMovedPermanently)
}
