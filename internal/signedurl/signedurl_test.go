package signedurl_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/signedurl"
)

func TestSignedReadsCheckOnlyAsIssued(t *testing.T) {
	k := signedurl.KeyFrom("cluster-token")
	now := time.Unix(1_800_000_000, 0)
	const id = "0b5e8f5e-8d7c-4c43-9a43-3f1c1b0f8a11"
	whole := k.Sign(id, "", now.Add(time.Minute))
	part := k.Sign(id, "bytes=10-19", now.Add(time.Minute))

	rng, err := k.Check(id, whole, now)
	require.NoError(t, err)
	require.Empty(t, rng)
	rng, err = k.Check(id, part, now.Add(time.Minute))
	require.NoError(t, err, "valid through its expiry second")
	require.Equal(t, "bytes=10-19", rng)

	with := func(q url.Values, key, value string) url.Values {
		c := url.Values{}
		for k, v := range q {
			c[k] = append([]string(nil), v...)
		}
		if value == "" {
			c.Del(key)
		} else {
			c.Set(key, value)
		}
		return c
	}
	cases := []struct {
		name string
		key  signedurl.Key
		id   string
		q    url.Values
		now  time.Time
		want error
	}{
		{"expired", k, id, whole, now.Add(61 * time.Second), signedurl.ErrExpired},
		{"another blob", k, "1b5e8f5e-8d7c-4c43-9a43-3f1c1b0f8a11", whole, now, signedurl.ErrMismatch},
		{"another range", k, id, with(part, signedurl.ParamRange, "bytes=0-19"), now, signedurl.ErrMismatch},
		{"range dropped", k, id, with(part, signedurl.ParamRange, ""), now, signedurl.ErrMismatch},
		{"range added", k, id, with(whole, signedurl.ParamRange, "bytes=0-1"), now, signedurl.ErrMismatch},
		{"expiry pushed back", k, id, with(whole, signedurl.ParamExpires, "1900000000"), now, signedurl.ErrMismatch},
		{"another token", signedurl.KeyFrom("other-token"), id, whole, now, signedurl.ErrMismatch},
		{"unsigned", k, id, with(whole, signedurl.ParamSignature, ""), now, signedurl.ErrUnsigned},
		{"signature not hex", k, id, with(whole, signedurl.ParamSignature, "zz"), now, signedurl.ErrMalformed},
		{"expiry not a number", k, id, with(whole, signedurl.ParamExpires, "soon"), now, signedurl.ErrMalformed},
		{"two signatures", k, id, url.Values{
			signedurl.ParamExpires: whole[signedurl.ParamExpires], signedurl.ParamSignature: {whole.Get(signedurl.ParamSignature), "00"},
		}, now, signedurl.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.key.Check(tc.id, tc.q, tc.now)
			require.ErrorIs(t, err, tc.want)
		})
	}
	require.Nil(t, signedurl.KeyFrom(""), "no token, no key")
	require.True(t, signedurl.Signed(whole))
	require.False(t, signedurl.Signed(url.Values{}))
}
