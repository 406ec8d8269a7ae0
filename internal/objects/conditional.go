package objects

import (
	"context"
	"errors"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// ErrIfNoneMatchValue is the cause of an If-None-Match other than * on a
// write: S3 takes only *, and comparing ETags there is not done.
var ErrIfNoneMatchValue = errors.New("If-None-Match on a write must be *")

// ETagList reads an If-Match list: the ETags it names, unquoted, and "*"
// for any. A weak ETag (W/"…") is kept as sent, so it matches nothing, as
// a strong comparison has it.
func ETagList(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, strings.Trim(p, `"`))
		}
	}
	return out
}

// Precondition reads a write's If-Match and If-None-Match header values:
// nil when both are empty. If-None-Match may only be * (Invalid,
// ErrIfNoneMatchValue, otherwise); an If-Match that names nothing is
// Invalid.
func Precondition(ifMatch, ifNoneMatch string) (*meta.Precondition, error) {
	var p meta.Precondition
	if v := strings.TrimSpace(ifNoneMatch); v != "" {
		if v != "*" && v != `"*"` {
			return nil, errs.Wrap(errs.Invalid, ErrIfNoneMatchValue, "If-None-Match %q", v)
		}
		p.Absent = true
	}
	if ifMatch != "" {
		p.ETags = ETagList(ifMatch)
		if len(p.ETags) == 0 {
			return nil, errs.E(errs.Invalid, "If-Match names no ETag")
		}
	}
	if !p.Absent && len(p.ETags) == 0 {
		return nil, nil
	}
	return &p, nil
}

// Check tests p against what the key holds now, so that a conditional
// write known to fail is answered before its body is read. It decides
// nothing: the write that moves the key checks p again, atomically. A nil
// p always holds.
func (s *Service) Check(ctx context.Context, bucket, key string, p *meta.Precondition) error {
	if p == nil {
		return nil
	}
	o, err := s.Namespace.GetObject(ctx, bucket, key)
	exists := err == nil
	if err != nil && errs.CodeOf(err) != errs.CodeObjectNotFound {
		return err
	}
	return p.Check(bucket, key, exists, o.ETag)
}

// DeleteIf removes a key and its file if what the key holds meets p,
// checked in the delete's transaction. Unlike Delete, a key that holds
// nothing is NotFound when p names ETags (S3's conditional delete).
func (s *Service) DeleteIf(ctx context.Context, bucket, key string, p meta.Precondition) error {
	o, err := s.Namespace.DeleteObjectIf(ctx, bucket, key, p)
	if err != nil {
		return err
	}
	s.deleteFile(ctx, o.FileID, "a deleted object's file")
	return nil
}
