package objects

import (
	"context"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

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
