// Package nodeclient is the HTTP client the coordinator uses to reach storage
// nodes. Blob bodies are streamed both ways; no call holds a blob in memory.
//
// Every failure is an errs error that names the node and the operation and
// wraps the cause: a node that cannot be reached, times out or answers 5xx is
// errs.Unavailable (except 507, errs.NoSpace); 400 is errs.Invalid, 401
// errs.Unauthorized, 404 errs.NotFound, 409 errs.Conflict, 416
// errs.Unsatisfiable and 422 errs.Corrupt. A node's own error answer is kept
// as a *StatusError in the chain.
//
// Streaming calls (Put, Get) have no whole-call timeout, so a large transfer
// is never cut off: they are bounded by the caller's context, the dial
// timeout, a wait-for-answer timeout (Get: the time to the response headers;
// Put: the time from the end of the body to the answer) and a stall timeout:
// a body that makes no progress for Options.StallTimeout while the call waits
// on the node (a paused or wedged node that stops accepting or sending
// bytes) ends the call with errs.Unavailable.
package nodeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/byterange"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Defaults of Options.
const (
	DefaultTimeout       = 5 * time.Second
	DefaultVerifyTimeout = 2 * time.Minute
	DefaultStallTimeout  = 30 * time.Second
	// DialTimeout bounds connecting to a node in the default transport.
	DialTimeout = 3 * time.Second
)

// bufferedPutMax is the largest body Put copies into a buffer of the call's
// own before sending. The standard library sends a body it knows to be in
// memory in the same write as the headers (its other bodies are preceded by
// a flush of the headers, one more write and TCP segment per copy, which a
// small upload pays three times); a private copy is also free of the
// caller's buffer, so Put returns without waiting for the transport to let
// go of it. Up to this size the copy costs less than what it saves, and
// headers and body fit the transport's 64 KiB write buffer together.
const bufferedPutMax = 32 << 10

// readBody reads exactly size bytes from r, which must end there.
func readBody(r io.Reader, size int64) ([]byte, error) {
	data := make([]byte, size)
	if n, err := io.ReadFull(r, data); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, fmt.Errorf("the body ended after %d of its %d bytes", n, size)
		}
		return nil, fmt.Errorf("read the body: %w", err)
	}
	var one [1]byte
	if n, _ := io.ReadFull(r, one[:]); n > 0 {
		return nil, fmt.Errorf("the body is longer than its %d bytes", size)
	}
	return data, nil
}

// expectContinueMin is the body size from which Put asks the node to confirm
// before the body is sent (Expect: 100-continue): a node that refuses (409,
// 507) or already holds the blob (200) then answers without the body
// crossing the network. Smaller bodies are not worth the extra round trip.
const expectContinueMin = 1 << 20

// Options configure a Client.
type Options struct {
	// Token is the cluster token sent as a bearer token; empty sends none.
	Token string
	// Timeout bounds non-streaming calls as a whole and, for Get, the wait
	// for the response headers. Default DefaultTimeout.
	Timeout time.Duration
	// VerifyTimeout bounds work a node does in proportion to a blob's size
	// before it can answer: hashing and syncing a Put after the body is sent,
	// and a whole Rehash. Default DefaultVerifyTimeout.
	VerifyTimeout time.Duration
	// StallTimeout ends a streaming call whose body has not moved for this
	// long while waiting on the node: Put's body not taken by a node that
	// stopped reading, Get's body not arriving. Time spent reading Put's
	// source or waiting for Get's consumer does not count. Default
	// DefaultStallTimeout.
	StallTimeout time.Duration
	// Transport carries the calls; nil uses NewTransport(). Share one
	// transport so connections to a node are reused.
	Transport *http.Transport
	// BatchMax is the most small blobs (up to 32 KiB) one batched write
	// request to a node carries (batch.go); 1 sends each in a request of its
	// own. Default DefaultBatchMax; at most wire.MaxBatchItems.
	BatchMax int
	// BatchInflight is how many batched write requests may run to one node
	// at once; the blobs that arrive meanwhile wait for the next. Default
	// DefaultBatchInflight.
	BatchInflight int
}

// Client calls storage nodes. It is safe for concurrent use.
type Client struct {
	hc            *http.Client
	token         string
	timeout       time.Duration
	verifyTimeout time.Duration
	stallTimeout  time.Duration
	batchMax      int
	batchInflight int

	batchersMu sync.Mutex
	batchers   map[string]*batcher
}

// NewTransport returns a transport tuned for many concurrent calls to a
// handful of nodes: kept-alive connections, many idle ones per node, bounded
// dials, no proxy (node traffic is internal).
func NewTransport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		WriteBufferSize:       64 << 10,
		ReadBufferSize:        64 << 10,
	}
}

// New returns a client.
func New(opts Options) *Client {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.VerifyTimeout <= 0 {
		opts.VerifyTimeout = DefaultVerifyTimeout
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = DefaultStallTimeout
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport()
	}
	if opts.BatchMax == 0 {
		opts.BatchMax = DefaultBatchMax
	}
	if opts.BatchInflight <= 0 {
		opts.BatchInflight = DefaultBatchInflight
	}
	return &Client{
		hc:            &http.Client{Transport: opts.Transport},
		token:         opts.Token,
		timeout:       opts.Timeout,
		verifyTimeout: opts.VerifyTimeout,
		stallTimeout:  opts.StallTimeout,
		batchMax:      min(opts.BatchMax, wire.MaxBatchItems),
		batchInflight: opts.BatchInflight,
		batchers:      map[string]*batcher{},
	}
}

// WithRequestID returns a context whose calls carry id as X-Request-Id. It
// is the same context value the HTTP edge sets (httpx.RequestID), so a
// coordinator request's id reaches the nodes without further wiring.
func WithRequestID(ctx context.Context, id string) context.Context {
	return httpx.WithRequestID(ctx, id)
}

// RequestIDFrom returns the request id in ctx, or "".
func RequestIDFrom(ctx context.Context) string { return httpx.RequestIDFrom(ctx) }

// StatusError is a node's error answer.
type StatusError struct {
	Status  int
	Code    string // the stable code of the answer, such as BLOB_NOT_FOUND
	Message string
}

func (e *StatusError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%d %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// Object is a blob being read. The caller must close Body.
type Object struct {
	Body io.ReadCloser
	// Info is the whole blob: its full size and the checksum the node
	// recorded when it was written.
	Info wire.BlobInfo
	// ContentLength is the number of bytes in Body.
	ContentLength int64
	// BlocksVerified says the node checked every byte of Body against the
	// blob's block sums before sending it (wire.HeaderBlocksVerified): a
	// damaged block ends Body short instead of arriving. Without it the
	// bytes are as stored: hash them and compare with Info.Checksum.
	BlocksVerified bool
	// Framed says the bytes came in CRC-32C frames (wire.ContentTypeFrames),
	// each checked here before Body yields it: a frame damaged on the way
	// ends Body with wire.ErrFrameMismatch.
	Framed bool
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

var (
	errAnswerTimeout = errors.New("the node did not answer in time")
	errStalled       = errors.New("the transfer made no progress (stall timeout)")
	errTimeout       = errors.New("the call timed out")
)

// call is one request to a node.
type call struct {
	method, node, path, op string
	query                  url.Values
	header                 http.Header
	body                   io.Reader
	size                   int64 // the body's length when body != nil; -1 unknown
}

func (c *Client) newRequest(ctx context.Context, k call) (*http.Request, error) {
	u := strings.TrimRight(k.node, "/") + k.path
	if len(k.query) > 0 {
		u += "?" + k.query.Encode()
	}
	body := k.body
	if body != nil && k.size == 0 {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, k.method, u, body)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "node %s: %s", k.node, k.op)
	}
	if body != nil && body != http.NoBody {
		req.ContentLength = k.size
	}
	for name, v := range k.header {
		req.Header[name] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if id := RequestIDFrom(ctx); id != "" {
		req.Header.Set(wire.HeaderRequestID, id)
	}
	req.Header.Set("User-Agent", "dfs-nodeclient")
	return req, nil
}

// do sends a call whose answer is small, bounding the whole call by timeout,
// and returns the response with its body read (at most maxBody bytes) when
// the status is one of ok; any other status is an error.
func (c *Client) do(ctx context.Context, k call, timeout time.Duration, ok ...int) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, unreachable(ctx, k, err)
	}
	defer resp.Body.Close()
	const maxBody = 16 << 20
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, unreachable(ctx, k, err)
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, b, nil
		}
	}
	return nil, nil, statusError(k, resp.StatusCode, b)
}

// unreachable wraps a transport failure: the node is, for this call, down.
func unreachable(ctx context.Context, k call, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", cause, err)
	}
	return errs.Wrap(errs.Unavailable, err, "node %s: %s", k.node, k.op)
}

// statusError turns a node's error answer into an errs error of the kind its
// status means.
func statusError(k call, status int, body []byte) error {
	se := &StatusError{Status: status}
	var eb httpx.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
		se.Code, se.Message = eb.Error, eb.Message
	} else {
		se.Message = strings.TrimSpace(string(body[:min(len(body), 512)]))
	}
	return errs.Wrap(kindOfAnswer(status), se, "node %s: %s", k.node, k.op)
}

// kindOfAnswer is the kind of a node's error answer: the kind the node
// answered with, read back from the table its HTTP layer wrote it from
// (errs.KindOfStatus), and two rules of this client on top. A 403 is a refused
// token, as a 401 is. Any other 5xx (a 500 from a failing handler, a proxy's
// 502 or 504) means this node cannot serve the call now, which is what
// Unavailable says of a node that does not answer at all: to the coordinator a
// broken node is a dependency that is down, not a bug of its own. The
// coordinator's client (internal/client) keeps a 500 as Other, since there it
// is the called service itself that failed.
func kindOfAnswer(status int) errs.Kind {
	k := errs.KindOfStatus(status)
	switch {
	case status == http.StatusForbidden:
		return errs.Unauthorized
	case k == errs.Other && status >= 500:
		return errs.Unavailable
	}
	return k
}

// answerWait is how long Put waits for the node's answer once the body is
// sent. The node then syncs what it received, which takes longer for a
// larger blob, so the wait grows by a second per 32 MiB from twice the call
// timeout, up to VerifyTimeout; a node that takes longer than that (a
// paused process, say) is not working, and the upload moves on.
func (c *Client) answerWait(size int64) time.Duration {
	if size < 0 {
		return c.verifyTimeout
	}
	return min(c.verifyTimeout, 2*c.timeout+time.Duration(size>>25)*time.Second)
}

// Put streams size bytes of body to node as blob id, declaring checksum (the
// SHA-256 of the bytes, hex). size < 0 means unknown (the body is sent
// chunked). created reports whether the node wrote the blob (201) or
// already held an intact copy with that checksum (200). When Put returns,
// body is no longer read: the caller may reuse it at once.
func (c *Client) Put(ctx context.Context, node, id, checksum string, size int64, body io.Reader) (info wire.BlobInfo, created bool, err error) {
	k := call{method: http.MethodPut, node: node, path: wire.BlobPath(id), op: "put " + id,
		header: http.Header{wire.HeaderChecksum: {checksum}}, size: size}
	if size < 0 || size >= expectContinueMin {
		k.header.Set("Expect", "100-continue")
	}

	if size > 0 && size <= bufferedPutMax {
		data, err := readBody(body, size)
		if err != nil {
			return wire.BlobInfo{}, false, unreachable(ctx, k, err)
		}
		if c.batchable(id, checksum, size) {
			return c.batcher(node).put(ctx, k, wire.BatchItem{ID: id, RequestID: RequestIDFrom(ctx), Checksum: checksum, Data: data})
		}
		return c.putBuffered(ctx, k, data)
	}

	// The answer may rightly take a while after the body is sent (the node
	// hashes and syncs it), but not forever: the wait starts when the body
	// ends.
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wait := &answerTimer{d: c.answerWait(size), fire: func() { cancel(errAnswerTimeout) }}
	defer wait.stop()
	// Until the body ends, the call waits on the node whenever it is not
	// reading the source.
	stall := newStallWatch(c.stallTimeout, cancel)
	defer stall.stop()
	stall.waiting()
	pb := &putBody{r: body, onEOF: func() { stall.stop(); wait.start() }, stall: stall, done: make(chan struct{})}
	k.body = pb
	if size == 0 {
		// Nothing to send, so nothing to stall on: the transport may never
		// read the body at all.
		stall.stop()
		wait.start()
	}
	req, err := c.newRequest(callCtx, k)
	if err != nil {
		return wire.BlobInfo{}, false, err
	}
	if req.Body == io.ReadCloser(pb) {
		// Runs after the answer is read: stop any body write still going
		// and wait until the transport has let go of the reader (or the
		// caller gives up on a Read of theirs that does not return).
		defer func() {
			cancel(nil)
			select {
			case <-pb.done:
			case <-ctx.Done():
			}
		}()
	}
	resp, err := c.hc.Do(req)
	wait.stop()
	return c.answerPut(callCtx, k, resp, err)
}

// putBuffered sends a Put of data, which is the call's own, in a request of
// its own and reads the answer. The body is in memory: sending it never
// waits on the source, a node that takes neither it nor answers runs into
// the answer's timer, and the transport may hold it as long as it likes.
func (c *Client) putBuffered(ctx context.Context, k call, data []byte) (wire.BlobInfo, bool, error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wait := &answerTimer{d: c.answerWait(int64(len(data))), fire: func() { cancel(errAnswerTimeout) }}
	defer wait.stop()
	wait.start()
	k.body = bytes.NewReader(data)
	req, err := c.newRequest(callCtx, k)
	if err != nil {
		return wire.BlobInfo{}, false, err
	}
	resp, err := c.hc.Do(req)
	return c.answerPut(callCtx, k, resp, err)
}

// answerPut reads a Put's answer, or says why there was none.
func (c *Client) answerPut(callCtx context.Context, k call, resp *http.Response, err error) (wire.BlobInfo, bool, error) {
	if err != nil {
		return wire.BlobInfo{}, false, unreachable(callCtx, k, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return wire.BlobInfo{}, false, unreachable(callCtx, k, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return wire.BlobInfo{}, false, statusError(k, resp.StatusCode, b)
	}
	var bi wire.BlobInfo
	if err := json.Unmarshal(b, &bi); err != nil {
		return wire.BlobInfo{}, false, errs.Wrap(errs.Unavailable, err, "node %s: %s: malformed answer", k.node, k.op)
	}
	return bi, resp.StatusCode == http.StatusCreated, nil
}

// answerTimer fires d after start unless stopped first. The transport reads
// the body (and so starts the timer) on its own goroutine, hence the lock.
type answerTimer struct {
	d    time.Duration
	fire func()

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

func (a *answerTimer) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.stopped && a.t == nil {
		a.t = time.AfterFunc(a.d, a.fire)
	}
}

func (a *answerTimer) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	if a.t != nil {
		a.t.Stop()
	}
}

// putBody hands the caller's reader to the transport and takes it back. The
// transport may still be in a Read of a request body when the answer
// arrives (a node that refuses early), and closes the body when it is done
// with it; done is closed once the body is closed and no Read is running,
// and Put waits for it, so once Put returns the reader is the caller's again
// (to seek and send elsewhere, say). Close never waits for a Read: the
// transport may call it from another goroutine while one is blocked. onEOF
// runs once, when the reader is exhausted.
type putBody struct {
	r     io.Reader
	onEOF func()
	stall *stallWatch // paused while r is read
	done  chan struct{}

	mu      sync.Mutex // guards the fields below; never held during a Read of r
	reading bool
	closed  bool
	eof     bool
	freed   bool
}

var errBodyReturned = errors.New("body already returned to the caller")

func (b *putBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, errBodyReturned
	}
	b.reading = true
	b.mu.Unlock()

	b.stall.notWaiting()
	n, err := b.r.Read(p)
	if err == nil {
		b.stall.waiting()
	}

	b.mu.Lock()
	b.reading = false
	if b.closed {
		b.free()
	}
	firstEOF := err == io.EOF && !b.eof
	if firstEOF {
		b.eof = true
	}
	b.mu.Unlock()
	if firstEOF {
		b.onEOF()
	}
	return n, err
}

func (b *putBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if !b.reading {
		b.free()
	}
	return nil
}

// free signals done; b.mu is held.
func (b *putBody) free() {
	if !b.freed {
		b.freed = true
		close(b.done)
	}
}

// Get opens blob id on node, or the part rng names (nil: all of it). The
// node serves the bytes as stored; Object.Info.Checksum is what they should
// hash to.
func (c *Client) Get(ctx context.Context, node, id string, rng *byterange.Range) (*Object, error) {
	k := call{method: http.MethodGet, node: node, path: wire.BlobPath(id), op: "get " + id,
		header: http.Header{"Accept": {wire.ContentTypeFrames + ", " + wire.ContentTypeBlob}}}
	if rng != nil {
		k.header.Set("Range", rng.Header())
	}
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := c.newRequest(ctx, k)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	timer := time.AfterFunc(c.timeout, func() { cancel(errAnswerTimeout) })
	resp, err := c.hc.Do(req)
	if err != nil {
		timer.Stop()
		err = unreachable(ctx, k, err)
		cancel(nil)
		return nil, err
	}
	if !timer.Stop() { // the timeout fired as the headers arrived: the body is cancelled
		resp.Body.Close()
		cancel(nil)
		return nil, errs.Wrap(errs.Unavailable, errAnswerTimeout, "node %s: %s", node, k.op)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		defer cancel(nil)
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, statusError(k, resp.StatusCode, b)
	}
	info, err := infoFromHeaders(id, resp.Header)
	if err != nil {
		resp.Body.Close()
		cancel(nil)
		return nil, errs.Wrap(errs.Unavailable, err, "node %s: %s: malformed answer", node, k.op)
	}
	stall := newStallWatch(c.stallTimeout, cancel)
	body := &stallReader{rc: resp.Body, stall: stall, ctx: ctx, k: k}
	obj := &Object{
		Body:           &cancelOnClose{ReadCloser: body, cancel: func() { stall.stop(); cancel(nil) }},
		Info:           info,
		ContentLength:  resp.ContentLength,
		BlocksVerified: resp.Header.Get(wire.HeaderBlocksVerified) != "",
	}
	if resp.Header.Get("Content-Type") == wire.ContentTypeFrames {
		// Each frame is checked against its CRC before its bytes are
		// read: what the network damaged ends the body short, as what
		// the disk damaged does on the node.
		obj.Body = readCloser{wire.NewFrameReader(obj.Body), obj.Body}
		obj.ContentLength = info.Size
		if resp.StatusCode == http.StatusPartialContent {
			r, _, ok := byterange.ParseContentRange(resp.Header.Get("Content-Range"))
			if !ok {
				obj.Body.Close()
				return nil, errs.E(errs.Unavailable, "node %s: %s: a partial answer without a Content-Range", node, k.op)
			}
			obj.ContentLength = r.Length
		}
		obj.Framed = true
	}
	return obj, nil
}

// stallWatch cancels a call when the node makes no progress for d while the
// call waits on it. It is armed by waiting and disarmed by notWaiting, so
// time the caller spends elsewhere never counts.
type stallWatch struct {
	d time.Duration
	t *time.Timer
}

func newStallWatch(d time.Duration, cancel context.CancelCauseFunc) *stallWatch {
	t := time.AfterFunc(d, func() { cancel(errStalled) })
	t.Stop()
	return &stallWatch{d: d, t: t}
}

func (w *stallWatch) waiting()    { w.t.Reset(w.d) }
func (w *stallWatch) notWaiting() { w.t.Stop() }
func (w *stallWatch) stop()       { w.t.Stop() }

// stallReader is a Get's body: each Read waits on the node, under the stall
// watch, and a read the watch ended says so.
type stallReader struct {
	rc    io.ReadCloser
	stall *stallWatch
	ctx   context.Context
	k     call
}

func (r *stallReader) Read(p []byte) (int, error) {
	r.stall.waiting()
	n, err := r.rc.Read(p)
	r.stall.notWaiting()
	if err != nil && err != io.EOF && errors.Is(context.Cause(r.ctx), errStalled) {
		err = unreachable(r.ctx, r.k, err)
	}
	return n, err
}

func (r *stallReader) Close() error { return r.rc.Close() }

// cancelOnClose releases the call's context with its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

func infoFromHeaders(id string, h http.Header) (wire.BlobInfo, error) {
	size, err := strconv.ParseInt(h.Get(wire.HeaderBlobSize), 10, 64)
	if err != nil {
		return wire.BlobInfo{}, fmt.Errorf("header %s: %w", wire.HeaderBlobSize, err)
	}
	return wire.BlobInfo{ID: id, Size: size, Checksum: h.Get(wire.HeaderChecksum)}, nil
}

// Head describes blob id on node without reading it.
func (c *Client) Head(ctx context.Context, node, id string) (wire.BlobInfo, error) {
	k := call{method: http.MethodHead, node: node, path: wire.BlobPath(id), op: "head " + id}
	resp, _, err := c.do(ctx, k, c.timeout, http.StatusOK)
	if err != nil {
		return wire.BlobInfo{}, err
	}
	info, err := infoFromHeaders(id, resp.Header)
	if err != nil {
		return wire.BlobInfo{}, errs.Wrap(errs.Unavailable, err, "node %s: %s: malformed answer", node, k.op)
	}
	return info, nil
}

// Delete removes blob id from node. Removing an absent blob succeeds.
func (c *Client) Delete(ctx context.Context, node, id string) error {
	k := call{method: http.MethodDelete, node: node, path: wire.BlobPath(id), op: "delete " + id}
	_, _, err := c.do(ctx, k, c.timeout, http.StatusNoContent, http.StatusOK)
	return err
}

// Rehash makes node re-read blob id and compare it with its recorded
// checksum.
func (c *Client) Rehash(ctx context.Context, node, id string) (wire.ChecksumReport, error) {
	k := call{method: http.MethodGet, node: node, path: wire.ChecksumPath(id), op: "rehash " + id}
	var r wire.ChecksumReport
	if err := c.getJSON(ctx, k, c.verifyTimeout, &r); err != nil {
		return wire.ChecksumReport{}, err
	}
	return r, nil
}

// Stats returns node's counts and free space.
func (c *Client) Stats(ctx context.Context, node string) (wire.Stats, error) {
	var s wire.Stats
	err := c.getJSON(ctx, call{method: http.MethodGet, node: node, path: wire.PathStats, op: "stats"}, c.timeout, &s)
	return s, err
}

// Scrub returns the progress of node's scrubber.
func (c *Client) Scrub(ctx context.Context, node string) (wire.ScrubStatus, error) {
	var s wire.ScrubStatus
	err := c.getJSON(ctx, call{method: http.MethodGet, node: node, path: wire.PathScrub, op: "scrub status"}, c.timeout, &s)
	return s, err
}

// List returns up to limit of node's blobs whose ids sort after the cursor
// after, in id order. limit <= 0 asks for the node's default page size.
func (c *Client) List(ctx context.Context, node, after string, limit int) (wire.BlobList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var l wire.BlobList
	if err := c.getJSON(ctx, call{method: http.MethodGet, node: node, path: wire.PathBlobs, query: q, op: "list"}, c.timeout, &l); err != nil {
		return wire.BlobList{}, err
	}
	return l, nil
}

// Ready reports whether node is ready, and the identity of the disk it
// serves: nil, or an errs.Unavailable error carrying the node's reason. The
// identity is empty when the node reports none (one older than identities)
// and whenever err is not nil.
func (c *Client) Ready(ctx context.Context, node string) (diskID string, err error) {
	k := call{method: http.MethodGet, node: node, path: wire.PathReady, op: "ready"}
	_, b, err := c.do(ctx, k, c.timeout, http.StatusOK, http.StatusServiceUnavailable)
	if err != nil {
		return "", err
	}
	var h wire.Health
	if err := json.Unmarshal(b, &h); err != nil {
		return "", errs.Wrap(errs.Unavailable, err, "node %s: ready: malformed answer", node)
	}
	if h.Status != wire.StatusUp {
		return "", errs.E(errs.Unavailable, "node %s: not ready: %s", node, h.Reason)
	}
	return h.DiskID, nil
}

func (c *Client) getJSON(ctx context.Context, k call, timeout time.Duration, v any) error {
	_, b, err := c.do(ctx, k, timeout, http.StatusOK)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errs.Wrap(errs.Unavailable, err, "node %s: %s: malformed answer", k.node, k.op)
	}
	return nil
}
