package httpx

import (
	"context"
	"io"
	"net"
	"net/http"

	"github.com/dfs-project/dfs/internal/bufpool"
)

// An answer of a few KiB leaves net/http in two writes: the server's 4 KiB
// connection buffer fills with the head and the start of the body and is
// written, and the rest follows when the answer ends. Two system calls and
// two TCP segments per small answer, and often two wake-ups of the reader.
// A gathering listener lets a handler that has its whole body in memory send
// head and body in one write (WriteWhole).

// GatherMax is the largest body WriteWhole gathers; a larger one is written
// as usual.
const GatherMax = 64 << 10

// GatherListener wraps ln so that WriteWhole can gather the answers of its
// TCP connections. Serve with ConnContext set to GatherContext.
func GatherListener(ln net.Listener) net.Listener { return gatherListener{ln} }

type gatherListener struct{ net.Listener }

func (l gatherListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		return &gatherConn{TCPConn: tc}, nil
	}
	return c, err
}

// gatherConn is a TCP connection whose writes can be held in memory and sent
// as one. Embedding the *net.TCPConn keeps what net/http looks for on it
// (CloseWrite for a lingering close, ReadFrom for sendfile).
//
// Only the goroutine serving the connection writes to it, and WriteWhole
// runs on that goroutine (a handler's), so the fields need no lock.
type gatherConn struct {
	*net.TCPConn
	held    *[]byte // while gathering, the bytes written so far
	holding bool
}

func (c *gatherConn) Write(p []byte) (int, error) {
	if !c.holding {
		return c.TCPConn.Write(p)
	}
	b := *c.held
	if len(b)+len(p) <= cap(b) {
		*c.held = append(b, p...)
		return len(p), nil
	}
	// More than the buffer holds: send what is held and go on unheld.
	if err := c.release(); err != nil {
		return 0, err
	}
	return c.TCPConn.Write(p)
}

// ReadFrom sends anything held first, then lets the connection stream r
// (sendfile from a file).
func (c *gatherConn) ReadFrom(r io.Reader) (int64, error) {
	if err := c.release(); err != nil {
		return 0, err
	}
	return c.TCPConn.ReadFrom(r)
}

// hold starts gathering writes.
func (c *gatherConn) hold() {
	c.held = bufpool.Get()
	*c.held = (*c.held)[:0]
	c.holding = true
}

// release stops gathering and sends what was held in one write.
func (c *gatherConn) release() error {
	if !c.holding {
		return nil
	}
	c.holding = false
	bp := c.held
	c.held = nil
	defer func() {
		*bp = (*bp)[:cap(*bp)]
		bufpool.Put(bp)
	}()
	if len(*bp) == 0 {
		return nil
	}
	_, err := c.TCPConn.Write(*bp)
	return err
}

type gatherKey struct{}

// GatherContext is an http.Server's ConnContext that lets the handlers of a
// gathering connection find it.
func GatherContext(ctx context.Context, c net.Conn) context.Context {
	if g, ok := c.(*gatherConn); ok {
		return context.WithValue(ctx, gatherKey{}, g)
	}
	return ctx
}

// WriteWhole writes body, which must be the whole rest of the answer, and
// ends the answer's writes: on a gathering connection the head (if not yet
// sent) and body leave in one write. The answer's length must be fixed
// (Content-Length set), since the answer is flushed before the handler
// returns. Elsewhere, or for a body over GatherMax, it is w.Write(body).
// Like any write to w, it must be called from the handler's goroutine.
func WriteWhole(w http.ResponseWriter, r *http.Request, body []byte) (int, error) {
	g, _ := r.Context().Value(gatherKey{}).(*gatherConn)
	if g == nil || len(body) > GatherMax {
		return w.Write(body)
	}
	g.hold()
	n, err := w.Write(body)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if rerr := g.release(); rerr != nil && err == nil {
		err = rerr
	}
	return n, err
}
