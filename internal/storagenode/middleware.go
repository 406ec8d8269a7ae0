package storagenode

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/signedurl"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

type requestIDKey struct{}

// requestIDFrom returns the id of the request ctx belongs to.
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID adopts the caller's X-Request-Id when it is a sane token (so
// one id follows a call from the coordinator into the node's log) or makes a
// new one, and returns it in the answer.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(wire.HeaderRequestID)
		if !saneRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set(wire.HeaderRequestID, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// countingBody counts the request body bytes a handler reads.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// observe records every request in the metrics and logs one line for it. The
// route label is chi's pattern, never the raw path, so label values stay
// bounded. Probes and scrapes log at debug level: they arrive every few
// seconds and say nothing new.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		body := &countingBody{ReadCloser: r.Body}
		r.Body = body
		next.ServeHTTP(ww, r)

		elapsed := time.Since(start)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		method := r.Method
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete:
		default:
			method = "OTHER"
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		s.metrics.duration.WithLabelValues(route, method).Observe(elapsed.Seconds())

		level := slog.LevelInfo
		if strings.HasPrefix(route, "/health/") || route == wire.PathMetrics {
			level = slog.LevelDebug
		}
		// Asked first, so that a line the level drops costs no attributes.
		if !s.log.Enabled(r.Context(), level) {
			return
		}
		s.log.LogAttrs(r.Context(), level, "http request",
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("path", r.URL.EscapedPath()),
			slog.Int("status", status),
			slog.Int64("bytes_in", body.n),
			slog.Int("bytes_out", ww.BytesWritten()),
			slog.Duration("duration", elapsed),
			slog.String("request_id", requestIDFrom(r.Context())),
		)
	})
}

// recoverPanic turns a handler panic into a 500 in the common error shape
// and a logged stack, instead of a dropped connection with no trace.
func (s *Server) recoverPanic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // net/http's way to abort a response: let it through
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "handler panic", "panic", v, "stack", string(debug.Stack()),
				"request_id", requestIDFrom(r.Context()))
			httpx.WriteErrorCode(w, r, http.StatusInternalServerError, errs.CodeInternal, "internal error")
		}()
		next.ServeHTTP(w, r)
	})
}

// requireToken guards the internal API with the cluster token. The tokens
// are compared through their hashes so the comparison takes the same time
// whatever the length of the presented token.
//
// A read of a blob may instead carry a signed URL's query (signedurl), which
// the coordinator issues to clients that read from the nodes directly: it
// reads that blob, and the range it was signed for, until it expires.
func (s *Server) requireToken(next http.Handler) http.Handler {
	if s.cfg.ClusterToken == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.ClusterToken))
	key := signedurl.KeyFrom(s.cfg.ClusterToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); signedurl.Signed(q) {
			s.signedRead(w, r, key, q, next)
			return
		}
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dfs-internal"`)
			httpx.WriteError(w, r, errs.E(errs.Unauthorized, "missing or wrong cluster token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// signedRead serves a GET or HEAD of a blob through a signed URL, or refuses
// it with 403 saying why.
func (s *Server) signedRead(w http.ResponseWriter, r *http.Request, key signedurl.Key, q url.Values, next http.Handler) {
	refuse := func(format string, args ...any) {
		err := errs.E(errs.Forbidden, format, args...)
		s.logRefusal(r.Context(), requestIDFrom(r.Context()), "signed read refused", err)
		httpx.WriteError(w, r, err)
	}
	raw, ok := strings.CutPrefix(r.URL.EscapedPath(), wire.PathBlobs+"/")
	id, err := url.PathUnescape(raw)
	if !ok || strings.Contains(raw, "/") || err != nil || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		refuse("a signed URL only reads a blob (GET or HEAD %s/{id})", wire.PathBlobs)
		return
	}
	rng, err := key.Check(id, q, time.Now())
	if err != nil {
		refuse("signed read of blob %s refused: %v", id, err)
		return
	}
	if rng != "" {
		if h := r.Header.Get("Range"); h != "" && h != rng {
			refuse("the Range header %q is not the range %q the URL was signed for", h, rng)
			return
		}
		r.Header.Set("Range", rng)
	}
	next.ServeHTTP(w, r)
}
