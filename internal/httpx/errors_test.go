package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

func TestStatusOfMapsEveryKind(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{errs.E(errs.Invalid, "x"), 400, errs.CodeInvalidRequest},
		{errs.E(errs.NotFound, "x"), 404, errs.CodeNotFound},
		{errs.WithCode(errs.NotFound, errs.CodeFileNotFound, nil, ""), 404, errs.CodeFileNotFound},
		{errs.E(errs.Conflict, "x"), 409, errs.CodeConflict},
		{errs.E(errs.Unavailable, "x"), 503, errs.CodeStorageUnavailable},
		{errs.WithCode(errs.Unavailable, errs.CodeMetadataUnavailable, nil, "db"), 503, errs.CodeMetadataUnavailable},
		{errs.E(errs.TooLarge, "x"), 413, errs.CodeFileTooLarge},
		{errs.E(errs.Unauthorized, "x"), 401, errs.CodeUnauthorized},
		{errs.E(errs.NoSpace, "x"), 507, errs.CodeInsufficientStorage},
		{errs.E(errs.Corrupt, "x"), 422, errs.CodeChecksumMismatch},
		{errs.E(errs.Unsatisfiable, "x"), 416, errs.CodeRangeNotSatisfiable},
		{errors.New("boom"), 500, errs.CodeInternal},
		// A code set deep in the chain survives wrapping.
		{errs.Wrap(errs.Unavailable, errs.WithCode(errs.Unavailable, errs.CodeNoHealthyNodes, nil, "none"), "upload"), 503, errs.CodeNoHealthyNodes},
	}
	for _, c := range cases {
		status, code := StatusOf(c.err)
		require.Equal(t, c.status, status, c.err.Error())
		require.Equal(t, c.code, code, c.err.Error())
	}
}

func TestWriteErrorShapeHidesUnclassifiedDetail(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/x", nil)
	WriteError(rec, req, errors.New("secret internal detail"))
	var body ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, 500, body.Status)
	require.Equal(t, errs.CodeInternal, body.Error)
	require.Equal(t, "internal error", body.Message)
	require.Equal(t, "/api/x", body.Path)
	require.False(t, body.Timestamp.IsZero())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
}

func TestRequestIDIsAcceptedOrCreated(t *testing.T) {
	var seen string
	h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = RequestIDFrom(r.Context()) }))

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(RequestIDHeader, "abc-123")
	h.ServeHTTP(rec, req)
	require.Equal(t, "abc-123", seen)
	require.Equal(t, "abc-123", rec.Header().Get(RequestIDHeader))

	rec = httptest.NewRecorder()
	req = httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(RequestIDHeader, "bad id with spaces")
	h.ServeHTTP(rec, req)
	require.NotEqual(t, "bad id with spaces", seen)
	require.Len(t, seen, 24)
	require.Equal(t, seen, rec.Header().Get(RequestIDHeader))
}
