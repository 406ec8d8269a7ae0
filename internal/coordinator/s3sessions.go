package coordinator

import (
	"context"
	"io"

	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/s3"
)

// s3Sessions serves S3 multipart uploads from the file service's upload
// sessions: an S3 part is a session part, stored as chunks as it arrives.
type s3Sessions struct{ f *files.Service }

var _ s3.Sessions = s3Sessions{}

func (s s3Sessions) CreateSession(ctx context.Context, fileName, contentType string) (string, error) {
	ss, err := s.f.CreateSession(ctx, files.SessionSpec{FileName: fileName, ContentType: contentType})
	return ss.ID, err
}

func (s s3Sessions) PutPart(ctx context.Context, id string, n int, body io.Reader, size int64) (s3.Part, error) {
	p, err := s.f.PutPart(ctx, id, n, body, size)
	return s3Part(p), err
}

func (s s3Sessions) Parts(ctx context.Context, id string) ([]s3.Part, error) {
	_, parts, err := s.f.GetSession(ctx, id)
	out := make([]s3.Part, len(parts))
	for i, p := range parts {
		out[i] = s3Part(p)
	}
	return out, err
}

func (s s3Sessions) CompleteSession(ctx context.Context, id string, parts []int) (string, int64, error) {
	rec, err := s.f.CompleteSession(ctx, id, parts, "")
	return rec.ID, rec.SizeBytes, err
}

func (s s3Sessions) AbortSession(ctx context.Context, id string) error {
	return s.f.AbortSession(ctx, id)
}

func s3Part(p files.Part) s3.Part {
	return s3.Part{Number: p.Number, SizeBytes: p.SizeBytes, MD5: p.MD5, CreatedAt: p.CreatedAt}
}
