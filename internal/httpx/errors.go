// Package httpx holds the HTTP plumbing both dfs services share: the one error
// shape every answer uses, and the single mapping from an error's kind to an
// HTTP status and a stable code.
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

// Stable API error codes. Add codes; never rename one.
const (
	CodeFileNotFound        = "FILE_NOT_FOUND"
	CodeNodeNotFound        = "NODE_NOT_FOUND"
	CodeNotFound            = "NOT_FOUND"
	CodeBlobNotFound        = "BLOB_NOT_FOUND"
	CodeInvalidRequest      = "INVALID_REQUEST"
	CodeFileTooLarge        = "FILE_TOO_LARGE"
	CodeNoHealthyNodes      = "NO_HEALTHY_NODES"
	CodeStorageUnavailable  = "STORAGE_UNAVAILABLE"
	CodeMetadataUnavailable = "METADATA_UNAVAILABLE"
	CodeConflict            = "CONFLICT"
	CodeUnauthorized        = "UNAUTHORIZED"
	CodeMethodNotAllowed    = "METHOD_NOT_ALLOWED"
	CodeInternal            = "INTERNAL_ERROR"
	CodeInsufficientStorage = "INSUFFICIENT_STORAGE"
	CodeChecksumMismatch    = "CHECKSUM_MISMATCH"
	CodeRangeNotSatisfiable = "RANGE_NOT_SATISFIABLE"
)

// StatusOf maps an error to its HTTP status and API code. It is the only place
// where a kind becomes a status.
func StatusOf(err error) (int, string) {
	status, code := http.StatusInternalServerError, CodeInternal
	switch errs.KindOf(err) {
	case errs.Invalid:
		status, code = http.StatusBadRequest, CodeInvalidRequest
	case errs.NotFound:
		status, code = http.StatusNotFound, CodeNotFound
	case errs.Conflict:
		status, code = http.StatusConflict, CodeConflict
	case errs.Unavailable:
		status, code = http.StatusServiceUnavailable, CodeStorageUnavailable
	case errs.TooLarge:
		status, code = http.StatusRequestEntityTooLarge, CodeFileTooLarge
	case errs.Unauthorized:
		status, code = http.StatusUnauthorized, CodeUnauthorized
	case errs.NoSpace:
		status, code = http.StatusInsufficientStorage, CodeInsufficientStorage
	case errs.Corrupt:
		status, code = http.StatusUnprocessableEntity, CodeChecksumMismatch
	case errs.Unsatisfiable:
		status, code = http.StatusRequestedRangeNotSatisfiable, CodeRangeNotSatisfiable
	}
	if c := errs.CodeOf(err); c != "" {
		code = c
	}
	return status, code
}

// WriteError answers r with err in the common error shape.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := StatusOf(err)
	msg := err.Error()
	var e *errs.Error
	if status == http.StatusInternalServerError && !errors.As(err, &e) {
		// Unclassified causes may carry internal detail; keep the answer generic.
		msg = "internal error"
	}
	WriteErrorCode(w, r, status, code, msg)
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
	WriteErrorCode(w, r, http.StatusNotFound, CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
}

// MethodNotAllowedHandler answers the router's own 405 in the common shape.
func MethodNotAllowedHandler(w http.ResponseWriter, r *http.Request) {
	WriteErrorCode(w, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path)
}
