package httpx

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAccessLogLine checks the request line's fields and that its keys are
// snake_case like the storage nodes', so one query finds a request id in
// both services' logs.
func TestAccessLogLine(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	var observed []any
	h := RequestID(AccessLog(log, func(route, method string, status int, seconds float64) {
		observed = append(observed, route, method, status)
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("short and stout"))
	})))
	req := httptest.NewRequest(http.MethodGet, "/api/files/x", nil)
	req.Header.Set("X-Request-Id", "trace-7")
	h.ServeHTTP(httptest.NewRecorder(), req)

	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	require.Equal(t, "request", rec["msg"])
	require.Equal(t, "trace-7", rec["request_id"])
	require.Equal(t, "GET", rec["method"])
	require.Equal(t, "/api/files/x", rec["path"])
	require.EqualValues(t, http.StatusTeapot, rec["status"])
	require.EqualValues(t, len("short and stout"), rec["bytes"])
	require.Contains(t, rec, "duration_ms")
	snake := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	for k := range rec {
		require.Regexp(t, snake, k)
	}
	require.Equal(t, []any{"unmatched", "GET", http.StatusTeapot}, observed, "no chi route: the route label is fixed")
}

// BenchmarkAccessLogFiltered is a request through RequestID and AccessLog
// with the logger at warn, where the access line is dropped: the
// middlewares' own cost per request.
func BenchmarkAccessLogFiltered(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := RequestID(AccessLog(log, nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})))
	req := httptest.NewRequest(http.MethodGet, "/api/files/x", nil)
	req.Header.Set("X-Request-Id", "trace-7")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}
