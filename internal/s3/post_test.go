package s3_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/stretchr/testify/require"
)

// postForm is a browser upload: fields in order, then the file.
type postForm struct {
	fields   [][2]string
	filename string
	file     []byte
}

// signedForm is a form whose policy holds conds (and the signature's own
// fields), expiring at exp, signed for the test server's key.
func signedForm(t *testing.T, exp time.Time, conds []any, fields ...string) *postForm {
	t.Helper()
	now := time.Now().UTC()
	cred := "AK/" + now.Format("20060102") + "/us-east-1/s3/aws4_request"
	date := now.Format("20060102T150405Z")
	conds = append(conds, map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"},
		map[string]string{"x-amz-credential": cred}, map[string]string{"x-amz-date": date})
	doc, err := json.Marshal(map[string]any{"expiration": exp.UTC().Format("2006-01-02T15:04:05.000Z"), "conditions": conds})
	require.NoError(t, err)
	policy := base64.StdEncoding.EncodeToString(doc)
	f := &postForm{filename: "photo.jpg", file: []byte("the bytes of the file")}
	for i := 0; i+1 < len(fields); i += 2 {
		f.fields = append(f.fields, [2]string{fields[i], fields[i+1]})
	}
	f.fields = append(f.fields, [2]string{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, [2]string{"x-amz-credential", cred},
		[2]string{"x-amz-date", date}, [2]string{"policy", policy},
		[2]string{"x-amz-signature", signer.PostPresignSignatureV4(policy, now, "SECRET-KEY", "us-east-1")})
	return f
}

func (f *postForm) set(name, value string) *postForm {
	for i := range f.fields {
		if f.fields[i][0] == name {
			f.fields[i][1] = value
		}
	}
	return f
}

func (f *postForm) post(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, kv := range f.fields {
		require.NoError(t, mw.WriteField(kv[0], kv[1]))
	}
	if f.file != nil {
		fw, err := mw.CreateFormFile("file", f.filename)
		require.NoError(t, err)
		_, err = fw.Write(f.file)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, &body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func errCode(t *testing.T, body string) string {
	t.Helper()
	var e struct{ Code string }
	require.NoError(t, xml.Unmarshal([]byte(body), &e), body)
	return e.Code
}

// TestPostObject: a browser upload stores the file under its key (with
// ${filename} put in), its content type, metadata and tags, and answers
// as success_action_status and success_action_redirect ask.
func TestPostObject(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "")
	code, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, code)
	exp := time.Now().Add(time.Hour)
	conds := []any{map[string]string{"bucket": "bkt"}, []any{"starts-with", "$key", "up/"},
		[]any{"starts-with", "$Content-Type", "image/"}, map[string]string{"x-amz-meta-owner": "ann"},
		[]any{"eq", "$tagging", "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>"},
		[]any{"content-length-range", 1, 100}, map[string]string{"acl": "private"}}
	f := signedForm(t, exp, conds, "key", "up/${filename}", "Content-Type", "image/jpeg", "X-Amz-Meta-Owner", "ann",
		"tagging", "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>", "acl", "private")
	resp, body := f.post(t, srv, "/bkt")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.NotEmpty(t, resp.Header.Get("ETag"))

	req := signed(t, http.MethodGet, srv.URL+"/bkt/up/photo.jpg", "us-east-1", nil, "UNSIGNED-PAYLOAD")
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	got.Body.Close()
	require.Equal(t, http.StatusOK, got.StatusCode)
	require.Equal(t, f.file, b)
	require.Equal(t, "image/jpeg", got.Header.Get("Content-Type"))
	require.Equal(t, "ann", got.Header.Get("X-Amz-Meta-Owner"))
	require.Equal(t, "1", got.Header.Get("X-Amz-Tagging-Count"))
	require.Equal(t, resp.Header.Get("ETag"), got.Header.Get("ETag"))

	status := append(conds, map[string]string{"success_action_status": "201"})
	resp, body = signedForm(t, exp, status, "key", "up/${filename}", "Content-Type", "image/jpeg", "X-Amz-Meta-Owner", "ann",
		"tagging", "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>", "acl", "private",
		"success_action_status", "201").post(t, srv, "/bkt")
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	var pr struct{ Location, Bucket, Key, ETag string }
	require.NoError(t, xml.Unmarshal([]byte(body), &pr))
	require.Equal(t, "bkt", pr.Bucket)
	require.Equal(t, "up/photo.jpg", pr.Key)
	require.Equal(t, resp.Header.Get("ETag"), pr.ETag)
	require.True(t, strings.HasSuffix(pr.Location, "/bkt/up/photo.jpg"), pr.Location)

	plain := []any{map[string]string{"bucket": "bkt"}, map[string]string{"key": "ok"}, map[string]string{"success_action_status": "200"}}
	// An x-ignore-* field needs no condition.
	resp, body = signedForm(t, exp, plain, "key", "ok", "success_action_status", "200", "x-ignore-this", "any").post(t, srv, "/bkt")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Empty(t, body)

	redirect := []any{map[string]string{"bucket": "bkt"}, map[string]string{"key": "plain"},
		map[string]string{"success_action_redirect": "https://app.example.com/done?x=1"}}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	f = signedForm(t, exp, redirect, "key", "plain", "success_action_redirect", "https://app.example.com/done?x=1")
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, kv := range f.fields {
		require.NoError(t, mw.WriteField(kv[0], kv[1]))
	}
	fw, err := mw.CreateFormFile("file", "a.txt")
	require.NoError(t, err)
	_, _ = fw.Write([]byte("x"))
	require.NoError(t, mw.Close())
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/bkt", &buf)
	require.NoError(t, err)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err = client.Do(r)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "https://app.example.com/done?"), loc)
	require.Contains(t, loc, "bucket=bkt")
	require.Contains(t, loc, "key=plain")
	require.Contains(t, loc, "etag=%22")
	require.Contains(t, loc, "x=1")
}

// TestPostObjectRefusals: what S3 refuses in a browser upload, each with
// its code, and that no refused upload leaves an object behind.
func TestPostObjectRefusals(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "")
	code, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, code)
	exp := time.Now().Add(time.Hour)
	base := []any{map[string]string{"bucket": "bkt"}, []any{"starts-with", "$key", ""}}
	with := func(c ...any) []any { return append(append([]any{}, base...), c...) }
	for name, tc := range map[string]struct {
		form   func() *postForm
		status int
		code   string
	}{
		"expired": {func() *postForm { return signedForm(t, time.Now().Add(-time.Second), base, "key", "k") },
			http.StatusForbidden, "AccessDenied"},
		"bad signature": {func() *postForm {
			return signedForm(t, exp, base, "key", "k").set("x-amz-signature", strings.Repeat("0", 64))
		},
			http.StatusForbidden, "SignatureDoesNotMatch"},
		"policy changed": {func() *postForm {
			f := signedForm(t, exp, base, "key", "k")
			other := signedForm(t, exp.Add(time.Hour), base, "key", "k")
			return f.set("policy", other.fields[len(other.fields)-2][1])
		}, http.StatusForbidden, "SignatureDoesNotMatch"},
		"unknown key": {func() *postForm {
			f := signedForm(t, exp, base, "key", "k")
			return f.set("x-amz-credential", strings.Replace(f.fields[2][1], "AK/", "NOPE/", 1))
		}, http.StatusForbidden, "InvalidAccessKeyId"},
		"not base64":   {func() *postForm { return signedForm(t, exp, base, "key", "k").set("policy", "{{") }, http.StatusBadRequest, "InvalidPolicyDocument"},
		"no policy":    {func() *postForm { return &postForm{fields: [][2]string{{"key", "k"}}, file: []byte("x")} }, http.StatusForbidden, "AccessDenied"},
		"no file":      {func() *postForm { f := signedForm(t, exp, base, "key", "k"); f.file = nil; return f }, http.StatusBadRequest, "InvalidArgument"},
		"no key":       {func() *postForm { return signedForm(t, exp, base) }, http.StatusBadRequest, "InvalidArgument"},
		"other bucket": {func() *postForm { return signedForm(t, exp, []any{map[string]string{"bucket": "else"}}, "key", "k") }, http.StatusForbidden, "AccessDenied"},
		"key outside prefix": {func() *postForm {
			return signedForm(t, exp, []any{map[string]string{"bucket": "bkt"}, []any{"starts-with", "$key", "up/"}}, "key", "k")
		}, http.StatusForbidden, "AccessDenied"},
		"key not equal": {func() *postForm { return signedForm(t, exp, []any{[]any{"eq", "$key", "a"}}, "key", "k") }, http.StatusForbidden, "AccessDenied"},
		"field not covered": {func() *postForm { return signedForm(t, exp, base, "key", "k", "x-amz-meta-a", "1") },
			http.StatusForbidden, "AccessDenied"},
		"too large": {func() *postForm { return signedForm(t, exp, with([]any{"content-length-range", 0, 3}), "key", "k") },
			http.StatusBadRequest, "EntityTooLarge"},
		"too small": {func() *postForm {
			return signedForm(t, exp, with([]any{"content-length-range", 1000, 2000}), "key", "k")
		},
			http.StatusBadRequest, "EntityTooSmall"},
		"bad range": {func() *postForm { return signedForm(t, exp, with([]any{"content-length-range", 5, 2}), "key", "k") },
			http.StatusBadRequest, "InvalidPolicyDocument"},
		"unknown condition": {func() *postForm { return signedForm(t, exp, with([]any{"ends-with", "$key", "k"}), "key", "k") },
			http.StatusBadRequest, "InvalidPolicyDocument"},
		"public acl": {func() *postForm {
			return signedForm(t, exp, with(map[string]string{"acl": "public-read"}), "key", "k", "acl", "public-read")
		},
			http.StatusNotImplemented, "NotImplemented"},
		"session token": {func() *postForm {
			return signedForm(t, exp, with(map[string]string{"x-amz-security-token": "t"}), "key", "k", "x-amz-security-token", "t")
		}, http.StatusNotImplemented, "NotImplemented"},
		"too many tags": {func() *postForm {
			tags := "<Tagging><TagSet>" + strings.Repeat("<Tag><Key>a</Key><Value>b</Value></Tag>", 2) + "</TagSet></Tagging>"
			return signedForm(t, exp, with(map[string]string{"tagging": tags}), "key", "k", "tagging", tags)
		}, http.StatusBadRequest, "InvalidTag"},
		"no bucket": {func() *postForm { return signedForm(t, exp, []any{[]any{"starts-with", "$key", ""}}, "key", "k") },
			http.StatusNotFound, "NoSuchBucket"},
	} {
		t.Run(name, func(t *testing.T) {
			path := "/bkt"
			if name == "no bucket" {
				path = "/absent"
			}
			resp, body := tc.form().post(t, srv, path)
			require.Equal(t, tc.status, resp.StatusCode, body)
			require.Equal(t, tc.code, errCode(t, body))
			code, _ := call(t, srv, http.MethodHead, "", "/bkt/k", "us-east-1", nil)
			require.Equal(t, http.StatusNotFound, code)
		})
	}
}

// TestPostObjectCors: a browser upload's answer carries the CORS headers
// of the rule that allows its Origin and POST.
func TestPostObjectCors(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "")
	code, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, code)
	cors := []byte(`<CORSConfiguration><CORSRule><AllowedOrigin>https://app.example.com</AllowedOrigin>` +
		`<AllowedMethod>POST</AllowedMethod></CORSRule></CORSConfiguration>`)
	code, body := call(t, srv, http.MethodPut, "", "/bkt?cors", "us-east-1", cors)
	require.Equal(t, http.StatusOK, code, body)
	f := signedForm(t, time.Now().Add(time.Hour), []any{map[string]string{"bucket": "bkt"}, map[string]string{"key": "k"}}, "key", "k")
	resp, body := f.post(t, srv, "/bkt", "Origin", "https://app.example.com")
	require.Equal(t, http.StatusNoContent, resp.StatusCode, body)
	require.Equal(t, "https://app.example.com", resp.Header.Get("Access-Control-Allow-Origin"))
	resp, _ = f.post(t, srv, "/bkt", "Origin", "https://evil.example.com")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}
