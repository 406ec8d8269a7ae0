package meta

import (
	"errors"
	"slices"

	"github.com/dfs-project/dfs/internal/errs"
)

// Precondition is what a conditional write (S3's If-None-Match: * and
// If-Match) requires of the object a key holds. The store checks it in the
// transaction that writes or deletes the key, so of two writers that race,
// the second sees the first's object: exactly one If-None-Match: * write of
// a new key succeeds.
type Precondition struct {
	// Absent requires that the key hold no object.
	Absent bool
	// ETags, when not empty, requires that the key hold an object whose
	// ETag (unquoted) is one of them; "*" is any object. A key that holds
	// none fails NotFound (errs.CodeObjectNotFound), as S3 answers it.
	ETags []string
}

// ErrPreconditionFailed is the cause of a conditional write refused
// because the key's object is not the one its precondition names. Its
// error is of kind errs.Precondition.
var ErrPreconditionFailed = errors.New("the object the key holds does not meet the precondition")

// Check tests p against what the key holds: exists, and the ETag of the
// object when it does. A nil p always holds.
func (p *Precondition) Check(bucket, key string, exists bool, etag string) error {
	if p == nil {
		return nil
	}
	if len(p.ETags) > 0 {
		if !exists {
			return errs.WithCode(errs.NotFound, errs.CodeObjectNotFound, nil, "object %s/%s not found", bucket, key)
		}
		if !slices.Contains(p.ETags, "*") && !slices.Contains(p.ETags, etag) {
			return errs.Wrap(errs.Precondition, ErrPreconditionFailed, "object %s/%s has ETag %s", bucket, key, etag)
		}
	}
	if p.Absent && exists {
		return errs.Wrap(errs.Precondition, ErrPreconditionFailed, "object %s/%s exists", bucket, key)
	}
	return nil
}
