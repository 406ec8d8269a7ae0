package debugserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateAddr(t *testing.T) {
	for _, ok := range []string{"", "127.0.0.1:6060", ":6060", "localhost:0", "[::1]:6060"} {
		assert.NoError(t, ValidateAddr(ok), ok)
	}
	for _, bad := range []string{"6060", "127.0.0.1", "host:port", "127.0.0.1:70000", "http://127.0.0.1:6060"} {
		assert.Error(t, ValidateAddr(bad), bad)
	}
}

func TestStartServesProfilesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := Start(ctx, "127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)

	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "goroutine profile:")

	resp, err = http.Get("http://" + addr + "/debug/pprof/heap")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	require.Eventually(t, func() bool {
		_, err := http.Get("http://" + addr + "/debug/pprof/")
		return err != nil
	}, 5e9, 1e7, "the listener should close with its context")
}

func TestStartRefusesABusyAddress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Start(ctx, "127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	_, err = Start(ctx, addr, slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "PPROF_ADDR"), err.Error())
}
