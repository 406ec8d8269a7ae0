package storagenode_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/signedurl"
)

// TestSignedReads: a URL the coordinator signed with the cluster token reads
// the blob it names, and the range it names, without the token, until it
// expires; any change to it, another use or an old one is refused with 403.
func TestSignedReads(t *testing.T) {
	n := startNode(t, map[string]string{"CLUSTER_TOKEN": "s3cret"})
	key := signedurl.KeyFrom("s3cret")
	id, other := uuid.NewString(), uuid.NewString()
	data := []byte("0123456789abcdefghij")
	resp, _ := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = n.put(t, other, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	soon := time.Now().Add(time.Minute)
	noToken := map[string]string{"Authorization": ""}
	path := func(id string, rng string, exp time.Time) string {
		return "/internal/blobs/" + id + "?" + key.Sign(id, rng, exp).Encode()
	}

	resp, body := n.request(t, http.MethodGet, path(id, "", soon), nil, noToken)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, data, body)
	resp, body = n.request(t, http.MethodGet, path(id, "", soon), nil, map[string]string{"Authorization": "", "Range": "bytes=2-4"})
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "a whole-blob URL reads any range of it")
	require.Equal(t, "234", string(body))
	resp, body = n.request(t, http.MethodGet, path(id, "bytes=10-14", soon), nil, noToken)
	require.Equal(t, http.StatusPartialContent, resp.StatusCode, "%s", body)
	require.Equal(t, "abcde", string(body), "a ranged URL reads its range")
	resp, _ = n.request(t, http.MethodHead, path(id, "", soon), nil, noToken)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	refused := []struct {
		name   string
		method string
		path   string
		header map[string]string
	}{
		{"expired", http.MethodGet, path(id, "", time.Now().Add(-time.Second)), noToken},
		{"another blob's id", http.MethodGet, "/internal/blobs/" + other + "?" + key.Sign(id, "", soon).Encode(), noToken},
		{"another range asked", http.MethodGet, path(id, "bytes=10-14", soon), map[string]string{"Authorization": "", "Range": "bytes=0-19"}},
		{"another token's signature", http.MethodGet, "/internal/blobs/" + id + "?" + signedurl.KeyFrom("other").Sign(id, "", soon).Encode(), noToken},
		{"a write", http.MethodPut, path(id, "", soon), map[string]string{"Authorization": "", "X-Checksum-Sha256": checksum(data)}},
		{"a delete", http.MethodDelete, path(id, "", soon), noToken},
		{"the checksum route", http.MethodGet, "/internal/blobs/" + id + "/checksum?" + key.Sign(id, "", soon).Encode(), noToken},
		{"the listing", http.MethodGet, "/internal/blobs?" + key.Sign(id, "", soon).Encode(), noToken},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			if tc.method == http.MethodPut {
				b = data
			}
			resp, body := n.request(t, tc.method, tc.path, b, tc.header)
			requireError(t, resp, body, http.StatusForbidden, "FORBIDDEN")
		})
	}
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, noToken)
	requireError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
	resp, body = n.request(t, http.MethodGet, "/internal/blobs/"+id, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the token still reads: %s", body)
}
