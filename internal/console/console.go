// Package console serves the operator's console: a few static pages of plain
// HTML, CSS and JavaScript embedded in the binary, which draw the cluster
// from the REST API in the browser. The console is a client of the API like
// any other — it calls the same routes with the browser's credentials — so it
// adds no second path into the services, and the router that mounts it puts
// it behind the same authentication.
package console

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

// Path is where the console lives; Handler expects full request paths.
const Path = "/console/"

//go:embed assets/index.html assets/console.css assets/console.js
var files embed.FS

// types gives each embedded file its Content-Type, so that nothing depends
// on the host's MIME tables or on sniffing.
var types = map[string]string{
	"index.html":  "text/html; charset=utf-8",
	"console.css": "text/css; charset=utf-8",
	"console.js":  "text/javascript; charset=utf-8",
}

// policy lets the pages load only what this binary serves and talk only to
// this origin: no inline script, no inline style attribute (the script sets
// styles through the DOM, which the policy allows), no frames.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type file struct {
	body        []byte
	contentType string
	etag        string
}

// served maps request paths to files, built on first use.
var served = sync.OnceValue(func() map[string]file {
	m := map[string]file{}
	for name, ct := range types {
		body, err := files.ReadFile("assets/" + name)
		if err != nil {
			panic("console: " + name + " is not embedded: " + err.Error())
		}
		sum := sha256.Sum256(body)
		m[Path+name] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	m[Path] = m[Path+"index.html"]
	return m
})

// Handler serves GET and HEAD of the console's files; /console without its
// slash redirects to Path, any other path is the common JSON 404.
func Handler() http.Handler {
	m := served()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Path, "/") {
			// Relative, so it survives a proxy that adds a path prefix.
			w.Header().Set("Location", "console/")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		f, ok := m[r.URL.Path]
		if !ok {
			httpx.NotFoundHandler(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		// The files change with the binary: revalidate each time, which the
		// ETag makes a 304.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", policy)
		h.Set("Referrer-Policy", "no-referrer")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
