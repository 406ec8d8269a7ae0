package s3

import (
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// Error is an S3 error answer: a standard code, its HTTP status and a
// message.
type Error struct {
	Code    string
	Status  int
	Message string
	// Region, when set, is the region the request should have been signed
	// for, which s3cmd and the SDKs read to sign again.
	Region string
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
	errNoSuchVersion = s3err(http.StatusNotFound, "NoSuchVersion", "The specified version does not exist.")
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
		return &Error{Code: se.Code, Status: se.Status, Message: se.Message, Region: se.Region}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errIncompleteBody
	}
	switch {
	case errors.Is(err, meta.ErrPreconditionFailed):
		return errPrecondition
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
	// The messages below are S3's own: the error's text names what failed
	// inside dfs (a node, a query, a driver's words), which is the log's
	// business and not the client's.
	switch errs.KindOf(err) {
	case errs.Invalid:
		return invalidArgument("The request is not valid.")
	case errs.TooLarge:
		return s3err(http.StatusBadRequest, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed object size.")
	case errs.Unsatisfiable:
		return s3err(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The requested range is not satisfiable")
	case errs.Unavailable, errs.NoSpace:
		return errServiceUnavailable
	case errs.NotFound:
		return errNoSuchKey
	}
	return errInternal
}

var (
	errIncompleteBody = s3err(http.StatusBadRequest, "IncompleteBody",
		"You did not provide the number of bytes specified by the Content-Length HTTP header.")
	errServiceUnavailable = s3err(http.StatusServiceUnavailable, "ServiceUnavailable", "The service is unavailable. Please retry.")
	errInternal           = s3err(http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
)

type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Region    string `xml:",omitempty"`
	Resource  string
	RequestID string `xml:"RequestId"`
}

// writeError answers r with err as S3 XML. A HEAD answer has no body. An
// error that is not an S3 answer of its own is logged whole, since the
// client is told only its S3 code.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := toS3(err)
	var own *Error
	var sig *sigv4.Error
	if !errors.As(err, &own) && !errors.As(err, &sig) {
		lvl := slog.LevelInfo
		if e.Status >= 500 {
			lvl = slog.LevelWarn
		}
		log.Log(r.Context(), lvl, "S3 request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	if e.Region != "" {
		w.Header().Set("X-Amz-Bucket-Region", e.Region)
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(e.Status)
		return
	}
	writeXML(w, e.Status, errorBody{Code: e.Code, Message: e.Message, Region: e.Region, Resource: r.URL.Path,
		RequestID: httpx.RequestIDFrom(r.Context())})
}

func writeXML(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}
