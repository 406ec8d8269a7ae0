// Package client is a typed Go client for the coordinator's REST API (see
// API.md): uploads streamed from any reader, downloads checked against the
// file's SHA-256, and every file, node and cluster call, each answering the
// API's JSON as Go values.
//
// Errors are of three sorts. An answer outside 2xx is an *APIError (status,
// stable code, message, path); a failure to get any answer is a *ConnError;
// both arrive wrapped in an *errs.Error whose kind classifies them, so
// errors.As and errs.KindOf both work. Anything else (a cancelled context, a
// reader that failed, a download whose bytes do not match their checksum) is
// an *errs.Error around its cause.
//
// The dfs CLI, the end-to-end tests, the load harness and the benchmarks all
// talk to the coordinator through this package.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/errs"
)

// Options configure a Client. The zero value is usable.
type Options struct {
	// HTTPClient sends the requests. Default: a client of its own with a
	// clone of http.DefaultTransport that keeps up to 64 idle connections to
	// the coordinator (the standard 2 would make a client used by many
	// goroutines open and close a connection per request), and no overall
	// timeout, because a transfer may rightly take minutes; bound calls with
	// their context.
	HTTPClient *http.Client
	// Token, when set, is sent as "Authorization: Bearer <token>" (the
	// coordinator's CLUSTER_TOKEN, which node registration needs).
	Token string
	// AccessKey and SecretKey, when set (and Token is not), are sent as
	// HTTP Basic credentials: a coordinator with a root key needs them.
	AccessKey, SecretKey string
	// UserAgent names the program in every request's User-Agent, for the
	// coordinator's access log. Default: "dfs-client/<version>", the
	// version being buildinfo.Version().
	UserAgent string
}

// idleConnsPerHost is how many idle connections the default transport keeps.
const idleConnsPerHost = 64

// Client talks to one coordinator. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	hc        *http.Client
	token     string
	accessKey string
	secretKey string
	userAgent string
}

// New returns a client for the coordinator at baseURL, such as
// "http://localhost:8080". A URL without a scheme is taken as http://.
func New(baseURL string, opts Options) (*Client, error) {
	raw := strings.TrimSpace(baseURL)
	if raw != "" && !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "coordinator URL %q", baseURL)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, errs.E(errs.Invalid, "coordinator URL %q must look like http://host:port", baseURL)
	}
	hc := opts.HTTPClient
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = idleConnsPerHost
		hc = &http.Client{Transport: t}
	}
	ua := opts.UserAgent
	if ua == "" {
		ua = "dfs-client/" + buildinfo.Version()
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), hc: hc, token: opts.Token, userAgent: ua,
		accessKey: opts.AccessKey, secretKey: opts.SecretKey}, nil
}

// BaseURL returns the coordinator's URL as the client uses it.
func (c *Client) BaseURL() string { return c.base }

type requestIDKey struct{}

// WithRequestID returns a context whose requests carry X-Request-Id: id, so
// that the coordinator's and the nodes' log lines about them can be found.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// newRequest builds a request for path (which starts with "/") with query q.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	target := c.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "build %s %s", method, path)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else if c.accessKey != "" {
		req.SetBasicAuth(c.accessKey, c.secretKey)
	}
	if id, ok := ctx.Value(requestIDKey{}).(string); ok && id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	return req, nil
}

// send performs req. bodyErr, when not nil, reports a failure of the
// caller's own request body, which then explains a failed exchange better
// than the transport's wording of it.
func (c *Client) send(req *http.Request, bodyErr func() error) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err == nil {
		return resp, nil
	}
	if bodyErr != nil {
		if berr := bodyErr(); berr != nil {
			return nil, berr
		}
	}
	if cerr := req.Context().Err(); cerr != nil {
		return nil, errs.Wrap(errs.Other, cerr, "%s %s", req.Method, req.URL.Path)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // the URL is in the ConnError already
	}
	return nil, errs.Wrap(errs.Unavailable, &ConnError{URL: c.base, Err: err}, "")
}

// doJSON sends a request with an optional JSON body and decodes a 2xx answer
// into out (when not nil). It returns the answer's status.
func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, errs.Wrap(errs.Invalid, err, "encode the %s %s body", method, path)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, q, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(req, nil)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, readAPIError(resp)
	}
	defer resp.Body.Close()
	return resp.StatusCode, decodeBody(resp, out)
}

// decodeBody decodes a JSON answer into out, or drains it when out is nil so
// that the connection can be reused.
func decodeBody(resp *http.Response, out any) error {
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return errs.Wrap(errs.Other, err, "decode the answer to %s %s", resp.Request.Method, resp.Request.URL.Path)
	}
	return nil
}

// pathOf joins path segments, escaping each (ids come from users).
func pathOf(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}
