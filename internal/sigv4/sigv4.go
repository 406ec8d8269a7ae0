// Package sigv4 checks AWS Signature Version 4 (and the older Version 2)
// on incoming requests: the
// Authorization header, presigned query strings, the x-amz-content-sha256
// payload hash, a body's x-amz-checksum-* header, and aws-chunked streaming bodies (signed chunk by chunk or
// unsigned, with trailing checksums), written from the AWS specification.
// Errors carry the S3 error code a client expects.
package sigv4

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Algorithm is the only signing algorithm accepted.
const Algorithm = "AWS4-HMAC-SHA256"

// Payload hash values a client may send in x-amz-content-sha256.
const (
	UnsignedPayload          = "UNSIGNED-PAYLOAD"
	StreamingSigned          = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingSignedTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// MaxSkew is how far a signed request's time may be from the server's.
const MaxSkew = 15 * time.Minute

// maxPresignExpiry is the longest validity a presigned URL may ask for.
const maxPresignExpiry = 7 * 24 * time.Hour

const timeFormat = "20060102T150405Z"

// Error is a failed check, with the S3 error code and HTTP status to answer.
type Error struct {
	Code    string
	Status  int
	Message string
	// Region is set on a request signed for another region: the one to
	// sign for, which S3 answers in the error's <Region> element.
	Region string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func fail(status int, code, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

func malformed(format string, args ...any) *Error {
	return fail(http.StatusBadRequest, "AuthorizationHeaderMalformed", format, args...)
}

func mismatch() *Error {
	return fail(http.StatusForbidden, "SignatureDoesNotMatch",
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}

// ErrUnknownKey is what a Secrets function returns for an access key it does
// not know.
var ErrUnknownKey = errors.New("unknown access key")

// Secrets returns the secret of an access key, or ErrUnknownKey.
type Secrets func(ctx context.Context, accessKey string) (string, error)

// Verifier checks requests signed for one region.
type Verifier struct {
	Region  string
	Secrets Secrets
	// V2 accepts Signature Version 2 too (the S3 API does; the REST API
	// takes V4 only).
	V2 bool
	// Domain is the virtual-hosted domain (S3_DOMAIN), whose bucket a
	// Signature V2 signs as part of the resource; "" for none.
	Domain string
	// Now is the server's clock; nil means time.Now.
	Now func() time.Time

	keys signingKeys
}

// signingKeys keeps the derived signing keys (four HMACs each) by the
// secret and scope they come from. An entry is only ever used with the same
// secret it was derived from, so a changed or revoked secret never meets an
// old key: it is a cache of a pure function, bounded by clearing it whole.
type signingKeys struct {
	mu sync.Mutex
	m  map[signingScope][]byte
}

type signingScope struct{ secret, date, region, service string }

// maxSigningKeys bounds the cache; a day's keys of as many access keys.
const maxSigningKeys = 4096

func (c *signingKeys) get(secret, date, region, service string) []byte {
	s := signingScope{secret, date, region, service}
	c.mu.Lock()
	k, ok := c.m[s]
	c.mu.Unlock()
	if ok {
		return k
	}
	k = signingKey(secret, date, region, service)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSigningKeys {
		c.m = make(map[signingScope][]byte)
	}
	c.m[s] = k
	c.mu.Unlock()
	return k
}

// Signed reports whether r carries a Signature V4 or V2, in its header or
// query.
func Signed(r *http.Request) bool {
	return signedV2(r) || strings.HasPrefix(r.Header.Get("Authorization"), Algorithm+" ") || r.URL.Query().Get("X-Amz-Algorithm") != ""
}

// auth is what a request says about its signature.
type auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
	time                             time.Time
	payload                          string
	presigned                        bool
	expires                          time.Duration // of a presigned URL
}

func (a auth) scope() string { return a.date + "/" + a.region + "/" + a.service + "/aws4_request" }

// Verify checks r's signature and returns the access key that signed it.
// On success r.Body is replaced by a reader that checks the payload as it
// is read (its hash, or each streaming chunk's signature and the trailing
// checksum) and fails at the end, or at the first bad chunk, when it does
// not match: a caller that stores the body must read it to io.EOF before
// it commits anything.
func (v *Verifier) Verify(r *http.Request) (string, error) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if v.V2 && signedV2(r) {
		return v.verifyV2(r, now())
	}
	a, err := parse(r)
	if err != nil {
		return "", err
	}
	if a.region != v.Region {
		e := malformed("The authorization header is malformed; the region '%s' is wrong; expecting '%s'", a.region, v.Region)
		e.Region = v.Region
		return "", e
	}
	t := now()
	if a.presigned {
		if t.Before(a.time.Add(-MaxSkew)) {
			return "", fail(http.StatusForbidden, "AccessDenied", "Request is not valid yet")
		}
		if t.After(a.time.Add(a.expires)) {
			return "", fail(http.StatusForbidden, "AccessDenied", "Request has expired")
		}
	} else if d := t.Sub(a.time); d > MaxSkew || d < -MaxSkew {
		return "", fail(http.StatusForbidden, "RequestTimeTooSkewed",
			"The difference between the request time and the server's time is too large.")
	}
	secret, err := v.Secrets(r.Context(), a.accessKey)
	if errors.Is(err, ErrUnknownKey) {
		return "", fail(http.StatusForbidden, "InvalidAccessKeyId",
			"The AWS Access Key Id you provided does not exist in our records.")
	}
	if err != nil {
		return "", err
	}
	key := v.keys.get(secret, a.date, a.region, a.service)
	want := hex.EncodeToString(hmacSHA256(key, stringToSign(a, canonicalRequest(r, a))))
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return "", mismatch()
	}
	if err := v.wrapBody(r, a, key); err != nil {
		return "", err
	}
	return a.accessKey, nil
}

func parse(r *http.Request) (auth, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		return parseHeader(r, h)
	}
	return parseQuery(r)
}

func parseHeader(r *http.Request, h string) (auth, error) {
	rest, ok := strings.CutPrefix(h, Algorithm+" ")
	if !ok {
		return auth{}, fail(http.StatusBadRequest, "InvalidArgument", "unsupported authorization type; use %s", Algorithm)
	}
	var a auth
	var credential, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return auth{}, malformed("the authorization header is malformed: %q", part)
		}
		switch k {
		case "Credential":
			credential = val
		case "SignedHeaders":
			signed = val
		case "Signature":
			a.signature = val
		}
	}
	if err := a.setCredential(credential); err != nil {
		return auth{}, err
	}
	if signed == "" || a.signature == "" {
		return auth{}, malformed("the authorization header needs Credential, SignedHeaders and Signature")
	}
	a.signedHeaders = strings.Split(signed, ";")
	date := r.Header.Get("X-Amz-Date")
	if date == "" {
		date = r.Header.Get("Date")
	}
	if err := a.setTime(date); err != nil {
		return auth{}, err
	}
	a.payload = r.Header.Get("X-Amz-Content-Sha256")
	if a.payload == "" {
		return auth{}, fail(http.StatusBadRequest, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
	}
	if a.payload != UnsignedPayload && !strings.HasPrefix(a.payload, "STREAMING-") {
		if b, err := hex.DecodeString(a.payload); err != nil || len(b) != sha256.Size {
			return auth{}, fail(http.StatusBadRequest, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-… or a SHA-256 in hex")
		}
	}
	return a, a.checkSignedHeaders(r)
}

func parseQuery(r *http.Request) (auth, error) {
	q := r.URL.Query()
	if alg := q.Get("X-Amz-Algorithm"); alg != Algorithm {
		return auth{}, fail(http.StatusBadRequest, "AuthorizationQueryParametersError", "X-Amz-Algorithm must be %s", Algorithm)
	}
	var a auth
	a.presigned = true
	if err := a.setCredential(q.Get("X-Amz-Credential")); err != nil {
		return auth{}, err
	}
	if err := a.setTime(q.Get("X-Amz-Date")); err != nil {
		return auth{}, err
	}
	secs, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || secs < 0 || time.Duration(secs)*time.Second > maxPresignExpiry {
		return auth{}, fail(http.StatusBadRequest, "AuthorizationQueryParametersError",
			"X-Amz-Expires must be a number of seconds from 0 to %d", int(maxPresignExpiry.Seconds()))
	}
	a.expires = time.Duration(secs) * time.Second
	a.signedHeaders = strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	a.signature = q.Get("X-Amz-Signature")
	if a.signature == "" || q.Get("X-Amz-SignedHeaders") == "" {
		return auth{}, fail(http.StatusBadRequest, "AuthorizationQueryParametersError", "X-Amz-SignedHeaders and X-Amz-Signature are required")
	}
	a.payload = UnsignedPayload
	if p := q.Get("X-Amz-Content-Sha256"); p != "" {
		a.payload = p
	}
	return a, a.checkSignedHeaders(r)
}

func (a *auth) setCredential(c string) error {
	parts := strings.Split(c, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return malformed("the credential %q is not ACCESS_KEY/DATE/REGION/SERVICE/aws4_request", c)
	}
	a.accessKey, a.date, a.region, a.service = parts[0], parts[1], parts[2], parts[3]
	return nil
}

func (a *auth) setTime(s string) error {
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		if t, err = http.ParseTime(s); err != nil {
			return fail(http.StatusForbidden, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
		}
	}
	a.time = t
	var day [8]byte
	if string(t.UTC().AppendFormat(day[:0], "20060102")) != a.date {
		return malformed("the credential's date %s is not the request's", a.date)
	}
	return nil
}

// checkSignedHeaders requires host among the signed headers, which keeps a
// signature from being replayed against another endpoint, and, with a
// signed payload, x-amz-content-sha256 too, so that the hash the body is
// checked against is the one signed.
func (a auth) checkSignedHeaders(r *http.Request) error {
	if !slices.Contains(a.signedHeaders, "host") {
		return fail(http.StatusForbidden, "AccessDenied", "the host header must be signed")
	}
	if !a.presigned && !slices.Contains(a.signedHeaders, "x-amz-content-sha256") {
		return fail(http.StatusForbidden, "AccessDenied", "x-amz-content-sha256 must be signed")
	}
	if !slices.IsSorted(a.signedHeaders) {
		return malformed("SignedHeaders must be sorted")
	}
	return nil
}

// canonicalRequest builds the request the signature is over.
func canonicalRequest(r *http.Request, a auth) string {
	var b strings.Builder
	b.Grow(256)
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r.URL.Path))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery, a.presigned))
	b.WriteByte('\n')
	for _, h := range a.signedHeaders {
		b.WriteString(h)
		b.WriteByte(':')
		b.WriteString(headerValue(r, h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(a.signedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(a.payload)
	return b.String()
}

// headerValue is a signed header's canonical value: every value joined by
// commas, each trimmed with inner runs of spaces collapsed.
func headerValue(r *http.Request, name string) string {
	var vals []string
	switch name {
	case "host":
		vals = []string{r.Host}
	case "content-length":
		vals = r.Header.Values("Content-Length")
		if len(vals) == 0 && r.ContentLength >= 0 {
			vals = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	case "transfer-encoding":
		vals = r.TransferEncoding
	default:
		vals = r.Header.Values(name)
	}
	if len(vals) == 1 && !needsFolding(vals[0]) {
		return vals[0]
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// needsFolding reports whether a header value may have spaces to trim or
// collapse: most have none, and are signed as they came. Any byte outside
// ASCII takes the slow path too, where strings.Fields also knows Unicode's
// spaces.
func needsFolding(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\t', c == '\n', c == '\v', c == '\f', c == '\r', c >= 0x80:
			return true
		case c == ' ':
			if i == 0 || i == len(v)-1 || v[i+1] == ' ' {
				return true
			}
		}
	}
	return false
}

// canonicalURI encodes every byte of the path but the unreserved ones and
// the slashes, once, as S3 signs it.
func canonicalURI(p string) string {
	if p == "" {
		return "/"
	}
	return encode(p, false)
}

func canonicalQuery(raw string, presigned bool) string {
	type kv struct{ k, v string }
	var pairs []kv
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, _ = url.PathUnescape(strings.ReplaceAll(k, "+", "%20"))
		v, _ = url.PathUnescape(strings.ReplaceAll(v, "+", "%20"))
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		pairs = append(pairs, kv{encode(k, true), encode(v, true)})
	}
	slices.SortFunc(pairs, func(a, b kv) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.k + "=" + p.v
	}
	return strings.Join(parts, "&")
}

// encode percent-encodes s as SigV4 does: A-Z a-z 0-9 - . _ ~ stay, and '/'
// too unless slash is set.
func encode(s string, slash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func stringToSign(a auth, canonical string) []byte {
	sum := sha256.Sum256([]byte(canonical))
	b := make([]byte, 0, len(Algorithm)+len(timeFormat)+len(a.date)+len(a.region)+len(a.service)+len("/aws4_request")+2*sha256.Size+8)
	b = append(b, Algorithm+"\n"...)
	b = a.time.UTC().AppendFormat(b, timeFormat)
	b = append(b, '\n')
	b = append(b, a.date...)
	b = append(b, '/')
	b = append(b, a.region...)
	b = append(b, '/')
	b = append(b, a.service...)
	b = append(b, "/aws4_request\n"...)
	return hex.AppendEncode(b, sum[:])
}

func hmacSHA256(key []byte, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), []byte(date))
	k = hmacSHA256(k, []byte(region))
	k = hmacSHA256(k, []byte(service))
	return hmacSHA256(k, []byte("aws4_request"))
}

// wrapBody puts the payload check in front of r.Body, and the check of an
// x-amz-checksum-* header the client sent with a body (checkHeaderSum).
func (v *Verifier) wrapBody(r *http.Request, a auth, key []byte) error {
	if err := v.wrapPayload(r, a, key); err != nil {
		return err
	}
	if a.payload == StreamingSignedTrailer || a.payload == StreamingUnsignedTrailer {
		return nil // the checksum comes in the trailer, checked there
	}
	return checkHeaderSum(r)
}

func (v *Verifier) wrapPayload(r *http.Request, a auth, key []byte) error {
	switch a.payload {
	case UnsignedPayload:
		return nil
	case StreamingSigned, StreamingSignedTrailer, StreamingUnsignedTrailer:
		decoded, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil || decoded < 0 {
			return fail(http.StatusLengthRequired, "MissingContentLength", "x-amz-decoded-content-length is required with %s", a.payload)
		}
		// A trailer this package cannot check would pass unchecked, the
		// client believing its checksum verified.
		if name := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Amz-Trailer"))); a.payload != StreamingSigned &&
			name != "" && checksumHash(name) == nil {
			return fail(http.StatusBadRequest, "InvalidRequest", "the trailer %q named by x-amz-trailer is not a checksum dfs supports", name)
		}
		r.Body = newChunkedReader(r.Body, chunkedOptions{
			signed: a.payload != StreamingUnsignedTrailer, trailer: a.payload != StreamingSigned,
			key: key, seed: a.signature, time: a.time.UTC().Format(timeFormat), scope: a.scope(),
			declaredTrailer: r.Header.Get("X-Amz-Trailer"), length: decoded,
		})
		r.ContentLength = decoded
		return nil
	}
	if strings.HasPrefix(a.payload, "STREAMING-") {
		return fail(http.StatusNotImplemented, "NotImplemented", "payload type %s is not supported", a.payload)
	}
	if r.Body == nil || r.Body == http.NoBody {
		// No body (a GET, a HEAD): its hash is known without reading.
		if !strings.EqualFold(a.payload, emptySHA256) {
			return errContentSHA256
		}
		return nil
	}
	want, _ := hex.DecodeString(a.payload)
	r.Body = &hashingReader{r: r.Body, h: sha256.New(), want: want, mismatch: errContentSHA256}
	return nil
}

// headerSums are the x-amz-checksum-* headers that carry a checksum of the
// whole body; current SDKs send one with every PutObject, UploadPart and
// DeleteObjects. (x-amz-checksum-algorithm, -type and -mode name features,
// not checksums.)
var headerSums = []string{"x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
	"x-amz-checksum-sha1", "x-amz-checksum-sha256"}

// checkHeaderSum puts the check of the body's x-amz-checksum-* header, if
// it has one, in front of r.Body: the read fails at the end with BadDigest
// when the bytes do not match, as S3 refuses them, so nothing is stored.
func checkHeaderSum(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	name, value := "", ""
	for _, h := range headerSums {
		if v := r.Header.Get(h); v != "" {
			if name != "" {
				return fail(http.StatusBadRequest, "InvalidRequest", "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
			}
			name, value = h, v
		}
	}
	if name == "" {
		return nil
	}
	h := checksumHash(name)
	want, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(want) != h.Size() {
		return fail(http.StatusBadRequest, "InvalidRequest", "Value for %s header is invalid.", name)
	}
	r.Body = &hashingReader{r: r.Body, h: h, want: want,
		mismatch: fail(http.StatusBadRequest, "BadDigest", "The %s you specified did not match the calculated checksum.", name)}
	return nil
}

var errContentSHA256 = fail(http.StatusBadRequest, "XAmzContentSHA256Mismatch",
	"The provided 'x-amz-content-sha256' header does not match what was computed.")

// hashingReader fails at EOF with mismatch when the body's hash is not
// want: the signed SHA-256 of the payload, or the checksum of an
// x-amz-checksum-* header.
type hashingReader struct {
	r        io.ReadCloser
	h        hash.Hash
	want     []byte
	mismatch *Error
}

func (h *hashingReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	if err == io.EOF && !hmac.Equal(h.h.Sum(nil), h.want) {
		return n, h.mismatch
	}
	return n, err
}

func (h *hashingReader) Close() error { return h.r.Close() }
