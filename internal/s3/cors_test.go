package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
)

// TestBucketCors: a bucket's CORS configuration is written, read back
// rule by rule and deleted through the SDK; none is
// NoSuchCORSConfiguration.
func TestBucketCors(t *testing.T) {
	s := newSDKServer(t, nil)
	c, ctx := s.c, context.Background()
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	_, err = c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("bkt")})
	require.Equal(t, "NoSuchCORSConfiguration", s3Code(t, err))

	rules := []types.CORSRule{
		{ID: aws.String("app"), AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []string{"GET", "PUT"},
			AllowedHeaders: []string{"x-amz-*", "Content-Type"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(600)},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"HEAD"}},
	}
	_, err = c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: aws.String("bkt"),
		CORSConfiguration: &types.CORSConfiguration{CORSRules: rules}})
	require.NoError(t, err)
	out, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	require.Len(t, out.CORSRules, 2)
	require.Equal(t, "app", aws.ToString(out.CORSRules[0].ID))
	require.Equal(t, []string{"GET", "PUT"}, out.CORSRules[0].AllowedMethods)
	require.Equal(t, []string{"x-amz-*", "Content-Type"}, out.CORSRules[0].AllowedHeaders)
	require.Equal(t, []string{"ETag"}, out.CORSRules[0].ExposeHeaders)
	require.EqualValues(t, 600, aws.ToInt32(out.CORSRules[0].MaxAgeSeconds))
	require.Equal(t, []string{"*"}, out.CORSRules[1].AllowedOrigins)
	require.Nil(t, out.CORSRules[1].MaxAgeSeconds)

	_, err = c.DeleteBucketCors(ctx, &awss3.DeleteBucketCorsInput{Bucket: aws.String("bkt")})
	require.NoError(t, err)
	_, err = c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("bkt")})
	require.Equal(t, "NoSuchCORSConfiguration", s3Code(t, err))
	_, err = c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("absent")})
	require.Equal(t, "NoSuchBucket", s3Code(t, err))
}

// TestCorsLimits: S3's rules on a CORS configuration, each answered with
// S3's code and nothing stored.
func TestCorsLimits(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "")
	status, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	rule := func(inner string) string { return "<CORSRule>" + inner + "</CORSRule>" }
	conf := func(rules ...string) string {
		return "<CORSConfiguration>" + strings.Join(rules, "") + "</CORSConfiguration>"
	}
	good := rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>")
	for _, tc := range []struct{ name, body, code string }{
		{"no rules", conf(), "MalformedXML"},
		{"101 rules", conf(strings.Split(strings.Repeat(good+"|", 101), "|")...), "MalformedXML"},
		{"a rule without an origin", conf(rule("<AllowedMethod>GET</AllowedMethod>")), "MalformedXML"},
		{"a rule without a method", conf(rule("<AllowedOrigin>*</AllowedOrigin>")), "MalformedXML"},
		{"a method S3 does not allow", conf(rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod>")), "InvalidRequest"},
		{"a method in lower case", conf(rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>get</AllowedMethod>")), "InvalidRequest"},
		{"two wildcards in an origin", conf(rule("<AllowedOrigin>https://*.*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>")), "InvalidRequest"},
		{"two wildcards in a header", conf(rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>*-*</AllowedHeader>")), "InvalidRequest"},
		{"a negative max age", conf(rule("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-1</MaxAgeSeconds>")), "MalformedXML"},
		{"an ID of 256 characters", conf(rule("<ID>" + strings.Repeat("i", 256) + "</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>")), "MalformedXML"},
		{"not XML", "cors please", "MalformedXML"},
		{"another document", "<Tagging><TagSet></TagSet></Tagging>", "MalformedXML"},
	} {
		status, body := call(t, srv, http.MethodPut, "", "/bkt?cors", "us-east-1", []byte(tc.body))
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", tc.name, body)
		require.Contains(t, body, "<Code>"+tc.code+"</Code>", tc.name)
	}
	status, body := call(t, srv, http.MethodGet, "", "/bkt?cors", "us-east-1", nil)
	require.Equal(t, http.StatusNotFound, status, "nothing was stored: %s", body)
	status, body = call(t, srv, http.MethodPut, "", "/bkt?cors", "us-east-1", []byte(conf(strings.Split(strings.Repeat(good+"|", 100), "|")...)))
	require.Equal(t, http.StatusOK, status, "100 rules are allowed: %s", body)
}

// preflight sends an unsigned OPTIONS, as a browser does, with Origin,
// Access-Control-Request-Method and -Headers when given.
func preflight(t *testing.T, srv *httptest.Server, path, origin, method, headers string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, srv.URL+path, nil)
	require.NoError(t, err)
	for name, v := range map[string]string{"Origin": origin, "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers} {
		if v != "" {
			req.Header.Set(name, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

const testCORS = `<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<CORSRule><ID>app</ID><AllowedOrigin>https://app.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>
  <AllowedHeader>x-amz-*</AllowedHeader><AllowedHeader>Content-Type</AllowedHeader><ExposeHeader>ETag</ExposeHeader><ExposeHeader>x-amz-request-id</ExposeHeader>
  <MaxAgeSeconds>600</MaxAgeSeconds></CORSRule>
<CORSRule><AllowedOrigin>http://*.example.org</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>
<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>HEAD</AllowedMethod></CORSRule>
</CORSConfiguration>`

// TestPreflight: an OPTIONS preflight, unsigned, is answered from the
// bucket's CORS rules: the first rule that allows the origin, the method
// and every header asked for gives its headers; none is 403, as is a
// bucket without rules.
func TestPreflight(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "")
	for _, b := range []string{"/bkt", "/plain"} {
		status, _ := call(t, srv, http.MethodPut, "", b, "us-east-1", nil)
		require.Equal(t, http.StatusOK, status)
	}
	status, body := call(t, srv, http.MethodPut, "", "/bkt?cors", "us-east-1", []byte(testCORS))
	require.Equal(t, http.StatusOK, status, body)

	for _, tc := range []struct {
		name, path, origin, method, headers string
		status                              int
		want                                map[string]string
	}{
		{"a named origin, its method and headers", "/bkt/some/key", "https://app.example.com", "PUT", "Content-Type, X-Amz-Date", 200, map[string]string{
			"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Credentials": "true",
			"Access-Control-Allow-Methods": "GET, PUT", "Access-Control-Allow-Headers": "content-type, x-amz-date",
			"Access-Control-Expose-Headers": "ETag, x-amz-request-id", "Access-Control-Max-Age": "600",
			"Vary": "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"}},
		{"on the bucket itself", "/bkt", "https://app.example.com", "GET", "", 200, map[string]string{
			"Access-Control-Allow-Origin": "https://app.example.com"}},
		{"a method the rule does not allow", "/bkt/k", "https://app.example.com", "DELETE", "", 403, nil},
		{"a header the rule does not allow", "/bkt/k", "https://app.example.com", "PUT", "authorization", 403, nil},
		{"an origin under a wildcard", "/bkt/k", "http://eu.example.org", "GET", "", 200, map[string]string{
			"Access-Control-Allow-Origin": "http://eu.example.org", "Access-Control-Allow-Methods": "GET", "Access-Control-Max-Age": ""}},
		{"the wildcard needs its dot", "/bkt/k", "http://example.org", "GET", "", 403, nil},
		{"another scheme", "/bkt/k", "https://eu.example.org", "GET", "", 403, nil},
		{"any origin's HEAD", "/bkt/k", "https://elsewhere.test", "HEAD", "", 200, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": ""}},
		{"a bucket without rules", "/plain/k", "https://app.example.com", "GET", "", 403, nil},
		{"a bucket that does not exist", "/nobucket/k", "https://app.example.com", "GET", "", 403, nil},
		{"no Origin", "/bkt/k", "", "GET", "", 400, nil},
		{"no Access-Control-Request-Method", "/bkt/k", "https://app.example.com", "", "", 400, nil},
	} {
		status, h := preflight(t, srv, tc.path, tc.origin, tc.method, tc.headers)
		require.Equal(t, tc.status, status, tc.name)
		if status != http.StatusOK {
			require.Empty(t, h.Get("Access-Control-Allow-Origin"), tc.name)
		}
		for name, v := range tc.want {
			require.Equal(t, v, h.Get(name), "%s: %s", tc.name, name)
		}
	}
}

// signedWith sends a signed request and returns its status and headers.
func signedWith(t *testing.T, srv *httptest.Server, method, path string, hdr ...string) (int, http.Header) {
	t.Helper()
	sum := sha256.Sum256(nil)
	req := signed(t, method, srv.URL+path, "us-east-1", bytes.NewReader(nil), hex.EncodeToString(sum[:]), hdr...)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

// TestCorsOnAnswers: a browser's actual request (signed, or a presigned
// URL) gets the headers of the rule that allows its origin and method, on
// errors too, so that the application can read the answer; a change of
// the rules is answered from at once.
func TestCorsOnAnswers(t *testing.T) {
	srv, _ := newServer(t, "us-east-1", "")
	status, _ := call(t, srv, http.MethodPut, "", "/bkt", "us-east-1", nil)
	require.Equal(t, http.StatusOK, status)
	status, body := call(t, srv, http.MethodPut, "", "/bkt/photo.jpg", "us-east-1", []byte("jpeg"))
	require.Equal(t, http.StatusOK, status, body)
	status, h := signedWith(t, srv, http.MethodGet, "/bkt/photo.jpg", "Origin", "https://app.example.com")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, h.Get("Access-Control-Allow-Origin"), "no rules, no CORS headers")

	status, body = call(t, srv, http.MethodPut, "", "/bkt?cors", "us-east-1", []byte(testCORS))
	require.Equal(t, http.StatusOK, status, body)
	status, h = signedWith(t, srv, http.MethodGet, "/bkt/photo.jpg", "Origin", "https://app.example.com")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "https://app.example.com", h.Get("Access-Control-Allow-Origin"), "the new rules, at once")
	require.Equal(t, "ETag, x-amz-request-id", h.Get("Access-Control-Expose-Headers"))
	require.Contains(t, h.Get("Vary"), "Origin")

	// A presigned URL, as a browser application is handed one.
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/bkt/photo.jpg?X-Amz-Expires=300", nil)
	require.NoError(t, err)
	url, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: "AK", SecretAccessKey: "SECRET-KEY"}, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	require.NoError(t, err)
	get, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	get.Header.Set("Origin", "http://eu.example.org")
	resp, err := http.DefaultClient.Do(get)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Equal(t, "jpeg", string(b))
	require.Equal(t, "http://eu.example.org", resp.Header.Get("Access-Control-Allow-Origin"))

	for _, tc := range []struct {
		name, method, path, origin, want string
		status                           int
	}{
		{"an error the application may read", http.MethodGet, "/bkt/missing.jpg", "https://app.example.com", "https://app.example.com", 404},
		{"an origin no rule names", http.MethodGet, "/bkt/photo.jpg", "https://evil.test", "", 200},
		{"any origin's HEAD", http.MethodHead, "/bkt/photo.jpg", "https://evil.test", "*", 200},
		{"a method no rule allows for the origin", http.MethodDelete, "/bkt/other.jpg", "http://eu.example.org", "", 204},
	} {
		status, h := signedWith(t, srv, tc.method, tc.path, "Origin", tc.origin)
		require.Equal(t, tc.status, status, tc.name)
		require.Equal(t, tc.want, h.Get("Access-Control-Allow-Origin"), tc.name)
		require.Contains(t, h.Get("Vary"), "Origin", tc.name)
	}
	unsigned, err := http.NewRequest(http.MethodGet, srv.URL+"/bkt/photo.jpg", nil)
	require.NoError(t, err)
	unsigned.Header.Set("Origin", "https://app.example.com")
	resp, err = http.DefaultClient.Do(unsigned)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "CORS allows a browser to read, never to skip the signature")
	require.Equal(t, "https://app.example.com", resp.Header.Get("Access-Control-Allow-Origin"))

	status, _ = call(t, srv, http.MethodDelete, "", "/bkt?cors", "us-east-1", nil)
	require.Equal(t, http.StatusNoContent, status)
	status, h = signedWith(t, srv, http.MethodGet, "/bkt/photo.jpg", "Origin", "https://app.example.com")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, h.Get("Access-Control-Allow-Origin"), "rules deleted, at once")
	code, _ := preflight(t, srv, "/bkt/photo.jpg", "https://app.example.com", "GET", "")
	require.Equal(t, http.StatusForbidden, code, "a preflight after the delete")
}
