package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/objects"
)

// Sessions is the file service's resumable uploads as S3 multipart uses
// them: a session holds numbered parts, each stored as chunks as it
// arrives, and completing it makes one file of the parts named.
type Sessions interface {
	CreateSession(ctx context.Context, fileName, contentType string) (sessionID string, err error)
	// PutPart stores one part (size -1 when unknown), replacing an earlier
	// part of the same number.
	PutPart(ctx context.Context, sessionID string, number int, body io.Reader, size int64) (Part, error)
	// Parts lists the parts received, by number.
	Parts(ctx context.Context, sessionID string) ([]Part, error)
	// CompleteSession makes the named parts, in that order, the new file.
	CompleteSession(ctx context.Context, sessionID string, parts []int) (fileID string, size int64, err error)
	AbortSession(ctx context.Context, sessionID string) error
}

// Part is one received part of a session.
type Part struct {
	Number    int
	SizeBytes int64
	MD5       string // hex
	CreatedAt time.Time
}

// S3's multipart limits.
const (
	minPartSize = 5 << 20 // every part but the last
	maxParts    = 10000
)

var (
	errNoSuchUpload = s3err(http.StatusNotFound, "NoSuchUpload",
		"The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	errInvalidPart = s3err(http.StatusBadRequest, "InvalidPart",
		"One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.")
	errInvalidPartOrder = s3err(http.StatusBadRequest, "InvalidPartOrder",
		"The list of parts was not in ascending order. The parts list must be specified in order by part number.")
	errEntityTooSmall = s3err(http.StatusBadRequest, "EntityTooSmall",
		"Your proposed upload is smaller than the minimum allowed object size: every part but the last must be at least 5 MiB.")
)

// multipartOp is the route of one of the multipart operations, answered
// 501 while no session service is wired in. The bucket is checked first
// either way.
func (s *Server) multipartOp(op string) (string, handler) {
	var run handler
	switch op {
	case "CreateMultipartUpload":
		run = s.createUpload
	case "UploadPart", "UploadPartCopy":
		run = func(w http.ResponseWriter, r *request) error { return s.uploadPart(w, r, op == "UploadPartCopy") }
	case "CompleteMultipartUpload":
		run = s.completeUpload
	case "AbortMultipartUpload":
		run = s.abortUpload
	case "ListParts":
		run = s.listParts
	default:
		run = s.listUploads
	}
	return op, func(w http.ResponseWriter, r *request) error {
		if _, err := s.ownedBucket(r); err != nil {
			return err
		}
		if s.o.Sessions == nil {
			return notImplemented(op + " (multipart upload)")
		}
		return run(w, r)
	}
}

type initiateResult struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ InitiateMultipartUploadResult"`
	Bucket   string
	Key      string
	UploadID string `xml:"UploadId"`
}

func (s *Server) createUpload(w http.ResponseWriter, r *request) error {
	if err := checkKey(r.key); err != nil {
		return err
	}
	tags, err := headerTags(r.Header)
	if err != nil {
		return err
	}
	sid, err := s.o.Sessions.CreateSession(r.Context(), path.Base(r.key), r.Header.Get("Content-Type"))
	if err != nil {
		return err
	}
	// A time-ordered id (UUIDv7): the index lists one key's uploads by id,
	// which is then the order they were started in, as S3 lists them.
	u := meta.Upload{ID: uuid.Must(uuid.NewV7()).String(), SessionID: sid, Bucket: r.bucket, Key: r.key, Owner: r.accessKey,
		ContentType: r.Header.Get("Content-Type"), Headers: headersOf(r.Header), Tags: tags}
	if err := s.o.Namespace.CreateUpload(r.Context(), &u); err != nil {
		_ = s.o.Sessions.AbortSession(context.WithoutCancel(r.Context()), sid)
		return err
	}
	s.log.Info("multipart upload started", "bucket", r.bucket, "key", r.key, "upload", u.ID, "session", sid)
	writeXML(w, http.StatusOK, initiateResult{Bucket: r.bucket, Key: r.key, UploadID: u.ID})
	return nil
}

// upload reads the request's uploadId, which must be an upload of its
// bucket and key.
func (s *Server) upload(r *request) (meta.Upload, error) {
	u, err := s.o.Namespace.GetUpload(r.Context(), r.URL.Query().Get("uploadId"))
	if errs.CodeOf(err) == errs.CodeMultipartNotFound || (err == nil && (u.Bucket != r.bucket || u.Key != r.key)) {
		return meta.Upload{}, errNoSuchUpload
	}
	return u, err
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyPartResult"`
	LastModified string
	ETag         string
}

func (s *Server) uploadPart(w http.ResponseWriter, r *request, copying bool) error {
	n, err := strconv.Atoi(r.URL.Query().Get("partNumber"))
	if err != nil || n < 1 || n > maxParts {
		return invalidArgument(fmt.Sprintf("Part number must be an integer between 1 and %d, inclusive", maxParts))
	}
	u, err := s.upload(r)
	if err != nil {
		return err
	}
	var body io.Reader
	size := r.ContentLength
	if copying {
		rc, length, err := s.copyRange(r)
		if err != nil {
			return err
		}
		defer rc.Close()
		body, size = rc, length
	} else if body, err = objects.DigestReader(r.Body, r.Header.Get("Content-MD5")); err != nil {
		return err
	}
	p, err := s.o.Sessions.PutPart(r.Context(), u.SessionID, n, body, size)
	if err != nil {
		return err
	}
	if copying {
		writeXML(w, http.StatusOK, copyPartResult{LastModified: s3Time(p.CreatedAt), ETag: quote(p.MD5)})
		return nil
	}
	w.Header().Set("ETag", quote(p.MD5))
	w.WriteHeader(http.StatusOK)
	return nil
}

// copyRange opens the bytes an UploadPartCopy names: its source object, or
// x-amz-copy-source-range of it.
func (s *Server) copyRange(r *request) (io.ReadCloser, int64, error) {
	srcBucket, srcKey, err := copySource(r.Header.Get("X-Amz-Copy-Source"))
	if err != nil {
		return nil, 0, err
	}
	if _, err := s.bucketFor(r.Context(), srcBucket, r.accessKey, r.admin); err != nil {
		return nil, 0, err
	}
	src, err := s.o.Namespace.GetObject(r.Context(), srcBucket, srcKey)
	if err != nil {
		return nil, 0, err
	}
	if err := conditions(r.Header, "X-Amz-Copy-Source-", src); err != nil {
		if err == errNotModified {
			return nil, 0, errPrecondition
		}
		return nil, 0, err
	}
	q := byterange.Request{}
	length := src.SizeBytes
	if h := r.Header.Get("X-Amz-Copy-Source-Range"); h != "" {
		rng, ok, err := byterange.Parse(h, src.SizeBytes)
		if err != nil || !ok {
			return nil, 0, invalidArgument("x-amz-copy-source-range must be bytes=first-last within the source object")
		}
		q.Range, length = rng.Header(), rng.Length
	}
	d, err := s.o.Files.Open(r.Context(), src.FileID, q)
	if err != nil {
		return nil, 0, err
	}
	return d.Body, length, nil
}

type completeRequest struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber int
		ETag       string
	} `xml:"Part"`
}

type completeResult struct {
	XMLName  xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CompleteMultipartUploadResult"`
	Location string
	Bucket   string
	Key      string
	ETag     string
}

// multipartETag is S3's ETag of a multipart object: the MD5 of the parts'
// binary MD5s, then "-" and the number of parts.
func multipartETag(md5s []string) (string, error) {
	h := md5.New()
	for _, m := range md5s {
		b, err := hex.DecodeString(m)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(len(md5s)), nil
}

func (s *Server) completeUpload(w http.ResponseWriter, r *request) error {
	var req completeRequest
	if err := readXML(r.Body, &req); err != nil {
		return err
	}
	if len(req.Parts) == 0 {
		return errMalformedXML
	}
	cond, err := writePrecondition(r.Header)
	if err != nil {
		return err
	}
	u, err := s.upload(r)
	if err == errNoSuchUpload {
		return s.completedBefore(w, r, req)
	}
	if err != nil {
		return err
	}
	// A precondition known not to hold is answered while the upload and
	// its parts are still there, for the client to abort or complete
	// elsewhere; the key's move checks it again.
	if err := s.objects.Check(r.Context(), u.Bucket, u.Key, cond); err != nil {
		return err
	}
	received, err := s.o.Sessions.Parts(r.Context(), u.SessionID)
	if err != nil {
		return err
	}
	byNumber := map[int]Part{}
	for _, p := range received {
		byNumber[p.Number] = p
	}
	numbers := make([]int, len(req.Parts))
	md5s := make([]string, len(req.Parts))
	for i := 1; i < len(req.Parts); i++ {
		if req.Parts[i].PartNumber <= req.Parts[i-1].PartNumber {
			return errInvalidPartOrder
		}
	}
	for i, p := range req.Parts {
		got, ok := byNumber[p.PartNumber]
		if !ok || strings.Trim(p.ETag, `"`) != got.MD5 {
			return errInvalidPart
		}
		if i < len(req.Parts)-1 && got.SizeBytes < minPartSize {
			return errEntityTooSmall
		}
		numbers[i], md5s[i] = p.PartNumber, got.MD5
	}
	etag, err := multipartETag(md5s)
	if err != nil {
		return err
	}
	fileID, size, err := s.o.Sessions.CompleteSession(r.Context(), u.SessionID, numbers)
	if errs.CodeOf(err) == errs.CodeUploadNotFound {
		return s.completedBefore(w, r, req) // a Complete sent twice at once
	}
	if err != nil {
		return err
	}
	contentType := u.ContentType
	if contentType == "" {
		contentType = objects.DefaultContentType
	}
	o := meta.Object{Bucket: u.Bucket, Key: u.Key, FileID: fileID, SizeBytes: size, ETag: etag, ContentType: contentType, Headers: u.Headers,
		Tags: u.Tags, Precondition: cond}
	if err := s.objects.Bind(r.Context(), &o); err != nil {
		if errors.Is(err, meta.ErrPreconditionFailed) || errs.CodeOf(err) == errs.CodeObjectNotFound {
			// Another write of the key came between the check above and
			// the move: the parts made a file, which Bind deleted, so the
			// upload is gone with them.
			if derr := s.o.Namespace.DeleteUpload(r.Context(), u.ID); derr != nil {
				s.log.Warn("the record of an upload whose completion lost its precondition was not removed", "upload", u.ID, "err", derr)
			}
		}
		return err
	}
	if err := s.o.Namespace.DeleteUpload(r.Context(), u.ID); err != nil {
		s.log.Warn("a completed upload's record was not removed", "upload", u.ID, "err", err)
	}
	s.log.Info("multipart upload completed", "bucket", u.Bucket, "key", u.Key, "upload", u.ID, "parts", len(numbers), "bytes", size)
	writeCompleted(w, u.Bucket, u.Key, etag)
	return nil
}

// completedBefore answers a Complete whose upload is gone: a retry of a
// Complete that succeeded (an SDK sends one when the first answer was
// lost) is answered the same success while the key still holds what that
// Complete made — an object whose ETag is the one the parts named give,
// which only the same parts' bytes have. Anything else is NoSuchUpload.
func (s *Server) completedBefore(w http.ResponseWriter, r *request, req completeRequest) error {
	md5s := make([]string, len(req.Parts))
	for i, p := range req.Parts {
		md5s[i] = strings.Trim(p.ETag, `"`)
		if len(md5s[i]) != 2*md5.Size {
			return errNoSuchUpload
		}
	}
	etag, err := multipartETag(md5s)
	if err != nil {
		return errNoSuchUpload
	}
	o, err := s.o.Namespace.GetObject(r.Context(), r.bucket, r.key)
	if err != nil || o.ETag != etag {
		return errNoSuchUpload
	}
	s.log.Info("multipart upload completed again: a retry answered as the first", "bucket", r.bucket, "key", r.key,
		"upload", r.URL.Query().Get("uploadId"))
	writeCompleted(w, r.bucket, r.key, etag)
	return nil
}

func writeCompleted(w http.ResponseWriter, bucket, key, etag string) {
	writeXML(w, http.StatusOK, completeResult{Location: "/" + bucket + "/" + key, Bucket: bucket, Key: key, ETag: quote(etag)})
}

func (s *Server) abortUpload(w http.ResponseWriter, r *request) error {
	u, err := s.upload(r)
	if err != nil {
		return err
	}
	if err := s.dropUpload(r.Context(), u); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// dropUpload aborts an upload's session, its parts with it, and forgets
// the upload; either gone already is fine.
func (s *Server) dropUpload(ctx context.Context, u meta.Upload) error {
	if s.o.Sessions != nil {
		if err := s.o.Sessions.AbortSession(ctx, u.SessionID); err != nil && !errs.Is(err, errs.NotFound) {
			return err
		}
	}
	if err := s.o.Namespace.DeleteUpload(ctx, u.ID); err != nil && errs.CodeOf(err) != errs.CodeMultipartNotFound {
		return err
	}
	return nil
}

type partXML struct {
	PartNumber   int
	LastModified string
	ETag         string
	Size         int64
}

type listPartsResult struct {
	XMLName              xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListPartsResult"`
	Bucket               string
	Key                  string
	UploadID             string `xml:"UploadId"`
	Initiator            owner
	Owner                owner
	StorageClass         string
	PartNumberMarker     int
	NextPartNumberMarker int
	MaxParts             int
	IsTruncated          bool
	Parts                []partXML `xml:"Part"`
}

// intQuery reads a non-negative integer query parameter, def when absent.
func intQuery(r *request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalidArgument(name + " must be a non-negative integer")
	}
	return n, nil
}

func (s *Server) listParts(w http.ResponseWriter, r *request) error {
	u, err := s.upload(r)
	if err != nil {
		return err
	}
	marker, err := intQuery(r, "part-number-marker", 0)
	if err != nil {
		return err
	}
	limit, err := intQuery(r, "max-parts", 1000)
	if err != nil {
		return err
	}
	limit = min(limit, 1000)
	parts, err := s.o.Sessions.Parts(r.Context(), u.SessionID)
	if err != nil {
		return err
	}
	parts = slices.DeleteFunc(parts, func(p Part) bool { return p.Number <= marker })
	out := listPartsResult{Bucket: u.Bucket, Key: u.Key, UploadID: u.ID, Initiator: owner{u.Owner, u.Owner}, Owner: owner{u.Owner, u.Owner},
		StorageClass: "STANDARD", PartNumberMarker: marker, MaxParts: limit, Parts: []partXML{}}
	for _, p := range parts {
		if len(out.Parts) == limit {
			out.IsTruncated = true
			break
		}
		out.Parts = append(out.Parts, partXML{PartNumber: p.Number, LastModified: s3Time(p.CreatedAt), ETag: quote(p.MD5), Size: p.SizeBytes})
		out.NextPartNumberMarker = p.Number
	}
	writeXML(w, http.StatusOK, out)
	return nil
}

type uploadXML struct {
	Key          string
	UploadID     string `xml:"UploadId"`
	Initiator    owner
	Owner        owner
	StorageClass string
	Initiated    string
}

type listUploadsResult struct {
	XMLName            xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListMultipartUploadsResult"`
	Bucket             string
	KeyMarker          string
	UploadIDMarker     string `xml:"UploadIdMarker"`
	NextKeyMarker      string
	NextUploadIDMarker string `xml:"NextUploadIdMarker"`
	Prefix             string
	Delimiter          string `xml:",omitempty"`
	MaxUploads         int
	EncodingType       string `xml:",omitempty"`
	IsTruncated        bool
	Uploads            []uploadXML `xml:"Upload"`
	CommonPrefixes     []prefixXML
}

// uploadsPage is one page of ListMultipartUploads: uploads and common
// prefixes in key order, and where the next page starts when truncated.
type uploadsPage struct {
	uploads         []meta.Upload
	prefixes        []string
	truncated       bool
	nextKey, nextID string
}

// uploadsAfter pages through the (bucket, key, upload id) index as S3 lists
// uploads: after the upload (keyMarker, idMarker), or after every upload of
// keyMarker when no id marker is given; with a delimiter, the keys that hold
// it after the prefix roll up into common prefixes, each counted as one
// entry of limit and skipped past in one seek rather than read. A key
// marker that is such a common prefix (the NextKeyMarker of a page that
// ended on one) continues past every key under it.
func uploadsAfter(ctx context.Context, ns meta.Namespace, bucket, prefix, delimiter, keyMarker, idMarker string, limit int) (uploadsPage, error) {
	var page uploadsPage
	if limit <= 0 {
		return page, nil
	}
	afterKey, afterID := keyMarker, idMarker
	switch {
	case keyMarker == "":
		afterID = "" // S3 ignores an upload id marker without a key marker
	case delimiter != "" && commonPrefix(keyMarker, prefix, delimiter) == keyMarker:
		afterKey, afterID = pastPrefix(keyMarker), ""
	case idMarker == "":
		afterID = "~" // above every upload id (UUIDs): every upload of the marker key is passed
	}
	count := 0
next:
	for {
		// One more than is left, to learn whether the listing goes on.
		batch, err := ns.UploadsAfter(ctx, bucket, prefix, afterKey, afterID, limit-count+1)
		if err != nil {
			return uploadsPage{}, err
		}
		for _, u := range batch {
			if count == limit {
				page.truncated = true
				return page, nil
			}
			count++
			if cp := commonPrefix(u.Key, prefix, delimiter); cp != "" {
				page.prefixes = append(page.prefixes, cp)
				page.nextKey, page.nextID = cp, ""
				afterKey, afterID = pastPrefix(cp), ""
				continue next
			}
			page.uploads = append(page.uploads, u)
			page.nextKey, page.nextID = u.Key, u.ID
		}
		// A batch read whole without a common prefix was shorter than
		// asked for: the range holds nothing more.
		return page, nil
	}
}

// commonPrefix is the common prefix key rolls up into under prefix and
// delimiter: up to and including the delimiter's first occurrence after
// the prefix; "" when there is none (or no delimiter).
func commonPrefix(key, prefix, delimiter string) string {
	if delimiter == "" || !strings.HasPrefix(key, prefix) {
		return ""
	}
	i := strings.Index(key[len(prefix):], delimiter)
	if i < 0 {
		return ""
	}
	return key[:len(prefix)+i+len(delimiter)]
}

// pastPrefix sorts after every key that starts with p: keys are UTF-8, in
// which the byte 0xff never occurs.
func pastPrefix(p string) string { return p + "\xff" }

func (s *Server) listUploads(w http.ResponseWriter, r *request) error {
	q := r.URL.Query()
	limit, err := intQuery(r, "max-uploads", 1000)
	if err != nil {
		return err
	}
	limit = min(limit, 1000)
	enc, err := encodingType(q.Get("encoding-type"))
	if err != nil {
		return err
	}
	out := listUploadsResult{Bucket: r.bucket, KeyMarker: q.Get("key-marker"), UploadIDMarker: q.Get("upload-id-marker"),
		Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), MaxUploads: limit, EncodingType: enc}
	page, err := uploadsAfter(r.Context(), s.o.Namespace, r.bucket, out.Prefix, out.Delimiter, out.KeyMarker, out.UploadIDMarker, limit)
	if err != nil {
		return err
	}
	esc := keyEncoder(enc)
	for _, u := range page.uploads {
		out.Uploads = append(out.Uploads, uploadXML{Key: esc(u.Key), UploadID: u.ID, Initiator: owner{u.Owner, u.Owner},
			Owner: owner{u.Owner, u.Owner}, StorageClass: "STANDARD", Initiated: s3Time(u.CreatedAt)})
	}
	for _, p := range page.prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{Prefix: esc(p)})
	}
	if out.IsTruncated = page.truncated; page.truncated {
		out.NextKeyMarker, out.NextUploadIDMarker = esc(page.nextKey), page.nextID
	}
	out.KeyMarker, out.Prefix, out.Delimiter = esc(out.KeyMarker), esc(out.Prefix), esc(out.Delimiter)
	writeXML(w, http.StatusOK, out)
	return nil
}
