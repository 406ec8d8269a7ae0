package sigv4_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/sigv4"
)

const (
	accessKey = "AKIDEXAMPLE"
	secret    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	region    = "us-east-1"
)

// server answers 200 with the body it read through the verifier, or the S3
// code of the first check that failed.
func server(t *testing.T, now func() time.Time) *httptest.Server {
	v := &sigv4.Verifier{Region: region, Now: now, Secrets: func(_ context.Context, ak string) (string, error) {
		if ak != accessKey {
			return "", sigv4.ErrUnknownKey
		}
		return secret, nil
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ak, err := v.Verify(r)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(r.Body)
		}
		var e *sigv4.Error
		if errors.As(err, &e) {
			w.WriteHeader(e.Status)
			_, _ = io.WriteString(w, e.Code)
			return
		}
		require.NoError(t, err)
		require.Equal(t, accessKey, ak)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sdkSigned is a request signed by aws-sdk-go-v2's own signer.
func sdkSigned(t *testing.T, method, url string, body []byte, payload string, key, sec string, at time.Time) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	r.Header.Set("X-Amz-Content-Sha256", payload)
	r.Header.Set("X-Amz-Meta-Colour", "  deep   blue ")
	err = s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: sec},
		r, payload, "s3", region, at)
	require.NoError(t, err)
	return r
}

func TestHeaderSignatures(t *testing.T) {
	now := time.Now()
	srv := server(t, func() time.Time { return now })
	body := []byte("hello, signed world")
	url := srv.URL + "/bucket/a%20key/with%2Bplus~and_%C3%A9?uploads=&prefix=x%2Fy&list-type=2"
	cases := []struct {
		name       string
		req        func() *http.Request
		wantStatus int
		want       string
	}{
		{"signed payload", func() *http.Request {
			return sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), accessKey, secret, now)
		}, 200, string(body)},
		{"unsigned payload", func() *http.Request {
			return sdkSigned(t, http.MethodPut, url, body, sigv4.UnsignedPayload, accessKey, secret, now)
		}, 200, string(body)},
		{"wrong secret", func() *http.Request {
			return sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), accessKey, "not-the-secret", now)
		}, 403, "SignatureDoesNotMatch"},
		{"unknown key", func() *http.Request {
			return sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), "AKIDOTHER", secret, now)
		}, 403, "InvalidAccessKeyId"},
		{"body does not match its hash", func() *http.Request {
			r := sdkSigned(t, http.MethodPut, url, body, hexSHA256([]byte("other bytes")), accessKey, secret, now)
			return r
		}, 400, "XAmzContentSHA256Mismatch"},
		{"no body, the empty hash", func() *http.Request {
			return sdkSigned(t, http.MethodGet, url, nil, hexSHA256(nil), accessKey, secret, now)
		}, 200, ""},
		{"no body, the empty hash in upper case", func() *http.Request {
			return sdkSigned(t, http.MethodGet, url, nil, strings.ToUpper(hexSHA256(nil)), accessKey, secret, now)
		}, 200, ""},
		{"no body, another hash", func() *http.Request {
			return sdkSigned(t, http.MethodGet, url, nil, hexSHA256([]byte("x")), accessKey, secret, now)
		}, 400, "XAmzContentSHA256Mismatch"},
		{"tampered signed header", func() *http.Request {
			r := sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), accessKey, secret, now)
			r.Header.Set("X-Amz-Meta-Colour", "red")
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"tampered query", func() *http.Request {
			r := sdkSigned(t, http.MethodGet, url, nil, hexSHA256(nil), accessKey, secret, now)
			r.URL.RawQuery += "&max-keys=1"
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"16 minutes old", func() *http.Request {
			return sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), accessKey, secret, now.Add(-16*time.Minute))
		}, 403, "RequestTimeTooSkewed"},
		{"14 minutes ahead", func() *http.Request {
			return sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), accessKey, secret, now.Add(14*time.Minute))
		}, 200, string(body)},
		{"no x-amz-content-sha256", func() *http.Request {
			r := sdkSigned(t, http.MethodPut, url, body, hexSHA256(body), accessKey, secret, now)
			r.Header.Del("X-Amz-Content-Sha256")
			return r
		}, 400, "InvalidRequest"},
		{"another region", func() *http.Request {
			r, err := http.NewRequest(http.MethodGet, url, nil)
			require.NoError(t, err)
			r.Header.Set("X-Amz-Content-Sha256", hexSHA256(nil))
			require.NoError(t, s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
				r, hexSHA256(nil), "s3", "eu-west-3", now))
			return r
		}, 400, "AuthorizationHeaderMalformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, got := do(t, tc.req())
			require.Equal(t, tc.wantStatus, status, got)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestPresigned(t *testing.T) {
	now := time.Now()
	srv := server(t, func() time.Time { return now })
	presign := func(at time.Time, expires time.Duration, sec string) string {
		r, err := http.NewRequest(http.MethodGet, srv.URL+"/bucket/key.txt?X-Amz-Expires="+strconv.Itoa(int(expires.Seconds())), nil)
		require.NoError(t, err)
		u, _, err := s3Signer().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: sec},
			r, sigv4.UnsignedPayload, "s3", region, at)
		require.NoError(t, err)
		return u
	}
	get := func(u string) (int, string) {
		r, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		return do(t, r)
	}
	status, body := get(presign(now.Add(-time.Minute), time.Hour, secret))
	require.Equal(t, 200, status, body)
	status, body = get(presign(now.Add(-2*time.Hour), time.Hour, secret))
	require.Equal(t, 403, status)
	require.Equal(t, "AccessDenied", body, "an expired URL")
	status, body = get(presign(now, time.Hour, "wrong"))
	require.Equal(t, 403, status)
	require.Equal(t, "SignatureDoesNotMatch", body)
	status, body = get(presign(now, 8*24*time.Hour, secret))
	require.Equal(t, 400, status)
	require.Equal(t, "AuthorizationQueryParametersError", body, "longer than a week")
	u := presign(now, time.Hour, secret)
	status, _ = get(strings.Replace(u, "key.txt", "other.txt", 1))
	require.Equal(t, 403, status, "the URL signs its path")
}

// s3Signer signs as the S3 clients do: the path is encoded once.
func s3Signer() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// TestStreamingSigned sends aws-chunked bodies signed chunk by chunk by
// minio-go's signer, with and without a signed trailing checksum, and
// corrupts one byte of each on the wire.
func TestStreamingSigned(t *testing.T) {
	now := time.Now().UTC()
	srv := server(t, func() time.Time { return now })
	data := bytes.Repeat([]byte("0123456789abcdef"), 9000) // spans several 64 KiB chunks
	for _, trailer := range []bool{false, true} {
		for _, corrupt := range []bool{false, true} {
			t.Run(fmt.Sprintf("trailer=%v corrupt=%v", trailer, corrupt), func(t *testing.T) {
				r, err := http.NewRequest(http.MethodPut, srv.URL+"/bucket/streamed", bytes.NewReader(data))
				require.NoError(t, err)
				tr := http.Header{}
				if trailer {
					tr.Set("X-Amz-Checksum-Crc32", "")
					r.Trailer = tr
				}
				r = signer.StreamingSignV4(r, accessKey, secret, "", region, int64(len(data)), now, sha256Hasher{sha256.New()})
				if trailer {
					tr.Set("X-Amz-Checksum-Crc32", crc32Base64(data))
				}
				encoded, err := io.ReadAll(r.Body)
				require.NoError(t, err)
				if corrupt {
					i := bytes.Index(encoded, []byte("0123456789abcdef"))
					encoded[i+70000] ^= 1
				}
				r.Body = io.NopCloser(bytes.NewReader(encoded))
				r.ContentLength = int64(len(encoded))
				status, body := do(t, r)
				if corrupt {
					require.Equal(t, 403, status)
					require.Equal(t, "SignatureDoesNotMatch", body)
					return
				}
				require.Equal(t, 200, status, body)
				require.Equal(t, string(data), body)
			})
		}
	}
}

// unsignedChunked builds a STREAMING-UNSIGNED-PAYLOAD-TRAILER body as the
// current SDKs send it, in chunks of size, with a CRC32 trailer.
func unsignedChunked(data []byte, size int, crc string) []byte {
	var b bytes.Buffer
	for len(data) > 0 {
		n := min(size, len(data))
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(data[:n])
		b.WriteString("\r\n")
		data = data[n:]
	}
	fmt.Fprintf(&b, "0\r\nx-amz-checksum-crc32:%s\r\n\r\n", crc)
	return b.Bytes()
}

func crc32Base64(b []byte) string {
	c := crc32.ChecksumIEEE(b)
	return base64.StdEncoding.EncodeToString([]byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)})
}

func TestStreamingUnsignedTrailer(t *testing.T) {
	now := time.Now()
	srv := server(t, func() time.Time { return now })
	data := bytes.Repeat([]byte("restic pack "), 3000)
	cases := []struct {
		name       string
		body       []byte
		length     int
		wantStatus int
		want       string
		trailer    string // x-amz-trailer; x-amz-checksum-crc32 when empty
	}{
		{"good", unsignedChunked(data, 8192, crc32Base64(data)), len(data), 200, string(data), ""},
		{"wrong checksum", unsignedChunked(data, 8192, crc32Base64([]byte("x"))), len(data), 400, "BadDigest", ""},
		{"wrong decoded length", unsignedChunked(data, 8192, crc32Base64(data)), len(data) + 1, 400, "IncompleteBody", ""},
		{"truncated", unsignedChunked(data, 8192, crc32Base64(data))[:5000], len(data), 400, "IncompleteBody", ""},
		{"not hex", []byte("zz\r\nabc\r\n0\r\n\r\n"), 3, 400, "IncompleteBody", ""},
		// A checksum dfs cannot compute is refused before the body, not
		// accepted unchecked.
		{"unknown trailer", unsignedChunked(data, 8192, crc32Base64(data)), len(data), 400, "InvalidRequest", "x-amz-checksum-md5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodPut, srv.URL+"/bucket/unsigned", bytes.NewReader(tc.body))
			require.NoError(t, err)
			r.Header.Set("X-Amz-Content-Sha256", sigv4.StreamingUnsignedTrailer)
			r.Header.Set("Content-Encoding", "aws-chunked")
			r.Header.Set("X-Amz-Trailer", cmp.Or(tc.trailer, "x-amz-checksum-crc32"))
			r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(tc.length))
			require.NoError(t, s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
				r, sigv4.StreamingUnsignedTrailer, "s3", region, now))
			status, body := do(t, r)
			require.Equal(t, tc.wantStatus, status, body)
			require.Equal(t, tc.want, body)
		})
	}
}

// TestPayloadHashMustBeSigned refuses a header signature that leaves
// x-amz-content-sha256 out: the body would then be checked against a hash
// anyone could change.
func TestPayloadHashMustBeSigned(t *testing.T) {
	now := time.Now()
	srv := server(t, func() time.Time { return now })
	body := []byte("payload")
	r, err := http.NewRequest(http.MethodPut, srv.URL+"/bucket/key", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
		r, hexSHA256(body), "s3", region, now))
	r.Header.Set("X-Amz-Content-Sha256", hexSHA256(body)) // sent, but not signed
	status, got := do(t, r)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "AccessDenied", got)
}

// TestSigningKeyFollowsSecret: the derived signing keys are cached, but by
// the secret too, so once a key's secret changes the old secret's
// signatures fail and the new one's pass, in the same day and scope.
func TestSigningKeyFollowsSecret(t *testing.T) {
	now := time.Now().UTC()
	current := "first-secret-0123456789"
	v := &sigv4.Verifier{Region: region, Now: func() time.Time { return now }, Secrets: func(context.Context, string) (string, error) {
		return current, nil
	}}
	verify := func(sec string) error {
		r := sdkSigned(t, http.MethodGet, "http://example.com/b/k", nil, hexSHA256(nil), accessKey, sec, now)
		_, err := v.Verify(r)
		return err
	}
	require.NoError(t, verify("first-secret-0123456789"))
	require.NoError(t, verify("first-secret-0123456789"), "from the cached key")
	current = "second-secret-0123456789"
	var e *sigv4.Error
	require.ErrorAs(t, verify("first-secret-0123456789"), &e)
	require.Equal(t, "SignatureDoesNotMatch", e.Code)
	require.NoError(t, verify("second-secret-0123456789"))
}

// TestChecksumHeaders: a body sent whole with an x-amz-checksum-* header,
// as current SDKs send every PutObject, is refused with BadDigest when its
// bytes do not match, whether its payload is signed or not.
func TestChecksumHeaders(t *testing.T) {
	now := time.Now()
	srv := server(t, func() time.Time { return now })
	body := []byte("checked twice")
	sha := sha256.Sum256(body)
	cases := []struct {
		name       string
		headers    map[string]string
		payload    string
		wantStatus int
		want       string
	}{
		{"crc32", map[string]string{"X-Amz-Checksum-Crc32": crc32Base64(body)}, hexSHA256(body), 200, string(body)},
		{"crc32, unsigned payload", map[string]string{"X-Amz-Checksum-Crc32": crc32Base64(body)}, sigv4.UnsignedPayload, 200, string(body)},
		{"sha256", map[string]string{"X-Amz-Checksum-Sha256": base64.StdEncoding.EncodeToString(sha[:])}, sigv4.UnsignedPayload, 200, string(body)},
		{"crc32 of other bytes", map[string]string{"X-Amz-Checksum-Crc32": crc32Base64([]byte("x"))}, hexSHA256(body), 400, "BadDigest"},
		{"crc32 of other bytes, unsigned payload", map[string]string{"X-Amz-Checksum-Crc32": crc32Base64([]byte("x"))}, sigv4.UnsignedPayload, 400, "BadDigest"},
		{"crc32c of other bytes", map[string]string{"X-Amz-Checksum-Crc32c": crc32Base64(body)}, sigv4.UnsignedPayload, 400, "BadDigest"},
		{"not base64", map[string]string{"X-Amz-Checksum-Crc32": "not base64!"}, sigv4.UnsignedPayload, 400, "InvalidRequest"},
		{"the wrong length", map[string]string{"X-Amz-Checksum-Sha1": crc32Base64(body)}, sigv4.UnsignedPayload, 400, "InvalidRequest"},
		{"two checksums", map[string]string{"X-Amz-Checksum-Crc32": crc32Base64(body), "X-Amz-Checksum-Sha256": base64.StdEncoding.EncodeToString(sha[:])},
			sigv4.UnsignedPayload, 400, "InvalidRequest"},
		{"an algorithm named, no checksum", map[string]string{"X-Amz-Checksum-Algorithm": "CRC32"}, sigv4.UnsignedPayload, 200, string(body)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodPut, srv.URL+"/bucket/key", bytes.NewReader(body))
			require.NoError(t, err)
			r.Header.Set("X-Amz-Content-Sha256", tc.payload)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			require.NoError(t, s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
				r, tc.payload, "s3", region, now))
			status, got := do(t, r)
			require.Equal(t, tc.wantStatus, status, got)
			require.Equal(t, tc.want, got)
		})
	}
}
