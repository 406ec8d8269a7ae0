package sigv4_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/sigv4"
)

// TestVerifyPolicy checks a POST policy's signature against minio-go's
// independent implementation, and that each part of the scope counts.
func TestVerifyPolicy(t *testing.T) {
	v := &sigv4.Verifier{Region: region, Secrets: func(_ context.Context, ak string) (string, error) {
		if ak != accessKey {
			return "", sigv4.ErrUnknownKey
		}
		return secret, nil
	}}
	at := time.Date(2026, 12, 8, 1, 2, 3, 0, time.UTC)
	policy := base64.StdEncoding.EncodeToString([]byte(`{"expiration":"2026-12-09T00:00:00Z","conditions":[{"bucket":"b"}]}`))
	good := sigv4.PolicyForm{Credential: accessKey + "/20261208/" + region + "/s3/aws4_request", Date: "20261208T010203Z",
		Policy: policy, Signature: signer.PostPresignSignatureV4(policy, at, secret, region)}
	ak, err := v.VerifyPolicy(context.Background(), good)
	require.NoError(t, err)
	require.Equal(t, accessKey, ak)

	for name, tc := range map[string]struct {
		change func(*sigv4.PolicyForm)
		code   string
	}{
		"another policy":    {func(f *sigv4.PolicyForm) { f.Policy = policy + "=" }, "SignatureDoesNotMatch"},
		"another signature": {func(f *sigv4.PolicyForm) { f.Signature = signer.PostPresignSignatureV4(policy, at, "x", region) }, "SignatureDoesNotMatch"},
		"no signature":      {func(f *sigv4.PolicyForm) { f.Signature = "" }, "SignatureDoesNotMatch"},
		"unknown key":       {func(f *sigv4.PolicyForm) { f.Credential = "NOPE/20261208/" + region + "/s3/aws4_request" }, "InvalidAccessKeyId"},
		"another region":    {func(f *sigv4.PolicyForm) { f.Credential = accessKey + "/20261208/eu-west-1/s3/aws4_request" }, "AuthorizationHeaderMalformed"},
		"another service":   {func(f *sigv4.PolicyForm) { f.Credential = accessKey + "/20261208/" + region + "/iam/aws4_request" }, "AuthorizationHeaderMalformed"},
		"another day":       {func(f *sigv4.PolicyForm) { f.Date = "20261209T010203Z" }, "AuthorizationHeaderMalformed"},
		"bad credential":    {func(f *sigv4.PolicyForm) { f.Credential = accessKey }, "AuthorizationHeaderMalformed"},
		"bad date":          {func(f *sigv4.PolicyForm) { f.Date = "yesterday" }, "AccessDenied"},
	} {
		t.Run(name, func(t *testing.T) {
			f := good
			tc.change(&f)
			_, err := v.VerifyPolicy(context.Background(), f)
			var e *sigv4.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.code, e.Code)
		})
	}
}
