package coordinator

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// A client that hangs up in the middle of a download leaves no goroutine and
// no open file behind, in the coordinator or on the node.
func TestEarlyDisconnectLeaksNothing(t *testing.T) {
	h := newHarness(t, "sqlite", 3, map[string]string{"DOWNLOAD_BUFFER_SIZE": "64KB"})
	data := payload(8<<20, 3)
	res := h.upload("big", data)
	// One complete download first, so pooled connections exist in the baseline.
	require.Equal(t, data, h.get("/api/files/"+res.FileID).body)
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	goroutines, fds := runtime.NumGoroutine(), openFiles(t)

	for range 5 {
		resp, err := http.Get(h.url + "/api/files/" + res.FileID)
		require.NoError(t, err)
		buf := make([]byte, 64<<10)
		_, err = io.ReadFull(resp.Body, buf)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close()) // hang up with most of the file unread
	}
	http.DefaultClient.CloseIdleConnections()
	require.Eventually(t, func() bool {
		return runtime.NumGoroutine() <= goroutines && openFiles(t) <= fds
	}, 10*time.Second, 20*time.Millisecond, "goroutines %d→%d, open files %d→%d",
		goroutines, runtime.NumGoroutine(), fds, openFiles(t))
}
