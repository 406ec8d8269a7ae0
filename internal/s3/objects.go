package s3

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
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
			v = withoutAWSChunked(v)
		}
		if v != "" {
			out[name] = v
		}
	}
	return out
}

// withoutAWSChunked is a Content-Encoding without its aws-chunked coding,
// which describes the transfer and not the object; the codings left are
// kept byte for byte, as S3 gives them back.
func withoutAWSChunked(v string) string {
	if !strings.Contains(v, "aws-chunked") {
		return v
	}
	var kept []string
	for part := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(part) != "aws-chunked" {
			kept = append(kept, part)
		}
	}
	return strings.TrimSpace(strings.Join(kept, ","))
}

func checkKey(key string) error {
	if len(key) > meta.MaxKeyBytes {
		return errKeyTooLong
	}
	return nil
}

func (s *Server) putObject(w http.ResponseWriter, r *request) error {
	if err := checkKey(r.key); err != nil {
		return err
	}
	cond, err := writePrecondition(r.Header)
	if err != nil {
		return err
	}
	tags, err := headerTags(r.Header)
	if err != nil {
		return err
	}
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	o, _, err := s.objects.Put(r.Context(), objects.PutRequest{Bucket: r.bucket, Key: r.key, Body: r.Body,
		ContentMD5: r.Header.Get("Content-MD5"), ContentType: r.Header.Get("Content-Type"), Headers: headersOf(r.Header),
		Tags: tags, Precondition: cond})
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
	tagCount(w, o)
	for k, v := range o.Headers {
		if strings.HasPrefix(k, "x-amz-meta-") {
			// Under the lower-case name S3 answers with: clients that keep
			// a header's spelling (botocore) would give Foo for foo.
			h[k] = []string{v}
		} else {
			h.Set(k, v)
		}
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
			if k != "X-Amz-Request-Id" && k != "X-Request-Id" && k != "Vary" && !strings.HasPrefix(k, "Access-Control-") {
				delete(w.Header(), k) // by its stored spelling: Del would canonicalize it
			}
		}
		return err
	}
	defer d.Body.Close()
	w.WriteHeader(status)
	if b, ok := d.InMemory(); ok {
		// A small object verified whole: head and body leave in one write
		// on the gathering listener, as a REST download's do.
		_, err = httpx.WriteWhole(w, r.Request, b)
	} else {
		// A pooled buffer: io.Copy would allocate 32 KiB for every GET.
		buf := bufpool.Get()
		defer bufpool.Put(buf)
		_, err = io.CopyBuffer(w, d.Body, *buf)
	}
	if err != nil {
		s.log.Warn("S3 download aborted", "bucket", r.bucket, "key", r.key, "file", o.FileID, "err", err)
		panic(http.ErrAbortHandler) // the client must see a failed transfer, not a short success
	}
	return nil
}

func (s *Server) deleteObject(w http.ResponseWriter, r *request) error {
	if _, err := s.ownedBucket(r); err != nil {
		return err
	}
	// If-Match makes it a conditional delete: a key that holds nothing is
	// NoSuchKey, an object without the ETag named PreconditionFailed.
	cond, err := writePrecondition(http.Header{"If-Match": r.Header.Values("If-Match")})
	switch {
	case err != nil:
	case cond != nil:
		err = s.objects.DeleteIf(r.Context(), r.bucket, r.key, *cond)
	default:
		err = s.objects.Delete(r.Context(), r.bucket, r.key)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool
	Objects []struct {
		Key       string
		VersionID string `xml:"VersionId"`
		// ETag, when set, makes the entry's delete conditional, as an
		// If-Match on DeleteObject.
		ETag string
	} `xml:"Object"`
}

type deletedXML struct {
	Key       string
	VersionID string `xml:"VersionId,omitempty"`
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
		if err == nil && o.VersionID != "" && o.VersionID != nullVersion {
			err = errNoSuchVersion
		}
		switch {
		case err == nil && o.ETag != "":
			err = s.objects.DeleteIf(r.Context(), r.bucket, o.Key, meta.Precondition{ETags: objects.ETagList(o.ETag)})
		case err == nil:
			err = s.objects.Delete(r.Context(), r.bucket, o.Key)
		}
		if err != nil {
			e := toS3(err)
			out.Errors = append(out.Errors, deleteErrorXML{Key: o.Key, Code: e.Code, Message: e.Message})
			continue
		}
		if !req.Quiet {
			out.Deleted = append(out.Deleted, deletedXML{Key: o.Key, VersionID: o.VersionID})
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
// URL-encoded. dfs keeps one version of each object, the null one: a
// "?versionId=" naming another is refused, as a versionId parameter is,
// rather than copying the object as it is now.
func copySource(h string) (bucket, key string, err error) {
	h, query, _ := strings.Cut(h, "?")
	if v, _ := url.ParseQuery(query); v.Has("versionId") && v.Get("versionId") != nullVersion {
		return "", "", notImplemented("a versionId in x-amz-copy-source")
	}
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
	cond, err := writePrecondition(r.Header)
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
	contentType, headers, tags := src.ContentType, src.Headers, src.Tags
	switch r.Header.Get("X-Amz-Tagging-Directive") {
	case "", "COPY":
	case "REPLACE":
		if tags, err = headerTags(r.Header); err != nil {
			return err
		}
	default:
		return invalidArgument("x-amz-tagging-directive must be COPY or REPLACE")
	}
	switch d := r.Header.Get("X-Amz-Metadata-Directive"); d {
	case "", "COPY":
		if srcBucket == r.bucket && srcKey == r.key && r.Header.Get("X-Amz-Tagging-Directive") != "REPLACE" {
			return s3err(http.StatusBadRequest, "InvalidRequest", "This copy request is illegal because it is trying to copy an "+
				"object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
	case "REPLACE":
		contentType, headers = r.Header.Get("Content-Type"), headersOf(r.Header)
	default:
		return invalidArgument("x-amz-metadata-directive must be COPY or REPLACE")
	}
	// The destination's precondition, checked before the source is read;
	// the write that moves the key checks it again.
	if err := s.objects.Check(r.Context(), r.bucket, r.key, cond); err != nil {
		return err
	}
	d, err := s.o.Files.Open(r.Context(), src.FileID, byterange.Request{})
	if err != nil {
		return err
	}
	defer d.Body.Close()
	o, _, err := s.objects.Put(r.Context(), objects.PutRequest{Bucket: r.bucket, Key: r.key, Body: d.Body,
		ContentType: contentType, Headers: headers, Tags: tags, Precondition: cond})
	if err != nil {
		return err
	}
	writeXML(w, http.StatusOK, copyObjectResult{LastModified: s3Time(o.ModifiedAt), ETag: quote(o.ETag)})
	return nil
}
