// Package objects is the namespace's write path, shared by the S3 front
// end and the REST API: storing a key (a new file uploaded whole, the key
// moved to it in the transaction that commits the file, then the file it
// held deleted through the file service's delete), deleting one, and who
// may use a bucket.
// Neither front end imports the other; both call this.
package objects

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"log/slog"
	"path"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
)

// Files is the file service as the namespace uses it.
type Files interface {
	Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error)
	Open(ctx context.Context, id string, q byterange.Request) (*files.Download, error)
	Delete(ctx context.Context, id string) (files.DeleteResult, error)
}

// ErrDigest is the cause of a Put whose body does not match its Content-MD5.
var ErrDigest = errors.New("the body does not match its Content-MD5")

// ErrDenied is the cause of a refused use of a bucket another key owns.
var ErrDenied = errors.New("the bucket belongs to another key")

// Service stores and deletes keys.
type Service struct {
	Files     Files
	Namespace meta.Namespace
	Log       *slog.Logger
}

// DefaultContentType is what an object without a Content-Type is served as.
const DefaultContentType = "binary/octet-stream"

// PutRequest is one key to store.
type PutRequest struct {
	Bucket, Key string
	Body        io.Reader
	// ContentMD5, when set, is the base64 MD5 the body must have.
	ContentMD5  string
	ContentType string
	Headers     map[string]string
	// Tags are the object's tag set (nil: none); the key's old tags go
	// with its old version.
	Tags []meta.Tag
	// Precondition, when set, is what the key's object must be for the
	// key to move (a conditional write): checked before the body is stored
	// (a refused body is read and discarded), and again, atomically, in the
	// write that moves the key.
	Precondition *meta.Precondition
}

// Put uploads the body as a new file and points the key at it, in the
// transaction that commits the file (a body stored as chunks: just after,
// by Bind); the file the key held before is deleted after the key has
// moved. A failed upload (a body cut short, a digest that does not match, a
// bucket deleted meanwhile, a precondition that no longer holds) leaves the
// key as it was, and its file is deleted.
func (s *Service) Put(ctx context.Context, req PutRequest) (meta.Object, files.UploadResult, error) {
	sum, err := newMD5Reader(req.Body, req.ContentMD5)
	if err != nil {
		return meta.Object{}, files.UploadResult{}, err
	}
	if err := s.Check(ctx, req.Bucket, req.Key, req.Precondition); err != nil {
		// The body is read to its end before the refusal is answered: a
		// server that answers while the client still sends closes the
		// connection, and the client sees a reset, not the 412.
		_, _ = io.Copy(io.Discard, req.Body)
		return meta.Object{}, files.UploadResult{}, err
	}
	if req.ContentType == "" {
		req.ContentType = DefaultContentType
	}
	// The ETag is read once the body has been read whole.
	object := func(f meta.File) meta.Object {
		return meta.Object{Bucket: req.Bucket, Key: req.Key, FileID: f.ID, SizeBytes: f.SizeBytes, ETag: sum.etag(),
			ContentType: req.ContentType, Headers: req.Headers, Tags: req.Tags, Precondition: req.Precondition}
	}
	res, err := s.Files.Upload(ctx, files.UploadRequest{FileName: path.Base(req.Key), ContentType: req.ContentType, Body: sum,
		Object: object})
	if err != nil {
		if sum.bad {
			return meta.Object{}, files.UploadResult{}, errs.Wrap(errs.Invalid, ErrDigest, "object %s/%s", req.Bucket, req.Key)
		}
		return meta.Object{}, files.UploadResult{}, err
	}
	if res.Object == nil {
		o := object(meta.File{ID: res.FileID, SizeBytes: res.SizeBytes})
		if err := s.Bind(ctx, &o); err != nil {
			return meta.Object{}, files.UploadResult{}, err
		}
		return o, res, nil
	}
	if res.Replaced != "" {
		s.deleteFile(ctx, res.Replaced, "the object's previous version")
	}
	return *res.Object, res, nil
}

// Bind points o.Key at o.FileID, a complete file committed without its key
// (stored as chunks, or made by a multipart completion), and deletes the
// file the key held before. When the key cannot be recorded (the bucket
// went away while the bytes were uploading, o.Precondition no longer
// holds) the new file is deleted instead.
func (s *Service) Bind(ctx context.Context, o *meta.Object) error {
	replaced, err := s.Namespace.PutObject(ctx, o)
	if err != nil {
		s.deleteFile(ctx, o.FileID, "an object that could not be recorded")
		return err
	}
	if replaced != "" {
		s.deleteFile(ctx, replaced, "the object's previous version")
	}
	return nil
}

// DigestReader passes body on and fails at its end, instead of io.EOF,
// when its MD5 is not contentMD5 (base64; empty: no check).
func DigestReader(body io.Reader, contentMD5 string) (io.Reader, error) {
	return newMD5Reader(body, contentMD5)
}

// Delete removes a key and its file; a key that does not exist is already
// deleted, as S3 has it.
func (s *Service) Delete(ctx context.Context, bucket, key string) error {
	o, err := s.Namespace.DeleteObject(ctx, bucket, key)
	if errs.CodeOf(err) == errs.CodeObjectNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	s.deleteFile(ctx, o.FileID, "a deleted object's file")
	return nil
}

// deleteFile removes a file no key holds any longer. A failure leaves a
// file without a key (visible in the REST API), never a key without its
// bytes.
func (s *Service) deleteFile(ctx context.Context, id, what string) {
	if _, err := s.Files.Delete(context.WithoutCancel(ctx), id); err != nil && !errs.Is(err, errs.NotFound) {
		s.log().Warn("could not delete "+what+"; it stays as a file without a key", "file", id, "err", err)
	}
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// Allowed reports whether accessKey may use bucket b: its owner, or an
// admin. An empty accessKey is an unauthenticated REST API (API_AUTH=open
// or no root key), which may use every bucket.
func Allowed(b meta.Bucket, accessKey string, admin bool) error {
	if accessKey == "" || admin || b.Owner == accessKey {
		return nil
	}
	return errs.Wrap(errs.Forbidden, ErrDenied, "bucket %s belongs to another key", b.Name)
}

// md5Reader hashes what passes and, when the client sent a Content-MD5,
// fails at the end instead of returning io.EOF if the digest differs: the
// file service then stores nothing.
type md5Reader struct {
	r    io.Reader
	h    hash.Hash
	want []byte
	bad  bool
}

func (m *md5Reader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	m.h.Write(p[:n])
	if err == io.EOF && m.want != nil && string(m.h.Sum(nil)) != string(m.want) {
		m.bad = true
		return n, ErrDigest
	}
	return n, err
}

func (m *md5Reader) etag() string { return hex.EncodeToString(m.h.Sum(nil)) }

// ErrInvalidDigest is the cause of a Content-MD5 that is not a base64 MD5.
var ErrInvalidDigest = errors.New("Content-MD5 is not a base64 MD5")

func newMD5Reader(r io.Reader, contentMD5 string) (*md5Reader, error) {
	m := &md5Reader{r: r, h: md5.New()}
	if contentMD5 != "" {
		b, err := base64.StdEncoding.DecodeString(contentMD5)
		if err != nil || len(b) != md5.Size {
			return nil, errs.Wrap(errs.Invalid, ErrInvalidDigest, "Content-MD5 %q", contentMD5)
		}
		m.want = b
	}
	return m, nil
}
