package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/auth"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/sigv4"
)

const (
	rootKey    = "ROOTKEY"
	rootSecret = "root-secret-123"
)

func openStore(t *testing.T) *sqlite.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "metadata.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newKeys(t *testing.T, store auth.Store, root, secret string) *auth.Keys {
	k, err := auth.New(store, root, secret, nil)
	require.NoError(t, err)
	return k
}

func TestKeysLifecycle(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	keys := newKeys(t, store, rootKey, rootSecret)

	gen, err := keys.Create(ctx, "backup", "", "", false)
	require.NoError(t, err)
	require.Regexp(t, `^DFS[A-Z2-7]{17}$`, gen.AccessKey)
	require.GreaterOrEqual(t, len(gen.SecretKey), 40)
	mine, err := keys.Create(ctx, "ops", "ops-key", "ops-secret-1", true)
	require.NoError(t, err)
	require.Equal(t, "ops-secret-1", mine.SecretKey)

	for name, tc := range map[string]struct{ name, ak, sk string }{
		"empty name":     {"", "", ""},
		"short secret":   {"x", "good-key", "short"},
		"bad access key": {"x", "no spaces allowed", "long-enough-secret"},
		"the root key":   {"x", rootKey, "long-enough-secret"},
	} {
		_, err := keys.Create(ctx, tc.name, tc.ak, tc.sk, false)
		require.Error(t, err, name)
	}
	_, err = keys.Create(ctx, "again", "ops-key", "another-secret", false)
	require.Equal(t, errs.Conflict, errs.KindOf(err))

	listed, err := keys.List(ctx)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	for _, k := range listed {
		require.Empty(t, k.SecretKey, "a listing never shows a secret")
	}

	// The store keeps the secret sealed, never as it was given.
	rec, err := store.GetAccessKey(ctx, "ops-key")
	require.NoError(t, err)
	require.NotContains(t, rec.Secret, "ops-secret-1")
	got, err := keys.Secret(ctx, "ops-key")
	require.NoError(t, err)
	require.Equal(t, "ops-secret-1", got)

	// Another root secret cannot unseal it: the key is then unknown.
	other := newKeys(t, store, rootKey, "a-different-root-secret")
	_, err = other.Secret(ctx, "ops-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey)

	require.Error(t, keys.Delete(ctx, rootKey), "the root key is not revoked through the API")
	require.NoError(t, keys.Delete(ctx, "ops-key"))
	_, err = keys.Secret(ctx, "ops-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey)
	require.Equal(t, errs.CodeAccessKeyNotFound, errs.CodeOf(keys.Delete(ctx, "ops-key")))

	_, err = newKeys(t, store, "", "").Create(ctx, "x", "", "", false)
	require.Equal(t, errs.Invalid, errs.KindOf(err), "no key without a root key")
}

func TestRESTAuthentication(t *testing.T) {
	ctx := context.Background()
	keys := newKeys(t, openStore(t), rootKey, rootSecret)
	user, err := keys.Create(ctx, "user", "user-key", "user-secret", false)
	require.NoError(t, err)
	handler := keys.REST(&sigv4.Verifier{Region: "us-east-1", Secrets: keys.Secret})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.FromContext(r.Context())
		_, _ = io.WriteString(w, id.AccessKey)
	}))
	srv := httptest.NewServer(handler)
	defer srv.Close()

	call := func(method, path, key, secret string, sign bool) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		switch {
		case sign:
			sum := sha256.Sum256(nil)
			h := hex.EncodeToString(sum[:])
			req.Header.Set("X-Amz-Content-Sha256", h)
			require.NoError(t, v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, req, h, "dfs", "us-east-1", time.Now()))
		case key != "":
			req.SetBasicAuth(key, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		name, method, path, key, secret string
		sign                            bool
		status                          int
		body                            string
	}{
		{"no key", "GET", "/api/files", "", "", false, 401, `"UNAUTHORIZED"`},
		{"root by Basic", "GET", "/api/files", rootKey, rootSecret, false, 200, rootKey},
		{"user by Basic", "GET", "/api/files", "user-key", user.SecretKey, false, 200, "user-key"},
		{"wrong secret", "GET", "/api/files", "user-key", "nope", false, 401, `"UNAUTHORIZED"`},
		{"unknown key", "GET", "/api/files", "nobody", "nope", false, 401, `"UNAUTHORIZED"`},
		{"user by SigV4", "GET", "/api/files?page=0", "user-key", "user-secret", true, 200, "user-key"},
		{"bad SigV4", "GET", "/api/files", "user-key", "wrong-secret", true, 401, "SignatureDoesNotMatch"},
		{"admin path, user key", "POST", "/api/admin/rebalance", "user-key", "user-secret", false, 403, `"FORBIDDEN"`},
		{"admin path, root key", "POST", "/api/admin/rebalance", rootKey, rootSecret, false, 200, rootKey},
		{"liveness is open", "GET", "/health/live", "", "", false, 200, ""},
		{"metrics are open", "GET", "/metrics", "", "", false, 200, ""},
		{"registration has the cluster token", "POST", "/api/nodes/register", "", "", false, 200, ""},
		{"a node's corruption report has the cluster token", "POST", "/api/nodes/node-1/corrupt", "", "", false, 200, ""},
		{"other node calls are not", "DELETE", "/api/nodes/node-1", "", "", false, 401, `"UNAUTHORIZED"`},
		{"nor a path that only ends like a report", "POST", "/api/nodes/a/b/corrupt", "", "", false, 401, `"UNAUTHORIZED"`},
		{"the console is not", "GET", "/console/", "", "", false, 401, `"UNAUTHORIZED"`},
		{"swagger is not", "GET", "/swagger-ui/", "", "", false, 401, `"UNAUTHORIZED"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(tc.method, tc.path, tc.key, tc.secret, tc.sign)
			require.Equal(t, tc.status, status, body)
			require.True(t, strings.Contains(body, tc.body), "%q lacks %q", body, tc.body)
		})
	}
}

// TestOpenRESTRefusesWrongCredentials: an open API (no root key, or
// API_AUTH=open over one) serves a request without credentials, but a
// request that presents wrong ones is refused rather than served as if it
// had sent none.
func TestOpenRESTRefusesWrongCredentials(t *testing.T) {
	ctx := context.Background()
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	withRoot := newKeys(t, openStore(t), rootKey, rootSecret)
	_, err := withRoot.Create(ctx, "user", "user-key", "user-secret", false)
	require.NoError(t, err)
	noRoot := newKeys(t, openStore(t), "", "")
	apis := map[string]http.Handler{
		"no root key":   noRoot.REST(&sigv4.Verifier{Region: "us-east-1", Secrets: noRoot.Secret})(served),
		"API_AUTH=open": withRoot.OpenREST(&sigv4.Verifier{Region: "us-east-1", Secrets: withRoot.Secret})(served),
	}
	basic := func(key, secret string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(key, secret) }
	}
	signed := func(key, secret string) func(*http.Request) {
		return func(r *http.Request) {
			sum := sha256.Sum256(nil)
			h := hex.EncodeToString(sum[:])
			r.Header.Set("X-Amz-Content-Sha256", h)
			require.NoError(t, v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, r, h, "dfs", "us-east-1", time.Now()))
		}
	}
	cases := []struct {
		name        string
		path        string
		credentials func(*http.Request)
		status      map[string]int // by API; a missing one is 401
	}{
		{"no credentials", "/api/files", nil, map[string]int{"no root key": 200, "API_AUTH=open": 200}},
		{"a bearer token is not a key", "/api/files", func(r *http.Request) { r.Header.Set("Authorization", "Bearer x") },
			map[string]int{"no root key": 200, "API_AUTH=open": 200}},
		{"wrong secret", "/api/files", basic("user-key", "nope"), nil},
		{"unknown key", "/api/files", basic("bad", "bad"), nil},
		{"empty key", "/api/files", basic("", ""), nil},
		{"bad SigV4", "/api/files", signed("user-key", "wrong-secret"), nil},
		{"right key", "/api/files", basic("user-key", "user-secret"), map[string]int{"API_AUTH=open": 200}},
		{"root key", "/api/admin/rebalance", basic(rootKey, rootSecret), map[string]int{"API_AUTH=open": 200}},
		{"right SigV4", "/api/files", signed("user-key", "user-secret"), map[string]int{"API_AUTH=open": 200}},
		{"probes ignore credentials", "/health/live", basic("bad", "bad"), map[string]int{"no root key": 200, "API_AUTH=open": 200}},
	}
	for _, tc := range cases {
		for api, h := range apis {
			t.Run(tc.name+", "+api, func(t *testing.T) {
				req := httptest.NewRequest("GET", "http://coordinator"+tc.path, nil)
				if tc.credentials != nil {
					tc.credentials(req)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				want := tc.status[api]
				if want == 0 {
					want = http.StatusUnauthorized
				}
				require.Equal(t, want, rec.Code, rec.Body.String())
				if want == http.StatusUnauthorized {
					require.Contains(t, rec.Body.String(), `"UNAUTHORIZED"`)
				}
			})
		}
	}
}

// TestKeyCacheRevocation: a key revoked through another coordinator (another
// Keys over the same store) stops working here once KeyCacheTTL has passed,
// and at once through the one that revoked it; an unknown key is not cached,
// so a key created elsewhere works at once.
func TestKeyCacheRevocation(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	here, there := newKeys(t, store, rootKey, rootSecret), newKeys(t, store, rootKey, rootSecret)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	here.SetClock(func() time.Time { return now })

	_, err := here.Secret(ctx, "late-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey)
	_, err = there.Create(ctx, "late", "late-key", "late-secret-1", true)
	require.NoError(t, err)
	got, err := here.Secret(ctx, "late-key")
	require.NoError(t, err, "a miss is not cached")
	require.Equal(t, "late-secret-1", got)
	require.True(t, here.IsAdmin(ctx, "late-key"))

	require.NoError(t, there.Delete(ctx, "late-key"))
	_, err = there.Secret(ctx, "late-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey, "revoked at once where it was revoked")
	got, err = here.Secret(ctx, "late-key")
	require.NoError(t, err, "within the TTL the cached secret is still used")
	require.Equal(t, "late-secret-1", got)

	now = now.Add(auth.KeyCacheTTL)
	_, err = here.Secret(ctx, "late-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey, "revoked once the TTL has passed")
	require.False(t, here.IsAdmin(ctx, "late-key"))
	_, err = here.Basic(ctx, "late-key", "late-secret-1")
	require.Equal(t, errs.Unauthorized, errs.KindOf(err))
}

// fakePeers is a Peers that delivers each Publish to every Keys sharing it,
// at once, while it is live.
type fakePeers struct {
	live     bool
	handlers []func(string)
	sent     []string
}

func (p *fakePeers) Handle(kind string, fn func(string)) {
	if kind == "access-key" {
		p.handlers = append(p.handlers, fn)
	}
}

func (p *fakePeers) Publish(_ context.Context, kind, key string) error {
	p.sent = append(p.sent, kind+" "+key)
	if !p.live {
		return errs.E(errs.Unavailable, "redis is down")
	}
	for _, fn := range p.handlers {
		fn(key)
	}
	return nil
}

func (p *fakePeers) Live() bool { return p.live }

// countingStore counts the key rows read.
type countingStore struct {
	auth.Store
	reads int
}

func (c *countingStore) GetAccessKey(ctx context.Context, k string) (meta.AccessKey, error) {
	c.reads++
	return c.Store.GetAccessKey(ctx, k)
}

// TestSharedKeysAreRevokedEverywhereAtOnce: coordinators sharing a store
// hear each other's revocations and drop the key at once; while they cannot
// hear them, and without Redis at all, the cache is not used.
func TestSharedKeysAreRevokedEverywhereAtOnce(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: openStore(t)}
	peers := &fakePeers{live: true}
	here, there := newKeys(t, store, rootKey, rootSecret), newKeys(t, store, rootKey, rootSecret)
	here.Share(peers)
	there.Share(peers)

	_, err := there.Create(ctx, "k", "shared-key", "shared-secret-1", false)
	require.NoError(t, err)
	for range 3 {
		got, err := here.Secret(ctx, "shared-key")
		require.NoError(t, err)
		require.Equal(t, "shared-secret-1", got)
	}
	require.Equal(t, 1, store.reads, "while notices arrive the cache answers")

	require.NoError(t, there.Delete(ctx, "shared-key"))
	require.Equal(t, []string{"access-key shared-key"}, peers.sent)
	_, err = here.Secret(ctx, "shared-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey, "revoked here at once, within the TTL")

	// Notices cannot arrive: every lookup reads the row.
	_, err = there.Create(ctx, "k2", "other-key", "other-secret-1", false)
	require.NoError(t, err)
	peers.live = false
	store.reads = 0
	for range 3 {
		_, err := here.Secret(ctx, "other-key")
		require.NoError(t, err)
	}
	require.Equal(t, 3, store.reads, "no cache while the subscription is down")
	require.NoError(t, there.Delete(ctx, "other-key"), "a failed notice does not fail the revocation")
	_, err = here.Secret(ctx, "other-key")
	require.ErrorIs(t, err, sigv4.ErrUnknownKey)

	// A shared store without Redis: never cached.
	alone := newKeys(t, store, rootKey, rootSecret)
	alone.Share(nil)
	_, err = there.Create(ctx, "k3", "third-key", "third-secret-1", false)
	require.NoError(t, err)
	store.reads = 0
	for range 2 {
		_, err := alone.Secret(ctx, "third-key")
		require.NoError(t, err)
	}
	require.Equal(t, 2, store.reads)

	// A subscription (re)established drops everything held.
	peers.live = true
	_, err = here.Secret(ctx, "third-key")
	require.NoError(t, err)
	store.reads = 0
	for _, fn := range peers.handlers {
		fn("")
	}
	_, err = here.Secret(ctx, "third-key")
	require.NoError(t, err)
	require.Equal(t, 1, store.reads, "read again after the cache was dropped")
}
