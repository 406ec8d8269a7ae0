// Package httpx holds the HTTP plumbing both dfs services share: the one error
// shape every answer uses, written from an error's kind and code by the table
// in package errs.
package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// ErrorBody is the JSON shape of every error answer of both services.
type ErrorBody struct {
	Timestamp time.Time `json:"timestamp"`
	Status    int       `json:"status"`
	Error     string    `json:"error"`
	Message   string    `json:"message"`
	Path      string    `json:"path"`
}

// StatusOf gives an error's HTTP status and API code: its kind's row of the
// errs table, with the code replaced by the error's own where it names one.
func StatusOf(err error) (int, string) {
	k := errs.KindOf(err)
	code := errs.CodeOf(err)
	if code == "" {
		code = k.Code()
	}
	return k.Status(), code
}

// WriteError answers r with err in the common error shape.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	status, code, msg := Answer(err)
	WriteErrorCode(w, r, status, code, msg)
}

// Answer is what WriteError answers for err: its status and code (StatusOf)
// and the message shown to the caller.
func Answer(err error) (status int, code, msg string) {
	status, code = StatusOf(err)
	msg = err.Error()
	var e *errs.Error
	if status == http.StatusInternalServerError && !errors.As(err, &e) {
		// Unclassified causes may carry internal detail; keep the answer generic.
		msg = "internal error"
	}
	return status, code, msg
}

// WriteErrorCode answers r with an explicit status, code and message.
func WriteErrorCode(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	WriteJSON(w, status, ErrorBody{
		Timestamp: time.Now().UTC(),
		Status:    status,
		Error:     code,
		Message:   msg,
		Path:      r.URL.Path,
	})
}

// WriteJSON writes v as a JSON answer with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// NotFoundHandler answers the router's own 404 in the common shape.
func NotFoundHandler(w http.ResponseWriter, r *http.Request) {
	WriteErrorCode(w, r, http.StatusNotFound, errs.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// MethodNotAllowedHandler answers the router's own 405 in the common shape.
func MethodNotAllowedHandler(w http.ResponseWriter, r *http.Request) {
	WriteErrorCode(w, r, http.StatusMethodNotAllowed, errs.CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
}
