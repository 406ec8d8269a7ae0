package client

import (
	"context"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// Bucket is a bucket of the S3 namespace.
type Bucket struct {
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"createdAt"`
}

// Object is a named object: a key of a bucket and the file holding it.
type Object struct {
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	FileID      string    `json:"fileId"`
	SizeBytes   int64     `json:"sizeBytes"`
	ETag        string    `json:"etag"`
	ContentType string    `json:"contentType"`
	ModifiedAt  time.Time `json:"modifiedAt"`
}

// ObjectList is one page of a bucket's keys.
type ObjectList struct {
	Objects   []Object `json:"objects"`
	Prefixes  []string `json:"prefixes"`
	Truncated bool     `json:"truncated"`
	Next      string   `json:"next,omitempty"`
}

// PutObjectResult is the upload of a named object.
type PutObjectResult struct {
	UploadResult
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	ETag   string `json:"etag"`
}

// ListQuery selects a page of keys.
type ListQuery struct {
	Prefix, Delimiter, After string
	Limit                    int // 0: the coordinator's default (1000)
}

// CreateBucket creates a bucket (PUT /api/buckets/{bucket}).
func (c *Client) CreateBucket(ctx context.Context, name string) (Bucket, error) {
	var out Bucket
	_, err := c.doJSON(ctx, http.MethodPut, pathOf("api", "buckets", name), nil, nil, &out)
	return out, err
}

// Buckets lists the buckets the key may use.
func (c *Client) Buckets(ctx context.Context) ([]Bucket, error) {
	var out []Bucket
	_, err := c.doJSON(ctx, http.MethodGet, "/api/buckets", nil, nil, &out)
	return out, err
}

// ListObjects reads one page of a bucket's keys.
func (c *Client) ListObjects(ctx context.Context, bucket string, q ListQuery) (ObjectList, error) {
	v := url.Values{}
	for k, val := range map[string]string{"prefix": q.Prefix, "delimiter": q.Delimiter, "after": q.After} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out ObjectList
	_, err := c.doJSON(ctx, http.MethodGet, pathOf("api", "buckets", bucket, "objects"), v, nil, &out)
	return out, err
}

// Object finds one key, by a listing that starts at it.
func (c *Client) Object(ctx context.Context, bucket, key string) (Object, error) {
	page, err := c.ListObjects(ctx, bucket, ListQuery{Prefix: key, Limit: 1})
	if err != nil {
		return Object{}, err
	}
	if len(page.Objects) == 0 || page.Objects[0].Key != key {
		return Object{}, errs.WithCode(errs.NotFound, errs.CodeObjectNotFound, nil, "object %s/%s not found", bucket, key)
	}
	return page.Objects[0], nil
}

// PutObject stores the bytes of r (size of them, or to its end when size
// < 0) under bucket/key, replacing what the key held.
func (c *Client) PutObject(ctx context.Context, bucket, key string, r io.Reader, size int64, contentType string) (PutObjectResult, error) {
	if contentType == "" {
		contentType = mime.TypeByExtension(filepath.Ext(key))
	}
	src := &exactReader{r: r, remaining: size}
	req, err := c.newRequest(ctx, http.MethodPut, pathOf("api", "buckets", bucket, "object"), url.Values{"key": {key}}, src)
	if err != nil {
		return PutObjectResult{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.ContentLength = size
	resp, err := c.send(req, src.failure)
	if err != nil {
		return PutObjectResult{}, err
	}
	if resp.StatusCode != http.StatusCreated {
		return PutObjectResult{}, readAPIError(resp)
	}
	defer resp.Body.Close()
	var out PutObjectResult
	return out, decodeBody(resp, &out)
}

// DeleteObject removes a key and its file.
func (c *Client) DeleteObject(ctx context.Context, bucket, key string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, pathOf("api", "buckets", bucket, "object"), url.Values{"key": {key}}, nil, nil)
	return err
}
