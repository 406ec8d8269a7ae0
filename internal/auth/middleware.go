package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/sigv4"
)

type identityKey struct{}

// FromContext is the identity a checked request came with.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// exempt reports whether path is served without a key: the probes, the
// metrics, and the calls storage nodes make — registration and corruption
// reports (POST /api/nodes/{id}/corrupt) — which CLUSTER_TOKEN guards
// instead (a storage node holds no access key).
func exempt(path string) bool {
	return strings.HasPrefix(path, "/health/") || path == "/metrics" || path == "/api/nodes/register" || nodeReport(path)
}

// nodeReport reports whether path is /api/nodes/{id}/corrupt for one id.
func nodeReport(path string) bool {
	id, ok := strings.CutPrefix(path, "/api/nodes/")
	if !ok {
		return false
	}
	id, ok = strings.CutSuffix(id, "/corrupt")
	return ok && id != "" && !strings.Contains(id, "/")
}

// adminOnly reports whether path needs an admin key.
func adminOnly(path string) bool { return strings.HasPrefix(path, "/api/admin/") }

// REST returns the REST API's authentication: every request but the
// exempt ones needs a key, by HTTP Basic (access key and secret) or
// Signature V4 (any service name, region as v says), and /api/admin/*
// needs an admin key. Without a root key the API is open (OpenREST).
func (k *Keys) REST(v *sigv4.Verifier) func(http.Handler) http.Handler {
	if !k.Enabled() {
		return k.OpenREST(v)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if exempt(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			id, err := k.identify(r, v)
			if err != nil {
				refuse(w, r, err)
				return
			}
			if adminOnly(r.URL.Path) && !id.Admin {
				httpx.WriteError(w, r, errs.E(errs.Forbidden, "%s needs an admin key; %s is not one", r.URL.Path, id.AccessKey))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
		})
	}
}

// OpenREST returns the authentication of an open REST API (no root key, or
// API_AUTH=open): a request without credentials is served, but credentials
// that are presented are checked and wrong ones refused, so that a typo in
// a key fails here rather than later against a closed cluster. Right ones
// change nothing: the open API serves every caller alike.
func (k *Keys) OpenREST(v *sigv4.Verifier) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !exempt(r.URL.Path) && presented(r) {
				if _, err := k.identify(r, v); err != nil {
					refuse(w, r, err)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// presented reports whether r carries credentials identify would check.
func presented(r *http.Request) bool {
	_, _, basic := r.BasicAuth()
	return basic || sigv4.Signed(r)
}

func refuse(w http.ResponseWriter, r *http.Request, err error) {
	if errs.Is(err, errs.Unauthorized) {
		w.Header().Set("WWW-Authenticate", `Basic realm="dfs"`)
	}
	httpx.WriteError(w, r, err)
}

func (k *Keys) identify(r *http.Request, v *sigv4.Verifier) (Identity, error) {
	if user, pass, ok := r.BasicAuth(); ok {
		return k.Basic(r.Context(), user, pass)
	}
	if sigv4.Signed(r) {
		ak, err := v.Verify(r)
		var se *sigv4.Error
		if errors.As(err, &se) {
			return Identity{}, errs.Wrap(errs.Unauthorized, err, "signature V4: %s", se.Message)
		}
		if err != nil {
			return Identity{}, err
		}
		return Identity{AccessKey: ak, Admin: k.IsAdmin(r.Context(), ak)}, nil
	}
	return Identity{}, errs.E(errs.Unauthorized, "this API needs an access key: HTTP Basic (curl -u KEY:SECRET; for dfs, DFS_ACCESS_KEY and DFS_SECRET_KEY) or Signature V4")
}
