// Package signedurl signs and checks the URLs through which a client reads
// a blob straight from the storage node that holds it: the coordinator,
// which knows the cluster token, signs the blob id, an optional byte range
// and an expiry; the node, which knows the same token, checks them, so that
// a URL reads exactly what it was issued for, only until it expires, and
// cannot be forged or altered without the token.
package signedurl

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// The query parameters of a signed URL.
const (
	ParamExpires   = "expires"   // Unix seconds after which the URL is refused
	ParamRange     = "range"     // the byte range it reads, as in a Range header's "bytes=a-b"; absent: the whole blob
	ParamSignature = "signature" // lower-case hex HMAC-SHA256 of the rest
)

// Key is the secret URLs are signed with, derived from the cluster token so
// that a signature never reveals anything of the token and a token is never
// used for two purposes.
type Key []byte

// KeyFrom derives the signing key of a cluster token; an empty token gives
// a nil key, with which nothing is signed.
func KeyFrom(clusterToken string) Key {
	if clusterToken == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(clusterToken))
	m.Write([]byte("dfs signed blob read v1"))
	return m.Sum(nil)
}

// Errors of Check.
var (
	ErrUnsigned  = errors.New("the URL is not signed")
	ErrExpired   = errors.New("the signed URL has expired")
	ErrMismatch  = errors.New("the URL's signature does not match it")
	ErrMalformed = errors.New("the signed URL is malformed")
)

// Sign returns the query that signs a read of blob id (rng "" for the whole
// blob, else "bytes=a-b") until expires.
func (k Key) Sign(id, rng string, expires time.Time) url.Values {
	q := url.Values{}
	exp := strconv.FormatInt(expires.Unix(), 10)
	q.Set(ParamExpires, exp)
	if rng != "" {
		q.Set(ParamRange, rng)
	}
	q.Set(ParamSignature, hex.EncodeToString(k.mac(id, rng, exp)))
	return q
}

// Signed says whether q carries a signature at all.
func Signed(q url.Values) bool { return q.Has(ParamSignature) }

// Check verifies that q signs a read of blob id at time now, and returns
// the range it was signed for ("" for the whole blob).
func (k Key) Check(id string, q url.Values, now time.Time) (string, error) {
	sig, exp := q.Get(ParamSignature), q.Get(ParamExpires)
	if sig == "" {
		return "", ErrUnsigned
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || len(q[ParamSignature]) != 1 || len(q[ParamExpires]) != 1 || len(q[ParamRange]) > 1 {
		return "", ErrMalformed
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return "", ErrMalformed
	}
	rng := q.Get(ParamRange)
	if !hmac.Equal(got, k.mac(id, rng, exp)) {
		return "", ErrMismatch
	}
	if now.Unix() > unix {
		return "", ErrExpired
	}
	return rng, nil
}

// mac is the signature of the read: every field on a line of its own, so
// that no two different reads give one text.
func (k Key) mac(id, rng, exp string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("GET\n" + id + "\n" + rng + "\n" + exp))
	return m.Sum(nil)
}
