package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Signature Version 2, which aws-cli v1's presigned URLs, s3cmd with
// signature_v2 and older tools still send: an HMAC-SHA1 over S3's V2
// string to sign, in the header (Authorization: AWS KEY:SIGNATURE) or the
// query (AWSAccessKeyId, Expires, Signature). It has no region and signs no
// payload; the key lookup and the refusals are V4's.

// v2Prefix opens a V2 Authorization header.
const v2Prefix = "AWS "

// v2SubResources are the query parameters V2 signs, as S3 lists them; any
// other parameter is left out of the string to sign.
var v2SubResources = []string{
	"accelerate", "acl", "analytics", "cors", "delete", "encryption", "intelligent-tiering", "inventory", "legal-hold",
	"lifecycle", "location", "logging", "metrics", "notification", "object-lock", "ownershipControls", "partNumber",
	"policy", "policyStatus", "publicAccessBlock", "replication", "requestPayment", "response-cache-control",
	"response-content-disposition", "response-content-encoding", "response-content-language", "response-content-type",
	"response-expires", "restore", "retention", "select", "select-type", "tagging", "torrent", "uploadId", "uploads",
	"versionId", "versioning", "versions", "website",
}

func signedV2(r *http.Request) bool {
	if strings.HasPrefix(r.Header.Get("Authorization"), v2Prefix) {
		return true
	}
	q := r.URL.Query()
	return q.Has("AWSAccessKeyId") && q.Has("Signature")
}

// verifyV2 checks a V2 signature, in the header or the query, and returns
// the access key that signed r.
func (v *Verifier) verifyV2(r *http.Request, now time.Time) (string, error) {
	var accessKey, signature, date string
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), v2Prefix); ok {
		var found bool
		accessKey, signature, found = strings.Cut(h, ":")
		if !found || accessKey == "" || signature == "" {
			return "", fail(http.StatusBadRequest, "InvalidArgument", "the authorization header must be AWS ACCESS_KEY:SIGNATURE")
		}
		// With x-amz-date, the date is signed among the x-amz-* headers
		// and the Date line is empty.
		stamp := r.Header.Get("X-Amz-Date")
		if stamp == "" {
			stamp, date = r.Header.Get("Date"), r.Header.Get("Date")
		}
		t, err := http.ParseTime(stamp)
		if err != nil {
			// V2 clients often write the zone as +0000.
			t, err = time.Parse(time.RFC1123Z, stamp)
		}
		if err != nil {
			return "", fail(http.StatusForbidden, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
		}
		if d := now.Sub(t); d > MaxSkew || d < -MaxSkew {
			return "", fail(http.StatusForbidden, "RequestTimeTooSkewed",
				"The difference between the request time and the server's time is too large.")
		}
	} else {
		q := r.URL.Query()
		accessKey, signature, date = q.Get("AWSAccessKeyId"), q.Get("Signature"), q.Get("Expires")
		expires, err := strconv.ParseInt(date, 10, 64)
		if err != nil || accessKey == "" || signature == "" {
			return "", fail(http.StatusForbidden, "AccessDenied", "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
		}
		if now.After(time.Unix(expires, 0)) {
			return "", fail(http.StatusForbidden, "AccessDenied", "Request has expired")
		}
	}
	secret, err := v.Secrets(r.Context(), accessKey)
	if errors.Is(err, ErrUnknownKey) {
		return "", fail(http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
	}
	if err != nil {
		return "", err
	}
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(stringToSignV2(r, date, v.Domain)))
	want := base64.StdEncoding.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(signature)) {
		return "", mismatch()
	}
	if err := checkHeaderSum(r); err != nil {
		return "", err
	}
	return accessKey, nil
}

// stringToSignV2 is S3's V2 string to sign: the method, Content-MD5,
// Content-Type, the date (or a presigned URL's Expires), the x-amz-*
// headers and the resource. domain, when set, is the virtual-hosted
// domain, whose bucket the resource starts with.
func stringToSignV2(r *http.Request, date, domain string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n" + r.Header.Get("Content-MD5") + "\n" + r.Header.Get("Content-Type") + "\n" + date + "\n")
	var names []string
	for name := range r.Header {
		if lower := strings.ToLower(name); strings.HasPrefix(lower, "x-amz-") {
			names = append(names, lower)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		vals := slices.Clone(r.Header.Values(name))
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(name + ":" + strings.Join(vals, ",") + "\n")
	}
	if bucket := virtualBucket(r.Host, domain); bucket != "" {
		b.WriteString("/" + bucket)
	}
	p := r.URL.EscapedPath()
	if p == "" {
		p = "/"
	}
	b.WriteString(p)
	var subs []string
	for part := range strings.SplitSeq(r.URL.RawQuery, "&") {
		k, val, hasValue := strings.Cut(part, "=")
		k, _ = url.QueryUnescape(k)
		if !slices.Contains(v2SubResources, k) {
			continue
		}
		if hasValue {
			val, _ = url.QueryUnescape(val)
			k += "=" + val
		}
		subs = append(subs, k)
	}
	if len(subs) > 0 {
		slices.Sort(subs)
		b.WriteString("?" + strings.Join(subs, "&"))
	}
	return b.String()
}

// virtualBucket is the bucket a virtual-hosted host names under domain, ""
// for a path-style request.
func virtualBucket(host, domain string) string {
	if domain == "" {
		return ""
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	b, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(domain))
	if !ok {
		return ""
	}
	return b
}
