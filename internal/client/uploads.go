package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// UploadSession is a resumable upload (POST /api/uploads).
type UploadSession struct {
	UploadID         string    `json:"uploadId"`
	FileName         string    `json:"fileName"`
	ContentType      string    `json:"contentType"`
	ExpectedChecksum string    `json:"expectedChecksum,omitempty"`
	CreatedAt        time.Time `json:"createdAt"`
	ExpiresAt        time.Time `json:"expiresAt"`
	// ChunkSize is the coordinator's CHUNK_SIZE (0 from one that does not
	// say): a file at or below it is stored whole by one upload.
	ChunkSize int64 `json:"chunkSize,omitempty"`
}

// UploadPart is one part a session has received.
type UploadPart struct {
	PartNumber int       `json:"partNumber"`
	SizeBytes  int64     `json:"sizeBytes"`
	Checksum   string    `json:"checksum"`
	MD5        string    `json:"md5,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// UploadDetail is a session with the parts received so far.
type UploadDetail struct {
	UploadID         string       `json:"uploadId"`
	FileName         string       `json:"fileName"`
	ContentType      string       `json:"contentType"`
	ExpectedChecksum string       `json:"expectedChecksum,omitempty"`
	CreatedAt        time.Time    `json:"createdAt"`
	ExpiresAt        time.Time    `json:"expiresAt"`
	ChunkSize        int64        `json:"chunkSize,omitempty"` // as UploadSession's
	Parts            []UploadPart `json:"parts"`
}

// CreateUpload starts an upload session for a file called name; checksum,
// when not empty, is the whole file's SHA-256, checked at completion.
func (c *Client) CreateUpload(ctx context.Context, name, contentType, checksum string) (UploadSession, error) {
	var out UploadSession
	in := map[string]string{"fileName": name, "contentType": contentType, "checksum": checksum}
	_, err := c.doJSON(ctx, http.MethodPost, "/api/uploads", nil, in, &out)
	return out, err
}

// GetUpload returns a session and the parts it has received.
func (c *Client) GetUpload(ctx context.Context, id string) (UploadDetail, error) {
	var out UploadDetail
	_, err := c.doJSON(ctx, http.MethodGet, pathOf("api", "uploads", id), nil, nil, &out)
	return out, err
}

// PartOptions are a part's options.
type PartOptions struct {
	// SkipMD5 asks the coordinator not to compute the part's MD5
	// (UploadPart.MD5 stays empty), which saves it a hash pass.
	SkipMD5 bool
}

// PutPart sends size bytes of r as part number of session id.
func (c *Client) PutPart(ctx context.Context, id string, number int, r io.Reader, size int64) (UploadPart, error) {
	return c.PutPartWith(ctx, id, number, r, size, PartOptions{})
}

// PutPartWith is PutPart with options.
func (c *Client) PutPartWith(ctx context.Context, id string, number int, r io.Reader, size int64, opt PartOptions) (UploadPart, error) {
	src := &exactReader{r: r, remaining: size}
	var q url.Values
	if opt.SkipMD5 {
		q = url.Values{"md5": {"false"}}
	}
	req, err := c.newRequest(ctx, http.MethodPut, pathOf("api", "uploads", id, "parts", strconv.Itoa(number)), q, src)
	if err != nil {
		return UploadPart{}, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.ContentLength = size
	resp, err := c.send(req, src.failure)
	if err != nil {
		return UploadPart{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return UploadPart{}, readAPIError(resp)
	}
	defer resp.Body.Close()
	var out UploadPart
	return out, decodeBody(resp, &out)
}

// CompleteUpload makes every part received one file.
func (c *Client) CompleteUpload(ctx context.Context, id string) (UploadResult, error) {
	var out UploadResult
	_, err := c.doJSON(ctx, http.MethodPost, pathOf("api", "uploads", id, "complete"), nil, map[string]any{}, &out)
	return out, err
}

// AbortUpload ends a session and deletes its parts.
func (c *Client) AbortUpload(ctx context.Context, id string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, pathOf("api", "uploads", id), url.Values(nil), nil, nil)
	if err != nil && !errs.Is(err, errs.NotFound) {
		return err
	}
	return nil
}
