// Package openapitest checks real HTTP answers of the coordinator against its
// embedded OpenAPI document, so tests catch an answer that drifted from what
// the document promises.
//
// Only tests import it: it is what brings kin-openapi into the module, and
// keeping it here keeps that library out of the binaries.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/dfs-project/dfs/internal/openapi"
)

type loaded struct {
	doc    *openapi3.T
	router routers.Router
}

// load parses and validates the embedded document once per test binary.
var load = sync.OnceValues(func() (loaded, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document())
	if err != nil {
		return loaded{}, fmt.Errorf("parse the OpenAPI document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return loaded{}, fmt.Errorf("the OpenAPI document is invalid: %w", err)
	}
	// The document's one server is "/", the coordinator answering; routing
	// by path alone lets tests send requests to any loopback address.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return loaded{}, fmt.Errorf("route the OpenAPI document: %w", err)
	}
	return loaded{doc: doc, router: router}, nil
})

// Document returns the parsed and validated embedded document. Callers must
// not modify it.
func Document() (*openapi3.T, error) {
	l, err := load()
	return l.doc, err
}

// Operations lists the document's operations as "METHOD /path", sorted.
func Operations() ([]string, error) {
	var raw struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.Document(), &raw); err != nil {
		return nil, fmt.Errorf("parse the OpenAPI document: %w", err)
	}
	var out []string
	for path, item := range raw.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				out = append(out, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Validate checks one answer to req against the document: the status must be
// one the request's operation documents, and the headers and body must match
// what the document says for that status. Undocumented statuses fail, and
// string formats (date-time) are checked. A request no operation covers may
// only get the router's own 404 NOT_FOUND or 405 METHOD_NOT_ALLOWED in the
// Error shape, so every answer of the coordinator can be validated.
func Validate(req *http.Request, status int, header http.Header, body []byte) error {
	l, err := load()
	if err != nil {
		return err
	}
	// Route on the escaped path, as chi does, so an id holding an encoded
	// slash stays one path segment.
	routed := *req
	u := *req.URL
	u.Path, u.RawPath = req.URL.EscapedPath(), ""
	routed.URL = &u
	route, params, err := l.router.FindRoute(&routed)
	if err != nil {
		return validateUnrouted(l.doc, req, status, header, body, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: &routed, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
			// The schema dumps of the details drown the reason; the body is
			// quoted below instead.
			SchemaValidationOptions: []openapi3.SchemaValidationOption{
				openapi3.EnableFormatValidation(), openapi3.DisableSchemaErrorDetails(),
			},
		},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, which the OpenAPI document does not allow: %w\nbody: %s",
			req.Method, req.URL.Path, status, err, quote(body))
	}
	if route.Operation.OperationID == "downloadFile" && status < 300 {
		// A rule OpenAPI headers cannot state: a download names where its
		// bytes came from, a node or the content cache, and only one of them.
		node, cache := header.Get("X-Served-By-Node") != "", header.Get("X-Served-From") != ""
		if node == cache {
			return fmt.Errorf("%s %s answered %d with X-Served-By-Node %q and X-Served-From %q: exactly one must be present",
				req.Method, req.URL.Path, status, header.Get("X-Served-By-Node"), header.Get("X-Served-From"))
		}
	}
	return nil
}

// validateUnrouted checks the answer to a request that no operation covers:
// only the router's own 404 NOT_FOUND (unknown path) or 405
// METHOD_NOT_ALLOWED (known path, other method), in the Error shape, is
// allowed there.
func validateUnrouted(doc *openapi3.T, req *http.Request, status int, header http.Header, body []byte, routeErr error) error {
	var wantStatus int
	var wantCode string
	if re := (*routers.RouteError)(nil); errors.As(routeErr, &re) {
		switch re.Reason {
		case routers.ErrPathNotFound.Error():
			wantStatus, wantCode = http.StatusNotFound, "NOT_FOUND"
		case routers.ErrMethodNotAllowed.Error():
			wantStatus, wantCode = http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"
		}
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s %s answered %d, and no operation in the OpenAPI document covers the request (%v): %s\nbody: %s",
			req.Method, req.URL.Path, status, routeErr, fmt.Sprintf(format, args...), quote(body))
	}
	if wantStatus == 0 || status != wantStatus {
		return fail("only the router's own 404 or 405 may answer it")
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fail("Content-Type is %q, not application/json", ct)
	}
	if header.Get("X-Request-Id") == "" {
		return fail("no X-Request-Id")
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fail("the body is not JSON: %v", err)
	}
	schema := doc.Components.Schemas["Error"].Value
	if err := schema.VisitJSON(v, openapi3.EnableFormatValidation(), openapi3.DisableSchemaErrorDetails()); err != nil {
		return fail("the body is not an Error: %v", err)
	}
	if code := v.(map[string]any)["error"]; code != wantCode {
		return fail("the error code is %v, not %s", code, wantCode)
	}
	return nil
}

// ValidateResponse fails t unless resp, whose body the caller has read into
// body, is an answer to req that the document allows. req may be nil to use
// resp.Request.
func ValidateResponse(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	if req == nil {
		req = resp.Request
	}
	if req == nil {
		t.Fatalf("openapitest: no request to validate the answer against")
	}
	if err := Validate(req, resp.StatusCode, resp.Header, body); err != nil {
		t.Error(err)
	}
}

// ValidateRecorder is ValidateResponse for an answer recorded by httptest.
func ValidateRecorder(t testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	if err := Validate(req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Error(err)
	}
}

// ReadBody reads and closes resp's body and puts the bytes back, so a test can
// both validate the answer and decode it.
func ReadBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("openapitest: read the answer of %s %s: %v", resp.Request.Method, resp.Request.URL.Path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return body
}

// quote shows at most the first KiB of a body.
func quote(body []byte) string {
	const limit = 1024
	if len(body) > limit {
		return fmt.Sprintf("%q… (%d bytes)", body[:limit], len(body))
	}
	return fmt.Sprintf("%q", body)
}
