package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// APIError is an answer of the coordinator outside 2xx, parsed from the common
// error shape {timestamp, status, error, message, path}. Every method returns
// it wrapped in an *errs.Error whose kind follows the status, so callers may
// use errors.As to read the code or errs.KindOf to classify it.
type APIError struct {
	Status int    // the HTTP status
	Code   string // the stable code (FILE_NOT_FOUND, …); empty when the body was not the error shape
	// Message is the server's message, or a short excerpt of a body that was
	// not the error shape (a proxy's page, for example).
	Message   string
	Path      string    // the request path the server saw
	Timestamp time.Time // when the server answered; zero when not given
	RequestID string    // the answer's X-Request-Id, for finding its log lines
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(e.Message)
	if e.Message == "" {
		b.WriteString(http.StatusText(e.Status))
	}
	fmt.Fprintf(&b, " (%d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	b.WriteString(")")
	return b.String()
}

// ConnError means no answer came from the coordinator at all: it could not
// be dialled, the connection broke before an answer, or the HTTP client's
// timeout passed. It is wrapped in an *errs.Error of kind Unavailable.
type ConnError struct {
	URL string // the coordinator's base URL
	Err error
}

func (e *ConnError) Error() string {
	return "cannot reach the coordinator at " + e.URL + ": " + e.Err.Error()
}

func (e *ConnError) Unwrap() error { return e.Err }

// errorBodyLimit bounds how much of an error answer is read: the common
// shape is small, and anything else is only quoted.
const errorBodyLimit = 64 << 10

// readAPIError turns a non-2xx answer into an error and closes its body.
func readAPIError(resp *http.Response) error {
	return apiError(resp, readLimited(resp))
}

// readLimited reads at most errorBodyLimit bytes of an answer and closes it.
// A body that breaks off is quoted as far as it came: the status is what
// matters.
func readLimited(resp *http.Response) []byte {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	return raw
}

// apiError builds the error for a non-2xx answer whose body is raw.
func apiError(resp *http.Response, raw []byte) error {
	e := &APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var body struct {
		Timestamp time.Time `json:"timestamp"`
		Error     string    `json:"error"`
		Message   string    `json:"message"`
		Path      string    `json:"path"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != "" {
		e.Code, e.Message, e.Path, e.Timestamp = body.Error, body.Message, body.Path, body.Timestamp
	} else {
		e.Message = excerpt(raw)
		e.Path = resp.Request.URL.Path
	}
	// The kind is the one the coordinator answered with, read back from the
	// same table; a status outside it (a proxy's 502, a 500) stays Other.
	return errs.Wrap(errs.KindOfStatus(resp.StatusCode), e, "")
}

// excerpt gives the first line of a body that is not the error shape, short
// enough for a message.
func excerpt(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 200
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}
