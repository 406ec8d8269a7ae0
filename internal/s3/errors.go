package s3

import (
	"encoding/xml"
	"errors"
	"net/http"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// Error is an S3 error answer: a standard code, its HTTP status and a
// message.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func s3err(status int, code, msg string) *Error {
	return &Error{Code: code, Status: status, Message: msg}
}

// The errors answered most often.
var (
	errNoSuchBucket  = s3err(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
	errNoSuchKey     = s3err(http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
	errAccessDenied  = s3err(http.StatusForbidden, "AccessDenied", "Access Denied")
	errBucketNotEmpt = s3err(http.StatusConflict, "BucketNotEmpty", "The bucket you tried to delete is not empty")
	errMalformedXML  = s3err(http.StatusBadRequest, "MalformedXML",
		"The XML you provided was not well-formed or did not validate against our published schema")
	errPrecondition = s3err(http.StatusPreconditionFailed, "PreconditionFailed",
		"At least one of the pre-conditions you specified did not hold")
	errBadDigest     = s3err(http.StatusBadRequest, "BadDigest", "The Content-MD5 you specified did not match what we received.")
	errInvalidDigest = s3err(http.StatusBadRequest, "InvalidDigest", "The Content-MD5 you specified is not valid.")
	errKeyTooLong    = s3err(http.StatusBadRequest, "KeyTooLongError", "Your key is too long")
)

func notImplemented(what string) *Error {
	return s3err(http.StatusNotImplemented, "NotImplemented", what+" is not implemented by dfs")
}

func invalidArgument(msg string) *Error { return s3err(http.StatusBadRequest, "InvalidArgument", msg) }

// toS3 turns any error into the S3 error a client understands.
func toS3(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var se *sigv4.Error
	if errors.As(err, &se) {
		return &Error{Code: se.Code, Status: se.Status, Message: se.Message}
	}
	switch {
	case errors.Is(err, objects.ErrDigest):
		return errBadDigest
	case errors.Is(err, objects.ErrInvalidDigest):
		return errInvalidDigest
	}
	switch errs.CodeOf(err) {
	case errs.CodeBucketNotFound:
		return errNoSuchBucket
	case errs.CodeObjectNotFound, errs.CodeFileNotFound:
		return errNoSuchKey
	case errs.CodeBucketNotEmpty:
		return errBucketNotEmpt
	case errs.CodeMultipartNotFound, errs.CodeUploadNotFound:
		return errNoSuchUpload
	}
	switch errs.KindOf(err) {
	case errs.Invalid:
		return invalidArgument(err.Error())
	case errs.TooLarge:
		return s3err(http.StatusBadRequest, "EntityTooLarge", err.Error())
	case errs.Unsatisfiable:
		return s3err(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The requested range is not satisfiable")
	case errs.Unavailable, errs.NoSpace:
		return s3err(http.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
	case errs.NotFound:
		return errNoSuchKey
	}
	return s3err(http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
}

type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string
	RequestID string `xml:"RequestId"`
}

// writeError answers r with err as S3 XML. A HEAD answer has no body.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toS3(err)
	if r.Method == http.MethodHead {
		w.WriteHeader(e.Status)
		return
	}
	writeXML(w, e.Status, errorBody{Code: e.Code, Message: e.Message, Resource: r.URL.Path,
		RequestID: httpx.RequestIDFrom(r.Context())})
}

func writeXML(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}
