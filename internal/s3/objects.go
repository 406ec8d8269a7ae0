package s3

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"hash"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
)

// storedHeaders are the request headers an object keeps and gives back on
// every read, beside x-amz-meta-* and Content-Type.
var storedHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires"}

// headersOf collects the headers of h an object stores.
func headersOf(h http.Header) map[string]string {
	out := map[string]string{}
	for name, vals := range h {
		if lower := strings.ToLower(name); strings.HasPrefix(lower, "x-amz-meta-") {
			out[lower] = strings.Join(vals, ",")
		}
	}
	for _, name := range storedHeaders {
		v := h.Get(name)
		if name == "Content-Encoding" {
			// aws-chunked describes the transfer, not the object.
			var kept []string
			for part := range strings.SplitSeq(v, ",") {
				if p := strings.TrimSpace(part); p != "" && p != "aws-chunked" {
					kept = append(kept, p)
				}
			}
			v = strings.Join(kept, ",")
		}
		if v != "" {
			out[name] = v
		}
	}
	return out
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
		return n, errBadDigest
	}
	return n, err
}

func (m *md5Reader) etag() string { return hex.EncodeToString(m.h.Sum(nil)) }

func newMD5Reader(r io.Reader, contentMD5 string) (*md5Reader, error) {
	m := &md5Reader{r: r, h: md5.New()}
	if contentMD5 != "" {
		b, err := base64.StdEncoding.DecodeString(contentMD5)
		if err != nil || len(b) != md5.Size {
			return nil, errInvalidDigest
		}
		m.want = b
	}
	return m, nil
}

func checkKey(key string) error {
	if len(key) > meta.MaxKeyBytes {
		return errKeyTooLong
	}
	return nil
}

// store uploads body as a new file and points bucket/key at it; the file
// the key held before is deleted through the file service's delete, after
// the key has moved.
func (s *Server) store(ctx context.Context, bucket, key string, body io.Reader, contentMD5, contentType string,
	headers map[string]string) (meta.Object, error) {
	sum, err := newMD5Reader(body, contentMD5)
	if err != nil {
		return meta.Object{}, err
	}
	if contentType == "" {
		contentType = "binary/octet-stream"
	}
	res, err := s.o.Files.Upload(ctx, files.UploadRequest{FileName: path.Base(key), ContentType: contentType, Body: sum})
	if err != nil {
		if sum.bad {
			return meta.Object{}, errBadDigest
		}
		return meta.Object{}, err
	}
	o := meta.Object{Bucket: bucket, Key: key, FileID: res.FileID, SizeBytes: res.SizeBytes, ETag: sum.etag(),
		ContentType: contentType, Headers: headers}
	replaced, err := s.o.Namespace.PutObject(ctx, &o)
	if err != nil {
		// The bucket went away while the bytes were uploading.
		s.deleteFile(ctx, res.FileID, "an object that could not be recorded")
		return meta.Object{}, err
	}
	if replaced != "" {
		s.deleteFile(ctx, replaced, "the object's previous version")
	}
	return o, nil
}

// deleteFile removes a file no key holds any longer. A failure leaves a
// file without a key (visible in the REST API), never a key without its
// bytes.
func (s *Server) deleteFile(ctx context.Context, id, what string) {
	if _, err := s.o.Files.Delete(context.WithoutCancel(ctx), id); err != nil && !errs.Is(err, errs.NotFound) {
		s.log.Warn("could not delete "+what+"; it stays as a file without a key", "file", id, "err", err)
	}
}

func (s *Server) putObject(w http.ResponseWriter, r *request) error {
	if err := checkKey(r.key); err != nil {
		return err
	}
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	o, err := s.store(r.Context(), r.bucket, r.key, r.Body, r.Header.Get("Content-MD5"), r.Header.Get("Content-Type"), headersOf(r.Header))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", quote(o.ETag))
	w.WriteHeader(http.StatusOK)
	return nil
}

func quote(etag string) string { return `"` + etag + `"` }

// conditions evaluates If-Match, If-None-Match, If-Modified-Since and
// If-Unmodified-Since (under prefix, for a copy's source) in RFC 9110's
// order. It answers nil, errPrecondition, or notModified.
func conditions(h http.Header, prefix string, o meta.Object) error {
	etag := quote(o.ETag)
	modified := o.ModifiedAt.Truncate(time.Second)
	matches := func(list string) bool {
		for part := range strings.SplitSeq(list, ",") {
			if p := strings.TrimSpace(part); p == "*" || p == etag || p == o.ETag {
				return true
			}
		}
		return false
	}
	date := func(name string) (time.Time, bool) {
		t, err := http.ParseTime(h.Get(prefix + name))
		return t, err == nil
	}
	if v := h.Get(prefix + "If-Match"); v != "" {
		if !matches(v) {
			return errPrecondition
		}
	} else if t, ok := date("If-Unmodified-Since"); ok && modified.After(t) {
		return errPrecondition
	}
	if v := h.Get(prefix + "If-None-Match"); v != "" {
		if matches(v) {
			return errNotModified
		}
	} else if t, ok := date("If-Modified-Since"); ok && !modified.After(t) {
		return errNotModified
	}
	return nil
}

// errNotModified is a 304 answer, without a body.
var errNotModified = s3err(http.StatusNotModified, "NotModified", "Not Modified")

// overrides are the response-* query parameters of a GET and the headers
// they set.
var overrides = map[string]string{
	"response-content-type": "Content-Type", "response-content-language": "Content-Language",
	"response-expires": "Expires", "response-cache-control": "Cache-Control",
	"response-content-disposition": "Content-Disposition", "response-content-encoding": "Content-Encoding",
}

func objectHeaders(w http.ResponseWriter, o meta.Object) {
	h := w.Header()
	h.Set("ETag", quote(o.ETag))
	h.Set("Last-Modified", o.ModifiedAt.UTC().Format(http.TimeFormat))
	h.Set("Content-Type", o.ContentType)
	h.Set("Accept-Ranges", "bytes")
	for k, v := range o.Headers {
		h.Set(k, v)
	}
}

func (s *Server) getObject(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	o, err := s.o.Namespace.GetObject(r.Context(), r.bucket, r.key)
	if err != nil {
		return err
	}
	if err := conditions(r.Header, "", o); err != nil {
		if err == errNotModified {
			objectHeaders(w, o)
			w.Header().Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
		return err
	}
	q := r.URL.Query()
	var rng *byterange.Range
	if h := r.Header.Get("Range"); h != "" {
		p, ok, err := byterange.Parse(h, o.SizeBytes)
		if err != nil {
			return err
		}
		if ok && p.Length < o.SizeBytes {
			rng = &p
		}
	}
	objectHeaders(w, o)
	for param, header := range overrides {
		if v := q.Get(param); v != "" {
			w.Header().Set(header, v)
		}
	}
	length := o.SizeBytes
	status := http.StatusOK
	if rng != nil {
		length, status = rng.Length, http.StatusPartialContent
		w.Header().Set("Content-Range", rng.ContentRange(o.SizeBytes))
	}
	w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return nil
	}
	req := byterange.Request{}
	if rng != nil {
		req.Range = rng.Header()
	}
	d, err := s.o.Files.Open(r.Context(), o.FileID, req)
	if err != nil {
		for k := range w.Header() {
			if k != "X-Amz-Request-Id" && k != "X-Request-Id" {
				w.Header().Del(k)
			}
		}
		return err
	}
	defer d.Body.Close()
	w.WriteHeader(status)
	if _, err := io.Copy(w, d.Body); err != nil {
		s.log.Warn("S3 download aborted", "bucket", r.bucket, "key", r.key, "file", o.FileID, "err", err)
		panic(http.ErrAbortHandler) // the client must see a failed transfer, not a short success
	}
	return nil
}

func (s *Server) deleteObject(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	if err := s.removeKey(r.Context(), r.bucket, r.key); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeKey deletes a key and its file; a key that does not exist is
// already deleted, as S3 has it.
func (s *Server) removeKey(ctx context.Context, bucket, key string) error {
	o, err := s.o.Namespace.DeleteObject(ctx, bucket, key)
	if errs.CodeOf(err) == errs.CodeObjectNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	s.deleteFile(ctx, o.FileID, "a deleted object's file")
	return nil
}

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool
	Objects []struct {
		Key string
	} `xml:"Object"`
}

type deletedXML struct {
	Key string
}

type deleteErrorXML struct {
	Key     string
	Code    string
	Message string
}

type deleteResult struct {
	XMLName xml.Name         `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
	Deleted []deletedXML     `xml:"Deleted"`
	Errors  []deleteErrorXML `xml:"Error"`
}

func (s *Server) deleteObjects(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	var req deleteRequest
	if err := readXML(r.Body, &req); err != nil {
		return err
	}
	if len(req.Objects) == 0 || len(req.Objects) > 1000 {
		return errMalformedXML
	}
	out := deleteResult{}
	for _, o := range req.Objects {
		err := checkKey(o.Key)
		if err == nil {
			err = s.removeKey(r.Context(), r.bucket, o.Key)
		}
		if err != nil {
			e := toS3(err)
			out.Errors = append(out.Errors, deleteErrorXML{Key: o.Key, Code: e.Code, Message: e.Message})
			continue
		}
		if !req.Quiet {
			out.Deleted = append(out.Deleted, deletedXML{Key: o.Key})
		}
	}
	writeXML(w, http.StatusOK, out)
	return nil
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyObjectResult"`
	LastModified string
	ETag         string
}

// copySource reads x-amz-copy-source: "bucket/key" or "/bucket/key",
// URL-encoded.
func copySource(h string) (bucket, key string, err error) {
	h, _, _ = strings.Cut(h, "?")
	p, uerr := url.PathUnescape(strings.TrimPrefix(h, "/"))
	bucket, key, ok := strings.Cut(p, "/")
	if uerr != nil || !ok || bucket == "" || key == "" {
		return "", "", invalidArgument("x-amz-copy-source must be BUCKET/KEY, URL-encoded")
	}
	return bucket, key, nil
}

func (s *Server) copyObject(w http.ResponseWriter, r *request) error {
	if err := checkKey(r.key); err != nil {
		return err
	}
	srcBucket, srcKey, err := copySource(r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		return err
	}
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	if _, err := s.bucketFor(r.Context(), srcBucket, r.accessKey, r.admin); err != nil {
		return err
	}
	src, err := s.o.Namespace.GetObject(r.Context(), srcBucket, srcKey)
	if err != nil {
		return err
	}
	if err := conditions(r.Header, "X-Amz-Copy-Source-", src); err != nil {
		if err == errNotModified {
			return errPrecondition // a copy has no 304: S3 answers 412
		}
		return err
	}
	contentType, headers := src.ContentType, src.Headers
	switch d := r.Header.Get("X-Amz-Metadata-Directive"); d {
	case "", "COPY":
		if srcBucket == r.bucket && srcKey == r.key {
			return s3err(http.StatusBadRequest, "InvalidRequest", "This copy request is illegal because it is trying to copy an "+
				"object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
	case "REPLACE":
		contentType, headers = r.Header.Get("Content-Type"), headersOf(r.Header)
	default:
		return invalidArgument("x-amz-metadata-directive must be COPY or REPLACE")
	}
	d, err := s.o.Files.Open(r.Context(), src.FileID, byterange.Request{})
	if err != nil {
		return err
	}
	defer d.Body.Close()
	o, err := s.store(r.Context(), r.bucket, r.key, d.Body, "", contentType, headers)
	if err != nil {
		return err
	}
	writeXML(w, http.StatusOK, copyObjectResult{LastModified: s3Time(o.ModifiedAt), ETag: quote(o.ETag)})
	return nil
}
