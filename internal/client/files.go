package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/bufpool"
	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
)

// UploadOptions are the optional parts of an upload.
type UploadOptions struct {
	// ContentType is the file part's Content-Type. Default: guessed from
	// the name's extension, else application/octet-stream.
	ContentType string
	// IdempotencyKey, when set, is sent as Idempotency-Key: a repeat with
	// the same key and bytes answers the first upload's result.
	IdempotencyKey string
}

// Upload stores the bytes of r as a file called name. When size is known
// (>= 0) exactly size bytes are read from r, fewer being an error, and the
// request declares its exact Content-Length, so a coordinator can refuse an
// oversize file before any byte is sent; with size < 0 r is read to its end
// and the body is sent chunked. The body is streamed: r is read as the
// connection takes the bytes, never collected in memory. Upload does not
// close r.
func (c *Client) Upload(ctx context.Context, name string, r io.Reader, size int64, opts UploadOptions) (UploadResult, error) {
	ctype := opts.ContentType
	if ctype == "" {
		ctype = mime.TypeByExtension(filepath.Ext(name))
	}
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	head, tail, boundary, err := multipartFraming(name, ctype)
	if err != nil {
		return UploadResult{}, err
	}
	// The multipart framing around the file is a few hundred bytes that can
	// be laid out in advance; chaining readers instead of piping a
	// multipart.Writer gives the same streaming without a goroutine, and
	// makes the exact length plain arithmetic.
	src := &exactReader{r: r, remaining: size}
	body := io.MultiReader(bytes.NewReader(head), src, bytes.NewReader(tail))
	req, err := c.newRequest(ctx, http.MethodPost, "/api/files", nil, body)
	if err != nil {
		return UploadResult{}, err
	}
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
	if opts.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", opts.IdempotencyKey)
	}
	req.ContentLength = -1
	if size >= 0 {
		req.ContentLength = int64(len(head)) + size + int64(len(tail))
	}
	resp, err := c.send(req, src.failure)
	if err != nil {
		return UploadResult{}, err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return UploadResult{}, readAPIError(resp)
	}
	defer resp.Body.Close()
	var res UploadResult
	if err := decodeBody(resp, &res); err != nil {
		return UploadResult{}, err
	}
	res.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	return res, nil
}

// multipartFraming lays out what comes before and after the file's bytes in
// a multipart/form-data body whose only part is "file".
func multipartFraming(name, ctype string) (head, tail []byte, boundary string, err error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	disp := mime.FormatMediaType("form-data", map[string]string{"name": "file", "filename": name})
	if disp == "" {
		return nil, nil, "", errs.E(errs.Invalid, "file name %q cannot be sent in a multipart header", name)
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", disp)
	h.Set("Content-Type", ctype)
	if _, err := mw.CreatePart(h); err != nil {
		return nil, nil, "", errs.Wrap(errs.Other, err, "lay out the multipart body")
	}
	head = bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := mw.Close(); err != nil {
		return nil, nil, "", errs.Wrap(errs.Other, err, "lay out the multipart body")
	}
	return head, bytes.Clone(buf.Bytes()), mw.Boundary(), nil
}

// exactReader passes on at most remaining bytes of r (all of r when
// remaining < 0) and turns an early end into an error, which it also keeps:
// the transport reads the body on a goroutine of its own and reports a
// failed read in its own words.
type exactReader struct {
	r         io.Reader
	remaining int64

	mu  sync.Mutex
	err error
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.remaining == 0 {
		return 0, io.EOF
	}
	if e.remaining > 0 && int64(len(p)) > e.remaining {
		p = p[:e.remaining]
	}
	n, err := e.r.Read(p)
	if e.remaining > 0 {
		e.remaining -= int64(n)
	}
	switch {
	case err == io.EOF && e.remaining > 0:
		return n, e.fail(errs.E(errs.Invalid, "the file ended %d bytes short of its declared size", e.remaining))
	case err == io.EOF:
		return n, io.EOF
	case err != nil:
		return n, e.fail(errs.Wrap(errs.Other, err, "read the file to upload"))
	}
	return n, nil
}

func (e *exactReader) fail(err error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.err = err
	return err
}

func (e *exactReader) failure() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// DownloadOptions are the optional parts of a download.
type DownloadOptions struct {
	// Range is sent as the Range header ("bytes=0-99"). A partial answer
	// (206) is not checked against the file's checksum.
	Range string
}

// DownloadInfo describes a finished download.
type DownloadInfo struct {
	Status    int    // 200, or 206 for a range
	ServedBy  string // X-Served-By-Node: the node whose copy was sent; empty when FromCache
	FromCache bool   // X-Served-From: content-cache: the coordinator answered from its content cache
	Size      int64  // the whole file's size in bytes
	Bytes     int64  // how many bytes were written to w
	Checksum  string // the file's SHA-256 (hex) as the coordinator declared it
	Verified  bool   // the bytes written hash to Checksum (full downloads only)
	// Direct says every byte came straight from the storage nodes
	// (DownloadDirect); ServedBy is then the host of the first blob's node.
	Direct       bool
	ContentType  string
	FileName     string // from Content-Disposition
	ContentRange string // for a 206
	LastModified time.Time
}

// Download writes the file's bytes to w. For a full download the bytes are
// hashed as they pass and compared with the SHA-256 the coordinator declares
// (X-Checksum-Sha256, else the ETag): a mismatch, or a body shorter than its
// Content-Length, is an error, and then w has received bytes that must be
// thrown away. A failure before the first byte leaves w untouched.
func (c *Client) Download(ctx context.Context, id string, w io.Writer, opts DownloadOptions) (DownloadInfo, error) {
	if err := checkID("file", id); err != nil {
		return DownloadInfo{}, err
	}
	req, err := c.newRequest(ctx, http.MethodGet, pathOf("api", "files", id), nil, nil)
	if err != nil {
		return DownloadInfo{}, err
	}
	req.Header.Set("Accept", "*/*")
	if opts.Range != "" {
		req.Header.Set("Range", opts.Range)
	}
	resp, err := c.send(req, nil)
	if err != nil {
		return DownloadInfo{}, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		return DownloadInfo{}, readAPIError(resp)
	}
	defer resp.Body.Close()

	info := downloadInfo(resp)
	full := resp.StatusCode == http.StatusOK
	hash := sha256.New()
	dst := &writeTracker{w: w}
	var sink io.Writer = dst
	if full {
		sink = io.MultiWriter(dst, hash)
	}
	buf := bufpool.Get()
	n, err := io.CopyBuffer(sink, resp.Body, *buf)
	bufpool.Put(buf)
	info.Bytes = n
	switch {
	case dst.err != nil:
		return info, errs.Wrap(errs.Other, dst.err, "write the download of %s", id)
	case err != nil && ctx.Err() != nil:
		return info, errs.Wrap(errs.Other, ctx.Err(), "download of %s", id)
	case err != nil:
		return info, errs.Wrap(errs.Unavailable, err, "the download of %s broke off after %d of %d bytes", id, n, resp.ContentLength)
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return info, errs.E(errs.Unavailable, "the download of %s ended after %d of %d bytes", id, n, resp.ContentLength)
	}
	if full && info.Checksum != "" {
		got := hex.EncodeToString(hash.Sum(nil))
		if !strings.EqualFold(got, info.Checksum) {
			return info, errs.E(errs.Corrupt, "the bytes of %s hash to %s, not to the declared %s", id, got, info.Checksum)
		}
		info.Verified = true
	}
	return info, nil
}

func downloadInfo(resp *http.Response) DownloadInfo {
	h := resp.Header
	info := DownloadInfo{
		Status:       resp.StatusCode,
		ServedBy:     h.Get("X-Served-By-Node"),
		FromCache:    h.Get("X-Served-From") == "content-cache",
		Size:         resp.ContentLength,
		Checksum:     h.Get("X-Checksum-Sha256"),
		ContentType:  h.Get("Content-Type"),
		ContentRange: h.Get("Content-Range"),
	}
	if info.Checksum == "" {
		info.Checksum = strings.Trim(strings.TrimPrefix(h.Get("ETag"), "W/"), `"`)
	}
	if _, params, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil {
		info.FileName = params["filename"]
	}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		info.LastModified = t
	}
	if _, size, ok := byterange.ParseContentRange(info.ContentRange); ok && size >= 0 {
		info.Size = size
	}
	return info
}

// writeTracker remembers the destination's own failure, so that it is not
// mistaken for a broken transfer.
type writeTracker struct {
	w   io.Writer
	err error
}

func (t *writeTracker) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil {
		t.err = err
	}
	return n, err
}

// Metadata returns a file's metadata with every copy's placement.
func (c *Client) Metadata(ctx context.Context, id string) (File, error) {
	if err := checkID("file", id); err != nil {
		return File{}, err
	}
	var f File
	_, err := c.doJSON(ctx, http.MethodGet, pathOf("api", "files", id, "metadata"), nil, nil, &f)
	return f, err
}

// List returns one page of files, newest first. page counts from 0; size 0
// leaves the page size to the coordinator (20); statuses, when given, select
// files by status (PENDING and DELETED files are listed only when asked for).
func (c *Client) List(ctx context.Context, page, size int, statuses []FileStatus) (FileList, error) {
	q := url.Values{"page": {strconv.Itoa(page)}}
	if size != 0 {
		q.Set("size", strconv.Itoa(size))
	}
	if len(statuses) > 0 {
		s := make([]string, len(statuses))
		for i, st := range statuses {
			s[i] = string(st)
		}
		q.Set("status", strings.Join(s, ","))
	}
	var l FileList
	_, err := c.doJSON(ctx, http.MethodGet, "/api/files", q, nil, &l)
	return l, err
}

// Delete deletes a file. The result is Complete when every copy is gone
// (204); otherwise PendingNodes lists the holders that could not be reached,
// whose copies are removed when they return (202). Either way the file is
// gone for every reader.
func (c *Client) Delete(ctx context.Context, id string) (DeleteResult, error) {
	if err := checkID("file", id); err != nil {
		return DeleteResult{}, err
	}
	var res DeleteResult
	status, err := c.doJSON(ctx, http.MethodDelete, pathOf("api", "files", id), nil, nil, &res)
	if err != nil {
		return DeleteResult{}, err
	}
	if status == http.StatusNoContent {
		res = DeleteResult{FileID: id, Status: FileDeleted, Complete: true}
	}
	return res, nil
}

// Verify re-hashes every copy of a file on its node; bad and missing copies
// are rebuilt before the answer.
func (c *Client) Verify(ctx context.Context, id string) (VerifyResult, error) {
	if err := checkID("file", id); err != nil {
		return VerifyResult{}, err
	}
	var res VerifyResult
	_, err := c.doJSON(ctx, http.MethodPost, pathOf("api", "files", id, "verify"), nil, nil, &res)
	return res, err
}

// checkID refuses an empty id, which would address another route.
func checkID(what, id string) error {
	if id == "" {
		return errs.E(errs.Invalid, "a %s id is required", what)
	}
	return nil
}
