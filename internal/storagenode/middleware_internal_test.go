package storagenode

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/httpx"
)

func TestPanicBecomesA500InTheCommonShape(t *testing.T) {
	cfg, err := LoadConfig(envconf.FromMap(nil))
	require.NoError(t, err)
	var logs bytes.Buffer
	s, err := NewWithStore(cfg, blob.NewMemory(blob.Options{}), slog.New(slog.NewJSONHandler(&logs, nil)), nil)
	require.NoError(t, err)
	h := s.recoverPanic(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/internal/stats", nil))
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	var eb httpx.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &eb))
	require.Equal(t, "INTERNAL_ERROR", eb.Error)
	require.Contains(t, logs.String(), `"msg":"handler panic"`)
	require.Contains(t, logs.String(), "boom")
}
