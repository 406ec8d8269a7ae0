// Package errs gives dfs errors a kind, so that the layer that answers a caller
// (the HTTP edge, the CLI) can choose a status without parsing messages.
//
// An error is built with E(kind, message), Wrap(kind, cause, message) or, when
// the answer must name what went wrong more precisely than its kind does,
// WithCode(kind, code, cause, message); KindOf walks the chain and reports the
// first kind it finds. What a kind means on the wire, its HTTP status and its
// default API code, is one table in this package (kinds): the HTTP edge reads
// it one way (Kind.Status, Kind.Code) and the clients read it back
// (KindOfStatus), so the two sides cannot disagree.
package errs

import (
	"errors"
	"fmt"
	"net/http"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

// The kinds. Add new ones at the end, with their row in kinds; never renumber.
const (
	Other         Kind = iota // an unexpected failure: a bug or an unclassified cause
	Invalid                   // the request is malformed or out of bounds
	NotFound                  // the thing asked for does not exist (or is not visible)
	Conflict                  // the request contradicts the current state
	Unavailable               // a dependency is down; retrying later may succeed
	TooLarge                  // the payload exceeds a configured limit
	Unauthorized              // missing or wrong credentials
	NoSpace                   // the storage device is full
	Corrupt                   // stored bytes do not match their checksum
	Unsatisfiable             // a Range header that no byte of the blob satisfies
	Forbidden                 // valid credentials that may not do this
	Precondition              // a condition the request set (If-Match, If-None-Match) does not hold
)

// Stable API error codes, the "error" field of every error answer. Clients
// and scripts match on them: add codes, never rename one.
const (
	CodeInternal            = "INTERNAL_ERROR"
	CodeInvalidRequest      = "INVALID_REQUEST"
	CodeNotFound            = "NOT_FOUND"
	CodeConflict            = "CONFLICT"
	CodeStorageUnavailable  = "STORAGE_UNAVAILABLE"
	CodeFileTooLarge        = "FILE_TOO_LARGE"
	CodeUnauthorized        = "UNAUTHORIZED"
	CodeInsufficientStorage = "INSUFFICIENT_STORAGE"
	CodeChecksumMismatch    = "CHECKSUM_MISMATCH"
	CodeRangeNotSatisfiable = "RANGE_NOT_SATISFIABLE"
	CodePreconditionFailed  = "PRECONDITION_FAILED"

	// Codes that name the cause more precisely than its kind's default.
	CodeFileNotFound        = "FILE_NOT_FOUND"       // NotFound: no such file, or not visible
	CodeNodeNotFound        = "NODE_NOT_FOUND"       // NotFound: no such storage node
	CodeBlobNotFound        = "BLOB_NOT_FOUND"       // NotFound: a storage node holds no such blob
	CodeBlobCorrupt         = "BLOB_CORRUPT"         // Corrupt: a storage node found its copy of the blob damaged while reading it
	CodeNoHealthyNodes      = "NO_HEALTHY_NODES"     // Unavailable: the ring is empty
	CodeMetadataUnavailable = "METADATA_UNAVAILABLE" // Unavailable: the metadata database
	CodeMethodNotAllowed    = "METHOD_NOT_ALLOWED"   // the router's 405; no kind has it
	CodeUnsafeDrain         = "UNSAFE_DRAIN"         // Conflict: a drain would lose data or redundancy
	CodeUploadNotFound      = "UPLOAD_NOT_FOUND"     // NotFound: no such upload session (completed, aborted or expired)
	CodeMissingPart         = "MISSING_PART"         // Invalid: a completion names a part never received
	CodePartOrder           = "INVALID_PART_ORDER"   // Invalid: a completion's parts are not in increasing order
)

// Codes of access keys and the S3 namespace.
const (
	CodeForbidden         = "FORBIDDEN"                  // Forbidden: the key may not do this (an admin path, another key's bucket)
	CodeBucketNotFound    = "BUCKET_NOT_FOUND"           // NotFound: no such S3 bucket
	CodeObjectNotFound    = "OBJECT_NOT_FOUND"           // NotFound: no such key in the bucket
	CodeAccessKeyNotFound = "ACCESS_KEY_NOT_FOUND"       // NotFound: no such access key
	CodeBucketNotEmpty    = "BUCKET_NOT_EMPTY"           // Conflict: the bucket still holds objects
	CodeBucketExists      = "BUCKET_EXISTS"              // Conflict: the bucket name is taken
	CodeMultipartNotFound = "MULTIPART_UPLOAD_NOT_FOUND" // NotFound: no such S3 multipart upload
)

type kindRow struct {
	name   string
	status int
	code   string
}

// kinds is the one table of what each kind means at the edge: its name, the
// HTTP status it is answered with and the API code it has unless an error
// sets its own. It is read in both directions, so no two kinds may share a
// status (TestKindTableIsOneToOne holds it so).
var kinds = [...]kindRow{
	Other:         {"other", http.StatusInternalServerError, CodeInternal},
	Invalid:       {"invalid", http.StatusBadRequest, CodeInvalidRequest},
	NotFound:      {"not found", http.StatusNotFound, CodeNotFound},
	Conflict:      {"conflict", http.StatusConflict, CodeConflict},
	Unavailable:   {"unavailable", http.StatusServiceUnavailable, CodeStorageUnavailable},
	TooLarge:      {"too large", http.StatusRequestEntityTooLarge, CodeFileTooLarge},
	Unauthorized:  {"unauthorized", http.StatusUnauthorized, CodeUnauthorized},
	NoSpace:       {"no space", http.StatusInsufficientStorage, CodeInsufficientStorage},
	Corrupt:       {"corrupt", http.StatusUnprocessableEntity, CodeChecksumMismatch},
	Unsatisfiable: {"unsatisfiable", http.StatusRequestedRangeNotSatisfiable, CodeRangeNotSatisfiable},
	Forbidden:     {"forbidden", http.StatusForbidden, CodeForbidden},
	Precondition:  {"precondition failed", http.StatusPreconditionFailed, CodePreconditionFailed},
}

func (k Kind) String() string {
	if k.known() {
		return kinds[k].name
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Status is the HTTP status an error of kind k is answered with.
func (k Kind) Status() int { return k.row().status }

// Code is the API code of an error of kind k that sets no code of its own.
func (k Kind) Code() string { return k.row().code }

func (k Kind) known() bool { return k >= 0 && int(k) < len(kinds) }

// row is k's row of the table; a kind outside it is answered as Other.
func (k Kind) row() kindRow {
	if k.known() {
		return kinds[k]
	}
	return kinds[Other]
}

// KindOfStatus is the kind whose errors are answered with status, read back
// from the same table the edge answers with, so that errs.KindOf works on both
// sides of the wire. A status no kind has (a 403, a 502 from a proxy) is
// Other; a client that means more by one says so on top of this.
func KindOfStatus(status int) Kind {
	for k, row := range kinds {
		if row.status == status {
			return Kind(k)
		}
	}
	return Other
}

// Error is an error with a kind, an optional stable code for API answers and an
// optional wrapped cause.
type Error struct {
	Kind Kind
	// Code overrides the default API error code of the kind (for example
	// NO_HEALTHY_NODES instead of STORAGE_UNAVAILABLE). Empty means the default.
	Code string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg == "" && e.Err == nil:
		return e.Kind.String()
	case e.Err == nil:
		return e.Msg
	case e.Msg == "":
		return e.Err.Error()
	default:
		return e.Msg + ": " + e.Err.Error()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// E returns a new error of kind k with a formatted message.
func E(k Kind, format string, args ...any) error {
	return newError(k, "", nil, format, args)
}

// Wrap returns an error of kind k that wraps cause. A nil cause gives nil.
func Wrap(k Kind, cause error, format string, args ...any) error {
	if cause == nil {
		return nil
	}
	return newError(k, "", cause, format, args)
}

// WithCode returns an error of kind k whose API code is code (one of the Code
// constants) and which wraps cause. Unlike Wrap, a nil cause still gives an
// error: the code is the news, the cause only its detail.
func WithCode(k Kind, code string, cause error, format string, args ...any) error {
	return newError(k, code, cause, format, args)
}

func newError(k Kind, code string, cause error, format string, args []any) *Error {
	return &Error{Kind: k, Code: code, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// KindOf reports the kind of the first *Error in err's chain, or Other.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Other
}

// CodeOf reports the explicit code of the first *Error in err's chain that has one.
func CodeOf(err error) string {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return ""
		}
		if e.Code != "" {
			return e.Code
		}
		err = e.Err
	}
	return ""
}

// Is reports whether err has kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }
