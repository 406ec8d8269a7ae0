package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/errs"
)

// RequestIDHeader carries a request's id from the client, through the
// coordinator, to the storage nodes and back.
const RequestIDHeader = "X-Request-Id"

type ctxKey struct{}

// WithRequestID returns ctx carrying id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// RequestIDFrom returns the request id in ctx, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// NewRequestID returns a random request id.
func NewRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RequestID accepts a well-formed X-Request-Id or creates one, stores it in
// the request's context and returns it in the answer.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID.MatchString(id) {
			id = NewRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(WithRequestID(r.Context(), id)))
	})
}

// statusWriter records the status and body size of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes flushes through, so streamed answers stay streamed.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// RoutePattern is the chi route pattern that served r, or "unmatched", so
// labels and log fields stay bounded whatever paths clients send.
func RoutePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// AccessLog logs one line per request (route, status, bytes, duration and
// request id) and reports each to observe when it is not nil.
func AccessLog(log *slog.Logger, observe func(route, method string, status int, seconds float64)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w}
			defer func() {
				status := sw.status
				if status == 0 {
					status = http.StatusOK
				}
				if rec := recover(); rec != nil {
					// An aborted response: the client saw a broken transfer.
					status = 499
					defer panic(rec)
				}
				d := time.Since(start)
				route := RoutePattern(r)
				if observe != nil {
					observe(route, r.Method, status, d.Seconds())
				}
				lvl := slog.LevelInfo
				if route == "/health/live" || route == "/health/ready" || route == "/metrics" {
					lvl = slog.LevelDebug
				}
				// Asked first, so that a line the level drops costs no attributes.
				if !log.Enabled(r.Context(), lvl) {
					return
				}
				log.LogAttrs(r.Context(), lvl, "request", slog.String("method", r.Method), slog.String("route", route),
					slog.String("path", r.URL.Path), slog.Int("status", status), slog.Int64("bytes", sw.bytes),
					slog.Float64("duration_ms", float64(d.Microseconds())/1000),
					slog.String("request_id", RequestIDFrom(r.Context())))
			}()
			next.ServeHTTP(sw, r)
		})
	}
}

// Recover turns a panic in a handler into a 500 in the common shape, except
// http.ErrAbortHandler, which deliberately cuts a response short.
func Recover(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				rec := recover()
				if rec == nil {
					return
				}
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				log.Error("handler panicked", "panic", rec, "path", r.URL.Path, "request_id", RequestIDFrom(r.Context()))
				WriteErrorCode(w, r, http.StatusInternalServerError, errs.CodeInternal, "internal error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}
