package httpx

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// dataSegsOut is the number of TCP segments carrying data that c has sent.
func dataSegsOut(t *testing.T, c *net.TCPConn) uint32 {
	t.Helper()
	raw, err := c.SyscallConn()
	require.NoError(t, err)
	var info *unix.TCPInfo
	var serr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}))
	require.NoError(t, serr)
	return info.Data_segs_out
}

// TestWriteWholeSendsOneSegment counts the segments of each answer on the
// server's side of the connection: a 4 KiB answer written by WriteWhole on a
// gathering connection is one, the same answer written with w.Write is two
// (net/http's 4 KiB connection buffer), and both arrive intact.
func TestWriteWholeSendsOneSegment(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 4<<10/16)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []*gatherConn
	)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Header().Set("X-Padding", string(bytes.Repeat([]byte("p"), 200)))
			if r.URL.Path == "/whole" {
				_, _ = WriteWhole(w, r, body)
				return
			}
			_, _ = w.Write(body)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if g, ok := c.(*gatherConn); ok {
				mu.Lock()
				conns = append(conns, g)
				mu.Unlock()
			}
			return GatherContext(ctx, c)
		},
	}
	go func() { _ = srv.Serve(GatherListener(ln)) }()
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	get := func(path string) {
		resp, err := client.Get("http://" + ln.Addr().String() + path)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, body, got)
	}
	get("/whole") // opens the one connection the rest reuse
	mu.Lock()
	require.Len(t, conns, 1)
	c := conns[0]
	mu.Unlock()

	segs := func(path string) uint32 {
		before := dataSegsOut(t, c.TCPConn)
		get(path)
		return dataSegsOut(t, c.TCPConn) - before
	}
	for range 3 {
		require.EqualValues(t, 1, segs("/whole"), "WriteWhole")
		require.EqualValues(t, 2, segs("/write"), "w.Write")
	}
	mu.Lock()
	require.Len(t, conns, 1, "the client kept one connection")
	mu.Unlock()
}

// TestWriteWholeElsewhere writes through when the connection does not
// gather (a plain listener, or a body above GatherMax) and still streams a
// file with the connection's ReadFrom after a gathered answer.
func TestWriteWholeElsewhere(t *testing.T) {
	big := bytes.Repeat([]byte("B"), GatherMax+1)
	f, err := os.CreateTemp(t.TempDir(), "blob")
	require.NoError(t, err)
	_, err = f.Write(big)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			n, err := WriteWhole(w, r, big)
			if err != nil || n != len(big) {
				panic(http.ErrAbortHandler)
			}
		case "/file":
			http.ServeFile(w, r, f.Name())
		default:
			w.Header().Set("Content-Length", "5")
			_, _ = WriteWhole(w, r, []byte("small"))
		}
	})
	for name, wrap := range map[string]func(net.Listener) net.Listener{
		"gathering": GatherListener,
		"plain":     func(ln net.Listener) net.Listener { return ln },
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := &http.Server{Handler: h, ConnContext: GatherContext}
			go func() { _ = srv.Serve(wrap(ln)) }()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for _, c := range []struct {
				path string
				want []byte
			}{{"/small", []byte("small")}, {"/big", big}, {"/small", []byte("small")}, {"/file", big}, {"/small", []byte("small")}} {
				resp, err := client.Get("http://" + ln.Addr().String() + c.path)
				require.NoError(t, err)
				got, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				require.Equal(t, c.want, got, c.path)
			}
		})
	}
}
