package sigv4_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dfs-project/dfs/internal/sigv4"
)

// BenchmarkVerifyGet is the check of a signed GetObject, as the S3 front end
// makes it on every request: go test -run - -bench VerifyGet ./internal/sigv4
func BenchmarkVerifyGet(b *testing.B) {
	now := time.Now().UTC()
	v := &sigv4.Verifier{Region: region, Now: func() time.Time { return now }, Secrets: func(context.Context, string) (string, error) {
		return secret, nil
	}}
	r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:9000/bench/r0/w3/117?x-id=GetObject", nil)
	if err != nil {
		b.Fatal(err)
	}
	payload := hexSHA256(nil)
	r.Header.Set("X-Amz-Content-Sha256", payload)
	if err := s3Signer().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret},
		r, payload, "s3", region, now); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}
