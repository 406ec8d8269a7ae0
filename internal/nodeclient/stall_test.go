package nodeclient_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// frozenNode accepts connections and then does what a paused (SIGSTOPped)
// process does: nothing. With answer set it first reads one request's
// headers and sends answer, then stops.
func frozenNode(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if answer != "" {
				go func() {
					if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
						_, _ = io.WriteString(c, answer)
					}
				}()
			}
		}
	}()
	return "http://" + ln.Addr().String()
}

// zeros is an endless source of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestPutToANodeThatStopsReadingStalls(t *testing.T) {
	base := frozenNode(t, "")
	c := nodeclient.New(nodeclient.Options{StallTimeout: 300 * time.Millisecond})
	// Far more than the socket buffers between the two ends can hold.
	const size = 256 << 20
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, err := c.Put(ctx, base, uuid.NewString(), checksum(nil), size, io.LimitReader(zeros{}, size))
	requireKind(t, errs.Unavailable, err)
	require.ErrorContains(t, err, "stall timeout")
	require.NoError(t, ctx.Err(), "the stall timeout ended the call, not the test's deadline")
}

func TestGetFromANodeThatStopsSendingStalls(t *testing.T) {
	answer := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s: %d\r\n%s: %s\r\n\r\nthe first bytes",
		10<<20, wire.HeaderBlobSize, 10<<20, wire.HeaderChecksum, checksum(nil))
	base := frozenNode(t, answer)
	c := nodeclient.New(nodeclient.Options{StallTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obj, err := c.Get(ctx, base, uuid.NewString(), nil)
	require.NoError(t, err)
	defer obj.Body.Close()
	got, err := io.ReadAll(obj.Body)
	require.Equal(t, "the first bytes", string(got))
	requireKind(t, errs.Unavailable, err)
	require.ErrorContains(t, err, "stall timeout")
	require.NoError(t, ctx.Err())
}

// dawdlingReader pauses before each of its first n Reads of r.
type dawdlingReader struct {
	r     io.Reader
	n     int
	pause time.Duration
}

func (d *dawdlingReader) Read(p []byte) (int, error) {
	if d.n > 0 {
		d.n--
		time.Sleep(d.pause)
	}
	return d.r.Read(p)
}

// TestSlowPartiesAreNotStalls checks that only waiting on the node counts: a
// source slower than the stall timeout, and a consumer that reads slower
// than it, both complete.
func TestSlowPartiesAreNotStalls(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	const stall = 100 * time.Millisecond
	c := nodeclient.New(nodeclient.Options{StallTimeout: stall})
	ctx := context.Background()
	data := bytes.Repeat([]byte("slow but steady "), 128<<10) // 2 MiB
	id := uuid.NewString()
	_, created, err := c.Put(ctx, n.URL, id, checksum(data), int64(len(data)),
		&dawdlingReader{r: bytes.NewReader(data), n: 3, pause: 3 * stall})
	require.NoError(t, err)
	require.True(t, created)

	obj, err := c.Get(ctx, n.URL, id, nil)
	require.NoError(t, err)
	defer obj.Body.Close()
	// The consumer dawdles between its first reads; the node is not waited on.
	got, err := io.ReadAll(&dawdlingReader{r: obj.Body, n: 3, pause: 3 * stall})
	require.NoError(t, err)
	require.Equal(t, checksum(data), checksum(got))
}
