package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/s3"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// memFiles is a file service that keeps files in memory, each also
// recorded in the store so that objects can refer to it.
type memFiles struct {
	store *sqlite.Store
	mu    sync.Mutex
	data  map[string][]byte
}

func (m *memFiles) Upload(ctx context.Context, req files.UploadRequest) (files.UploadResult, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return files.UploadResult{}, errs.Wrap(errs.Invalid, err, "read upload body")
	}
	id := uuid.NewString()
	rec := &meta.FileRecord{File: meta.File{ID: id, Name: req.FileName, ContentType: req.ContentType, SizeBytes: int64(len(b)),
		Status: meta.FileActive, ReplicationFactor: 1}}
	if err := m.store.CreateFile(ctx, rec); err != nil {
		return files.UploadResult{}, err
	}
	m.mu.Lock()
	m.data[id] = b
	m.mu.Unlock()
	return files.UploadResult{FileID: id, SizeBytes: int64(len(b))}, nil
}

func (m *memFiles) Open(_ context.Context, id string, q byterange.Request) (*files.Download, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.data[id]
	if !ok {
		return nil, errs.E(errs.NotFound, "no file %s", id)
	}
	if r, ok, err := byterange.Parse(q.Range, int64(len(b))); err != nil {
		return nil, err
	} else if ok {
		b = b[r.Start : r.Start+r.Length]
	}
	return &files.Download{Body: io.NopCloser(bytes.NewReader(b))}, nil
}

func (m *memFiles) Delete(ctx context.Context, id string) (files.DeleteResult, error) {
	m.mu.Lock()
	delete(m.data, id)
	m.mu.Unlock()
	return files.DeleteResult{}, m.store.DeleteFile(ctx, id)
}

type oneKey struct{}

func (oneKey) Secret(_ context.Context, ak string) (string, error) {
	if ak != "AK" {
		return "", sigv4.ErrUnknownKey
	}
	return "SECRET-KEY", nil
}
func (oneKey) IsAdmin(context.Context, string) bool { return true }

func newServer(t *testing.T, region, domain string) (*httptest.Server, *memFiles) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "m.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	mf := &memFiles{store: store, data: map[string][]byte{}}
	srv := httptest.NewServer(s3.New(s3.Options{Files: mf, Namespace: store, Keys: oneKey{}, Region: region, Domain: domain}))
	t.Cleanup(srv.Close)
	return srv, mf
}

// call sends a signed request; hdr are extra headers, as name, value pairs.
func call(t *testing.T, srv *httptest.Server, method, host, path, region string, body []byte, hdr ...string) (int, string) {
	t.Helper()
	sum := sha256.Sum256(body)
	req := signed(t, method, srv.URL+path, region, bytes.NewReader(body), hex.EncodeToString(sum[:]), hdr...)
	if host != "" {
		req.Host = host
		sign(t, req, region, hex.EncodeToString(sum[:]))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// signed is a request signed with Signature V4 over payload (a hex
// SHA-256, or UNSIGNED-PAYLOAD).
func signed(t *testing.T, method, url, region string, body io.Reader, payload string, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	sign(t, req, region, payload)
	return req
}

func sign(t *testing.T, req *http.Request, region, payload string) {
	t.Helper()
	req.Header.Set("X-Amz-Content-Sha256", payload)
	require.NoError(t, v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: "AK", SecretAccessKey: "SECRET-KEY"}, req, payload, "s3", region, time.Now()))
}

// TestVirtualHostedAddressing shows S3_DOMAIN's effect: with it, the host
// names the bucket; path style keeps working beside it.
func TestVirtualHostedAddressing(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "s3.example.test")
	status, body := call(t, srv, http.MethodPut, "media.s3.example.test", "/", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, srv, http.MethodPut, "media.s3.example.test:9000", "/dir/hello.txt", "us-east-1", []byte("hi"))
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, srv, http.MethodGet, "", "/media/dir/hello.txt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "hi", body, "the object the virtual host wrote is read by path")
	status, body = call(t, srv, http.MethodGet, "s3.example.test", "/media?list-type=2", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<Key>dir/hello.txt</Key>", "the bare domain is path style")

	plain, _ := newServer(t, "us-east-1", "")
	status, body = call(t, plain, http.MethodPut, "media.s3.example.test", "/", "us-east-1", nil)
	require.Equal(t, http.StatusNotImplemented, status, "without S3_DOMAIN the host is not a bucket: %s", body)
}

// TestRegionIsChecked shows S3_REGION's effect: requests signed for another
// region are refused.
func TestRegionIsChecked(t *testing.T) {
	srv, _ := newServer(t, "eu-west-3", "")
	status, body := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "<Code>AuthorizationHeaderMalformed</Code>")
	require.Contains(t, body, "<Region>eu-west-3</Region>", "the region to sign for, which s3cmd reads to sign again")
	status, body = call(t, srv, http.MethodPut, "", "/bkt", "eu-west-3", nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, srv, http.MethodGet, "", "/bkt?location", "eu-west-3", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, ">eu-west-3</LocationConstraint>")
}

// TestOverwriteDeletesTheOldFile checks that a key's earlier file is
// deleted once the key points at the new one, and that a failed upload
// (a body that does not match its signed hash) leaves the old one intact.
func TestOverwriteDeletesTheOldFile(t *testing.T) {
	srv, mf := newServer(t, "us-east-1", "")
	status, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	for _, v := range []string{"one", "two", "three"} {
		status, body := call(t, srv, http.MethodPut, "", "/bkt/k", "us-east-1", []byte(v))
		require.Equal(t, http.StatusOK, status, body)
	}
	require.Len(t, mf.data, 1, "only the newest file is left")

	req, err := http.NewRequest(http.MethodPut, srv.URL+"/bkt/k", strings.NewReader("tampered"))
	require.NoError(t, err)
	sum := sha256.Sum256([]byte("four"))
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AK", SecretAccessKey: "SECRET-KEY"},
		req, hex.EncodeToString(sum[:]), "s3", "us-east-1", time.Now()))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(b), "XAmzContentSHA256Mismatch")
	status, body := call(t, srv, http.MethodGet, "", "/bkt/k", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "three", body)
}

// TestConditionsOwnersAndEncoding covers what the Go clients' e2e test
// does not: If-Modified-Since (and If-Match winning over
// If-Unmodified-Since), the x-amz-copy-source-if-* conditions of a copy,
// which store nothing when they fail, fetch-owner and encoding-type=url.
func TestConditionsOwnersAndEncoding(t *testing.T) {
	srv, mf := newServer(t, "us-east-1", "")
	status, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	status, body := call(t, srv, http.MethodPut, "", "/bkt/a%20b", "us-east-1", []byte("v"))
	require.Equal(t, http.StatusOK, status, body)
	const etag = `"9e3669d19b675bd57058fd4664205d2a"` // MD5 of "v"
	hour := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(http.TimeFormat) }

	for _, tc := range []struct {
		name   string
		hdr    []string
		status int
	}{
		{"modified since an hour ago", []string{"If-Modified-Since", hour(-time.Hour)}, http.StatusOK},
		{"not modified since a time to come", []string{"If-Modified-Since", hour(time.Hour)}, http.StatusNotModified},
		{"If-None-Match decides over If-Modified-Since", []string{"If-None-Match", `"other"`, "If-Modified-Since", hour(time.Hour)}, http.StatusOK},
		{"If-Match decides over If-Unmodified-Since", []string{"If-Match", etag, "If-Unmodified-Since", hour(-time.Hour)}, http.StatusOK},
		{"modified after If-Unmodified-Since", []string{"If-Unmodified-Since", hour(-time.Hour)}, http.StatusPreconditionFailed},
	} {
		status, body := call(t, srv, http.MethodGet, "", "/bkt/a%20b", "us-east-1", nil, tc.hdr...)
		require.Equal(t, tc.status, status, "%s: %s", tc.name, body)
	}

	for _, hdr := range [][]string{
		{"X-Amz-Copy-Source-If-Match", `"other"`},
		{"X-Amz-Copy-Source-If-None-Match", etag},
		{"X-Amz-Copy-Source-If-Modified-Since", hour(time.Hour)},
		{"X-Amz-Copy-Source-If-Unmodified-Since", hour(-time.Hour)},
	} {
		status, body := call(t, srv, http.MethodPut, "", "/bkt/copy", "us-east-1", nil, append([]string{"X-Amz-Copy-Source", "/bkt/a%20b"}, hdr...)...)
		require.Equal(t, http.StatusPreconditionFailed, status, "%s: %s", hdr[0], body)
		require.Contains(t, body, "<Code>PreconditionFailed</Code>")
	}
	require.Len(t, mf.data, 1, "a copy whose condition failed stored nothing")
	status, body = call(t, srv, http.MethodPut, "", "/bkt/copy", "us-east-1", nil, "X-Amz-Copy-Source", "/bkt/a%20b", "X-Amz-Copy-Source-If-Match", etag)
	require.Equal(t, http.StatusOK, status, body)

	status, body = call(t, srv, http.MethodGet, "", "/bkt?list-type=2", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, "<Owner>", "ListObjectsV2 names owners only with fetch-owner")
	status, body = call(t, srv, http.MethodGet, "", "/bkt?list-type=2&fetch-owner=true", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<Owner><ID>AK</ID><DisplayName>AK</DisplayName></Owner>")
	status, body = call(t, srv, http.MethodGet, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<Owner><ID>AK</ID>", "ListObjects (v1) always names owners")
	require.Contains(t, body, "<Key>a b</Key>")
	status, body = call(t, srv, http.MethodGet, "", "/bkt?list-type=2&encoding-type=url", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<Key>a%20b</Key>")
	require.Contains(t, body, "<EncodingType>url</EncodingType>")
}

// TestUnimplementedOperationsAnswer501 sends the operations clients often
// call that dfs does not implement, as API.md's table lists them: each is
// 501 NotImplemented and changes nothing, never the plain bucket or object
// operation its method and path would otherwise be.
func TestUnimplementedOperationsAnswer501(t *testing.T) {
	srv, mf := newServer(t, "us-east-1", "")
	status, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	status, body := call(t, srv, http.MethodPut, "", "/bkt/k", "us-east-1", []byte("v"))
	require.Equal(t, http.StatusOK, status, body)
	const versioning = `<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>`

	for _, req := range []struct {
		name, method, path, body string
	}{
		{"PutBucketVersioning on a new bucket", http.MethodPut, "/new-bkt?versioning", versioning},
		{"PutBucketVersioning", http.MethodPut, "/bkt?versioning", versioning},
		{"a DELETE of ?versioning", http.MethodDelete, "/bkt?versioning", ""},
		{"PutBucketAcl", http.MethodPut, "/bkt?acl", ""},
		{"PutObjectAcl", http.MethodPut, "/bkt/k?acl", ""},
		{"GetBucketPolicy", http.MethodGet, "/bkt?policy", ""},
		{"GetBucketLifecycleConfiguration", http.MethodGet, "/bkt?lifecycle", ""},
		{"GetBucketEncryption", http.MethodGet, "/bkt?encryption", ""},
		{"GetObjectAttributes", http.MethodGet, "/bkt/k?attributes", ""},
		{"a GET of an object's ?cors", http.MethodGet, "/bkt/k?cors", ""},
		{"a PUT of an object's ?cors", http.MethodPut, "/bkt/k?cors", "<CORSConfiguration/>"},
		{"RestoreObject", http.MethodPost, "/bkt/k?restore", "<RestoreRequest><Days>1</Days></RestoreRequest>"},
		{"SelectObjectContent", http.MethodPost, "/bkt/k?select&select-type=2", "<SelectObjectContentRequest/>"},
		{"CreateSession (S3 Express)", http.MethodGet, "/bkt?session", ""},
		{"GetBucketMetadataTableConfiguration", http.MethodGet, "/bkt?metadataTable", ""},
		{"GetObject of part 2", http.MethodGet, "/bkt/k?partNumber=2", ""},
		{"HeadObject of part 2", http.MethodHead, "/bkt/k?partNumber=2", ""},
	} {
		status, body := call(t, srv, req.method, "", req.path, "us-east-1", []byte(req.body))
		require.Equal(t, http.StatusNotImplemented, status, "%s: %s", req.name, body)
		if req.method != http.MethodHead {
			require.Contains(t, body, "<Code>NotImplemented</Code>", req.name)
		}
	}
	status, _ = call(t, srv, http.MethodHead, "", "/new-bkt", "us-east-1", nil)
	require.Equal(t, http.StatusNotFound, status, "PutBucketVersioning created no bucket")
	status, body = call(t, srv, http.MethodGet, "", "/bkt/k", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, "the bucket and its object are still there")
	require.Equal(t, "v", body)
	status, body = call(t, srv, http.MethodPut, "", "/bkt/copy", "us-east-1", nil, "X-Amz-Copy-Source", "/bkt/k?versionId=3HL4kqtJlcpXroDTDmjVBH40Nrjfkd")
	require.Equal(t, http.StatusNotImplemented, status, "a copy of a version: %s", body)
	status, body = call(t, srv, http.MethodGet, "", "/bkt/k?partNumber=1", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, "part 1 is the whole object")
	require.Equal(t, "v", body)
	require.Len(t, mf.data, 1)
}

// TestOnlyPrivateACLsAreAccepted: every bucket and object is its owner's
// alone, so the canned ACLs that say so are accepted and any other ACL or
// grant is refused with nothing stored, never taken and ignored.
func TestOnlyPrivateACLsAreAccepted(t *testing.T) {
	srv, mf := newServer(t, "us-east-1", "")
	status, body := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil, "X-Amz-Acl", "private")
	require.Equal(t, http.StatusOK, status, body)
	for _, acl := range []string{"private", "bucket-owner-full-control"} {
		status, body := call(t, srv, http.MethodPut, "", "/bkt/"+acl, "us-east-1", []byte("v"), "X-Amz-Acl", acl)
		require.Equal(t, http.StatusOK, status, "%s: %s", acl, body)
	}
	for _, req := range []struct{ path, header, value, body string }{
		{"/public-bkt", "X-Amz-Acl", "public-read", ""},  // CreateBucket
		{"/bkt/public", "X-Amz-Acl", "public-read", "x"}, // PutObject
		{"/bkt/granted", "X-Amz-Grant-Read", `uri="http://acs.amazonaws.com/groups/global/AllUsers"`, "x"},
	} {
		status, body := call(t, srv, http.MethodPut, "", req.path, "us-east-1", []byte(req.body), req.header, req.value)
		require.Equal(t, http.StatusNotImplemented, status, "%s: %s", req.path, body)
		require.Contains(t, body, "<Code>NotImplemented</Code>")
	}
	require.Len(t, mf.data, 2, "nothing but the private objects was stored")
	status, _ = call(t, srv, http.MethodHead, "", "/public-bkt", "us-east-1", nil)
	require.Equal(t, http.StatusNotFound, status, "the public bucket was not created")
}

// TestUnhonouredHeadersAnswer501: a request asking for encryption at rest,
// an object lock or a condition dfs does not check is refused and stores
// nothing; taken without them, a client would believe it had what it asked
// for.
func TestUnhonouredHeadersAnswer501(t *testing.T) {
	srv, mf := newServer(t, "us-east-1", "")
	status, body := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = call(t, srv, http.MethodPut, "", "/bkt/lock", "us-east-1", []byte("mine"))
	require.Equal(t, http.StatusOK, status, body)
	for _, req := range []struct {
		method, path string
		hdr          []string
	}{
		// Conditions dfs would not check: an ETag in If-None-Match on a
		// write, If-None-Match on a delete, either on UploadPart.
		{http.MethodPut, "/bkt/lock", []string{"If-None-Match", `"0123"`}},
		{http.MethodDelete, "/bkt/lock", []string{"If-None-Match", "*"}},
		{http.MethodPut, "/bkt/lock?uploadId=u&partNumber=1", []string{"If-Match", `"0123"`}},
		{http.MethodPut, "/bkt/secret", []string{"X-Amz-Server-Side-Encryption", "AES256"}},
		{http.MethodPut, "/bkt/secret", []string{"X-Amz-Server-Side-Encryption-Customer-Algorithm", "AES256"}},
		{http.MethodPut, "/bkt/locked", []string{"X-Amz-Object-Lock-Mode", "COMPLIANCE"}},
		{http.MethodPut, "/locked-bkt", []string{"X-Amz-Bucket-Object-Lock-Enabled", "true"}},
		{http.MethodPut, "/bkt/cold", []string{"X-Amz-Storage-Class", "GLACIER"}},
		{http.MethodPut, "/bkt/lock", []string{"X-Amz-Copy-Source", "/bkt/lock", "X-Amz-Storage-Class", "STANDARD_IA"}},
	} {
		body := []byte("theirs")
		if req.path == "/locked-bkt" || req.method == http.MethodDelete {
			body = nil
		}
		status, got := call(t, srv, req.method, "", req.path, "us-east-1", body, req.hdr...)
		require.Equal(t, http.StatusNotImplemented, status, "%s %s %v: %s", req.method, req.path, req.hdr, got)
		require.Contains(t, got, "<Code>NotImplemented</Code>")
	}
	status, body = call(t, srv, http.MethodGet, "", "/bkt/lock", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "mine", body, "no conditional write or delete went through")
	require.Len(t, mf.data, 1, "nothing else was stored")
	status, _ = call(t, srv, http.MethodHead, "", "/locked-bkt", "us-east-1", nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = call(t, srv, http.MethodGet, "", "/bkt/lock", "us-east-1", nil, "If-None-Match", `"0123"`)
	require.Equal(t, http.StatusOK, status, "a GET's conditions are still served")

	status, got := call(t, srv, http.MethodPut, "", "/bkt/odd", "us-east-1", []byte("x"), "X-Amz-Storage-Class", "COLDEST")
	require.Equal(t, http.StatusBadRequest, status, got)
	require.Contains(t, got, "<Code>InvalidStorageClass</Code>")
	status, got = call(t, srv, http.MethodPut, "", "/bkt/plain", "us-east-1", []byte("x"), "X-Amz-Storage-Class", "STANDARD")
	require.Equal(t, http.StatusOK, status, "STANDARD is what every object is: %s", got)
	require.Len(t, mf.data, 2, "only the STANDARD object was stored")
}
