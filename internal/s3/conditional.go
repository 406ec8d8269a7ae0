package s3

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
)

// Conditional writes: If-None-Match: * (the key must hold no object) and
// If-Match: ETAG[, ETAG…] or * (it must hold an object with one of them)
// on PutObject, CopyObject (the destination) and CompleteMultipartUpload,
// and If-Match on DeleteObject. The namespace checks the condition in the
// transaction that moves or deletes the key, so of writers that race, one
// wins and the others get 412 PreconditionFailed (never 409: the check
// and the write are one transaction, so no conflict is left undecided).

// writePrecondition is the precondition of a conditional write's
// If-None-Match and If-Match headers; nil when it has neither. S3 takes
// only * in If-None-Match on a write; another value would ask dfs to
// compare what it does not, and is 501.
func writePrecondition(h http.Header) (*meta.Precondition, error) {
	p, err := objects.Precondition(h.Get("If-Match"), h.Get("If-None-Match"))
	switch {
	case errors.Is(err, objects.ErrIfNoneMatchValue):
		return nil, notImplemented("If-None-Match with a value other than * on a write")
	case err != nil:
		return nil, invalidArgument("If-Match names no ETag")
	}
	return p, nil
}

// conditionalWrite reports whether r is an operation that honours
// If-Match and If-None-Match (PutObject, CopyObject,
// CompleteMultipartUpload, and DeleteObject for If-Match): on any other
// write of an object they are refused, as dfs would not check them.
func conditionalWrite(r *request, q url.Values) bool {
	switch r.Method {
	case http.MethodPut:
		return !q.Has("uploadId")
	case http.MethodPost:
		return q.Has("uploadId") && !q.Has("uploads")
	case http.MethodDelete:
		return !q.Has("uploadId") && r.Header.Get("If-None-Match") == ""
	}
	return false
}
