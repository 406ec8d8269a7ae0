package sigv4

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"net/http"
)

// PolicyForm is what a browser upload's form says about its signature: the
// fields x-amz-credential, x-amz-date and x-amz-signature, and the base64
// policy document they sign.
type PolicyForm struct {
	Credential, Date, Signature, Policy string
}

// VerifyPolicy checks the signature of a POST policy, a browser upload's
// authentication: the HMAC of the base64 policy, as sent, under the
// signing key of the credential's scope. It returns the access key that
// signed it. The form's time is not held to MaxSkew: a policy is valid
// until its own expiration, which the caller checks.
func (v *Verifier) VerifyPolicy(ctx context.Context, f PolicyForm) (string, error) {
	var a auth
	if err := a.setCredential(f.Credential); err != nil {
		return "", err
	}
	if err := a.setTime(f.Date); err != nil {
		return "", err
	}
	if a.service != "s3" {
		return "", malformed("the credential's service is '%s'; expecting 's3'", a.service)
	}
	if a.region != v.Region {
		e := malformed("the credential's region '%s' is wrong; expecting '%s'", a.region, v.Region)
		e.Region = v.Region
		return "", e
	}
	secret, err := v.Secrets(ctx, a.accessKey)
	if errors.Is(err, ErrUnknownKey) {
		return "", fail(http.StatusForbidden, "InvalidAccessKeyId",
			"The AWS Access Key Id you provided does not exist in our records.")
	}
	if err != nil {
		return "", err
	}
	key := v.keys.get(secret, a.date, a.region, a.service)
	want := hex.EncodeToString(hmacSHA256(key, []byte(f.Policy)))
	if !hmac.Equal([]byte(want), []byte(f.Signature)) {
		return "", mismatch()
	}
	return a.accessKey, nil
}
