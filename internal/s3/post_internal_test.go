package s3

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestParsePolicy: the shapes a POST policy's conditions take, and what
// makes a document no policy.
func TestParsePolicy(t *testing.T) {
	enc := func(doc string) string { return base64.StdEncoding.EncodeToString([]byte(doc)) }
	p, err := parsePolicy(enc(`{"expiration":"2026-12-08T10:00:00.000Z","conditions":[{"Bucket":"b"},
		["Starts-With","$Key","up/"],["EQ","$X-Amz-Meta-A","1"],["content-length-range","10",20]]}`))
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC), p.expiration)
	require.Equal(t, []condition{{"bucket", "eq", "b"}, {"key", "starts-with", "up/"}, {"x-amz-meta-a", "eq", "1"}}, p.conds)
	require.Equal(t, [2]int64{10, 20}, [2]int64{p.lengthMin, p.lengthMax})

	for name, doc := range map[string]string{
		"not base64":        "!!",
		"not JSON":          enc(`{`),
		"no expiration":     enc(`{"conditions":[]}`),
		"bad expiration":    enc(`{"expiration":"tomorrow","conditions":[]}`),
		"no conditions":     enc(`{"expiration":"2026-12-08T10:00:00Z"}`),
		"two properties":    enc(`{"expiration":"2026-12-08T10:00:00Z","conditions":[{"a":"1","b":"2"}]}`),
		"unknown operator":  enc(`{"expiration":"2026-12-08T10:00:00Z","conditions":[["ends-with","$key","x"]]}`),
		"field without $":   enc(`{"expiration":"2026-12-08T10:00:00Z","conditions":[["eq","key","x"]]}`),
		"two elements":      enc(`{"expiration":"2026-12-08T10:00:00Z","conditions":[["eq","$key"]]}`),
		"negative range":    enc(`{"expiration":"2026-12-08T10:00:00Z","conditions":[["content-length-range",-1,5]]}`),
		"range not numbers": enc(`{"expiration":"2026-12-08T10:00:00Z","conditions":[["content-length-range","a",5]]}`),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parsePolicy(doc)
			require.Equal(t, "InvalidPolicyDocument", toS3(err).Code)
		})
	}
}

// TestPolicyCheck: expiration, conditions and the coverage of every field.
func TestPolicyCheck(t *testing.T) {
	now := time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC)
	p := &postPolicy{expiration: now.Add(time.Minute), lengthMax: -1, conds: []condition{
		{"bucket", "eq", "b"}, {"key", "starts-with", "up/"}, {"content-type", "starts-with", ""}}}
	fields := map[string]string{"key": "up/${filename}", "content-type": "text/plain", "policy": "…",
		"x-amz-signature": "…", "x-ignore-me": "1"}
	require.NoError(t, p.check(fields, "b", now))
	for name, tc := range map[string]struct {
		fields map[string]string
		bucket string
		at     time.Time
	}{
		"expired":           {fields, "b", now.Add(time.Minute)},
		"other bucket":      {fields, "c", now},
		"key outside":       {map[string]string{"key": "down/x", "content-type": ""}, "b", now},
		"condition unmet":   {map[string]string{"key": "up/x"}, "b", now},
		"field not covered": {map[string]string{"key": "up/x", "content-type": "", "acl": "private"}, "b", now},
	} {
		t.Run(name, func(t *testing.T) {
			e := toS3(p.check(tc.fields, tc.bucket, tc.at))
			require.Equal(t, "AccessDenied", e.Code)
			require.Contains(t, e.Message, "Invalid according to Policy")
		})
	}
}
