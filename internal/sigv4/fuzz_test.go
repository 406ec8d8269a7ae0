package sigv4_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dfs-project/dfs/internal/sigv4"
)

// FuzzUnsignedChunkedBody feeds arbitrary aws-chunked bodies through the
// verifier: it must never panic, and whatever it lets through to io.EOF
// must be exactly the declared number of bytes.
func FuzzUnsignedChunkedBody(f *testing.F) {
	f.Add(unsignedChunked([]byte("hello world"), 4, crc32Base64([]byte("hello world"))), 11)
	f.Add([]byte("0\r\n\r\n"), 0)
	f.Add([]byte("5\r\nabc\r\n0\r\n\r\n"), 5)
	f.Add([]byte("ffffffffffffffff\r\n"), 3)
	now := time.Now()
	v := &sigv4.Verifier{Region: region, Now: func() time.Time { return now }, Secrets: func(context.Context, string) (string, error) { return secret, nil }}
	f.Fuzz(func(t *testing.T, body []byte, declared int) {
		if declared < 0 || declared > 1<<20 {
			return
		}
		r := httptest.NewRequest(http.MethodPut, "http://s3.test/bucket/key", bytes.NewReader(body))
		r.Header.Set("X-Amz-Content-Sha256", sigv4.StreamingUnsignedTrailer)
		r.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
		r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(declared))
		if err := s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
			r, sigv4.StreamingUnsignedTrailer, "s3", region, now); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(r); err != nil {
			t.Fatalf("a correctly signed request was refused: %v", err)
		}
		got, err := io.ReadAll(r.Body)
		if err == nil && len(got) != declared {
			t.Fatalf("accepted %d bytes, %d declared", len(got), declared)
		}
	})
}
