package sigv4_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/sigv4"
)

// The example key of S3's Signature Version 2 documentation.
const (
	v2Key    = "AKIAIOSFODNN7EXAMPLE"
	v2Secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func v2Verifier(now time.Time) *sigv4.Verifier {
	return &sigv4.Verifier{Region: "us-east-1", V2: true, Domain: "s3.amazonaws.com", Now: func() time.Time { return now },
		Secrets: func(_ context.Context, ak string) (string, error) {
			if ak != v2Key {
				return "", sigv4.ErrUnknownKey
			}
			return v2Secret, nil
		}}
}

func v2Code(t *testing.T, err error) string {
	t.Helper()
	var e *sigv4.Error
	require.True(t, errors.As(err, &e), "%v", err)
	return e.Code
}

// TestSignatureV2Vectors checks the examples of S3's Signature Version 2
// documentation (a virtual-hosted GET and PUT, and a presigned GET), and
// that a changed byte, an unknown key, a skewed clock or a URL past its
// Expires is refused.
func TestSignatureV2Vectors(t *testing.T) {
	header := func(method, date, contentType, sig string) *http.Request {
		r := httptest.NewRequest(method, "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg", nil)
		r.Header.Set("Date", date)
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		r.Header.Set("Authorization", "AWS "+v2Key+":"+sig)
		return r
	}
	getDate := "Tue, 27 Mar 2007 19:36:42 +0000"
	at, err := time.Parse(time.RFC1123Z, getDate)
	require.NoError(t, err)
	ak, err := v2Verifier(at).Verify(header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU="))
	require.NoError(t, err)
	require.Equal(t, v2Key, ak)
	putDate := "Tue, 27 Mar 2007 21:15:45 +0000"
	ak, err = v2Verifier(at.Add(time.Hour + 39*time.Minute)).Verify(header(http.MethodPut, putDate, "image/jpeg", "MyyxeRY7whkBe+bq8fHCL/2kKUg="))
	require.NoError(t, err)
	require.Equal(t, v2Key, ak)

	presigned := func() *http.Request {
		return httptest.NewRequest(http.MethodGet, "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg?AWSAccessKeyId="+v2Key+
			"&Expires=1175139620&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D", nil)
	}
	expires := time.Unix(1175139620, 0)
	ak, err = v2Verifier(expires.Add(-time.Minute)).Verify(presigned())
	require.NoError(t, err)
	require.Equal(t, v2Key, ak)
	_, err = v2Verifier(expires.Add(time.Second)).Verify(presigned())
	require.Equal(t, "AccessDenied", v2Code(t, err), "past its Expires")

	for name, r := range map[string]*http.Request{
		"a changed signature": header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMV="),
		"another method":      header(http.MethodDelete, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU="),
		"an unsigned header": func() *http.Request {
			r := header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU=")
			r.Header.Set("X-Amz-Meta-Added", "1")
			return r
		}(),
		"a signed sub-resource added": func() *http.Request {
			r := header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU=")
			r.URL.RawQuery = "acl"
			return r
		}(),
	} {
		_, err := v2Verifier(at).Verify(r)
		require.Equal(t, "SignatureDoesNotMatch", v2Code(t, err), name)
	}
	r := header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU=")
	r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), v2Key, "AKIAOTHER", 1))
	_, err = v2Verifier(at).Verify(r)
	require.Equal(t, "InvalidAccessKeyId", v2Code(t, err))
	_, err = v2Verifier(at.Add(time.Hour)).Verify(header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU="))
	require.Equal(t, "RequestTimeTooSkewed", v2Code(t, err))

	v4Only := v2Verifier(at)
	v4Only.V2 = false
	_, err = v4Only.Verify(header(http.MethodGet, getDate, "", "bWq2s1WEIj+Ydj0vQ697zp+IXMU="))
	require.Error(t, err, "a verifier without V2 refuses it")
}
