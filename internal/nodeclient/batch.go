package nodeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Batched small writes. Every HTTP request costs both ends a fixed amount of
// CPU whatever its size: for a 4 KiB copy that is most of what the node
// spends on it. So Put sends a small blob (up to bufferedPutMax) through a
// batcher of its node, which lets up to Options.BatchInflight requests run
// to the node at once and gathers the blobs that arrive while they run into
// the next request (wire.PathBlobBatch), up to Options.BatchMax blobs. A
// blob that finds a request free is sent at once, alone, so an idle cluster
// waits for nothing; under load the requests fill up on their own, as the
// node's group commit does. The node answers each blob as its own PUT would
// have been, and Put returns that answer as if it had been one.

// Defaults of Options.BatchMax and Options.BatchInflight.
const (
	DefaultBatchMax      = 64
	DefaultBatchInflight = 2
)

// legacyRetry is how long a node that answered a batch with 404 or 405 (a
// node older than batching) gets its small blobs one request each before the
// next batch is tried: long enough that the failed probes cost nothing,
// short enough that an upgraded node is batched again soon.
const legacyRetry = time.Minute

// batcher gathers the small Puts to one node.
type batcher struct {
	c    *Client
	node string

	mu          sync.Mutex
	queue       []*batchItem
	inflight    int
	legacyUntil time.Time
}

// batchItem is one Put waiting in a batcher.
type batchItem struct {
	ctx context.Context
	k   call
	it  wire.BatchItem
	// deadline is when the blob stops waiting for its answer: the time a
	// Put of it alone would have waited from the call on (answerWait),
	// whether it spends it queued or sent.
	deadline time.Time
	done     chan putOutcome // buffered: the sender never waits for the caller
	sent     bool            // taken into a batch; guarded by the batcher's mu
}

type putOutcome struct {
	info    wire.BlobInfo
	created bool
	err     error
}

// batchable says whether a Put of this blob goes through its node's batcher.
func (c *Client) batchable(id, checksum string, size int64) bool {
	return c.batchMax > 1 && size > 0 && size <= bufferedPutMax &&
		len(id) <= 0xffff && len(checksum) == 64
}

// batcher returns node's batcher.
func (c *Client) batcher(node string) *batcher {
	c.batchersMu.Lock()
	defer c.batchersMu.Unlock()
	b := c.batchers[node]
	if b == nil {
		b = &batcher{c: c, node: node}
		c.batchers[node] = b
	}
	return b
}

// put queues one blob and waits for its answer. A caller that gives up
// (ctx) while its blob waits in the queue returns at once, and the blob is
// never sent. One whose blob is already in a batch request waits for that
// request to end, as it would wait for a PUT of its own to be torn down, so
// that nothing of the call outlives it: a batch whose callers have all gone
// is cancelled (send), otherwise it ends with its answer or its deadline.
func (b *batcher) put(ctx context.Context, k call, it wire.BatchItem) (wire.BlobInfo, bool, error) {
	bi := &batchItem{ctx: ctx, k: k, it: it, done: make(chan putOutcome, 1),
		deadline: time.Now().Add(b.c.answerWait(int64(len(it.Data))))}
	b.mu.Lock()
	if time.Now().Before(b.legacyUntil) {
		b.mu.Unlock()
		return b.c.putBuffered(ctx, k, it.Data)
	}
	b.queue = append(b.queue, bi)
	start := b.inflight < b.c.batchInflight
	if start {
		b.inflight++
	}
	b.mu.Unlock()
	if start {
		go b.run()
	}
	select {
	case o := <-bi.done:
		return o.info, o.created, o.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	sent := bi.sent
	b.mu.Unlock()
	if !sent {
		// take skips a blob whose context is done, so it never will be.
		return wire.BlobInfo{}, false, unreachable(ctx, k, ctx.Err())
	}
	o := <-bi.done
	return o.info, o.created, o.err
}

// run sends batches until the queue is empty, then gives its slot back.
func (b *batcher) run() {
	for {
		b.mu.Lock()
		items := b.take()
		if len(items) == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.send(items)
	}
}

// take removes the next batch from the queue: up to batchMax blobs and
// wire.MaxBatchBytes of frames, without those whose caller has gone or
// whose deadline has passed (they are answered with the timeout). b.mu is
// held.
func (b *batcher) take() []*batchItem {
	var (
		items []*batchItem
		total int // bytes of the frames taken
		n     int
	)
	now := time.Now()
	for n < len(b.queue) && len(items) < b.c.batchMax {
		bi := b.queue[n]
		if bi.ctx.Err() != nil {
			n++
			continue
		}
		if !now.Before(bi.deadline) {
			bi.done <- putOutcome{err: errs.Wrap(errs.Unavailable, errAnswerTimeout, "node %s: %s", b.node, bi.k.op)}
			n++
			continue
		}
		size := wire.FrameSize(bi.it)
		if len(items) > 0 && total+size > wire.MaxBatchBytes {
			break
		}
		bi.sent = true
		items = append(items, bi)
		total += size
		n++
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return items
}

// send makes one batch request and hands every blob its answer.
func (b *batcher) send(items []*batchItem) {
	size := 0
	for _, bi := range items {
		size += wire.FrameSize(bi.it)
	}
	body := make([]byte, 0, size)
	for _, bi := range items {
		var err error
		if body, err = wire.AppendBatchFrame(body, bi.it); err != nil {
			// batchable admits no blob that fails here.
			panic(fmt.Sprintf("nodeclient: batch frame: %v", err))
		}
	}
	k := call{method: http.MethodPost, node: b.node, path: wire.PathBlobBatch,
		op: fmt.Sprintf("put a batch of %d blobs", len(items)), body: bytes.NewReader(body), size: int64(len(body))}
	// The queue is in order of arrival, so the first blob's deadline is the
	// batch's.
	ctx, cancel := context.WithDeadlineCause(context.Background(), items[0].deadline, errAnswerTimeout)
	defer cancel()
	// A request nobody waits for any more is ended.
	var alive atomic.Int32
	alive.Store(int32(len(items)))
	for _, bi := range items {
		stop := context.AfterFunc(bi.ctx, func() {
			if alive.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	results, status, answer, err := b.c.postBatch(ctx, k)
	switch {
	case err != nil:
		for _, bi := range items {
			bi.done <- putOutcome{err: unreachable(ctx, bi.k, err)}
		}
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		// A node without the batch route: send these one by one, and the
		// next ones too for a while.
		b.mu.Lock()
		b.legacyUntil = time.Now().Add(legacyRetry)
		b.mu.Unlock()
		var wg sync.WaitGroup
		for _, bi := range items {
			wg.Go(func() {
				info, created, err := b.c.putBuffered(bi.ctx, bi.k, bi.it.Data)
				bi.done <- putOutcome{info, created, err}
			})
		}
		wg.Wait()
	case status != http.StatusOK:
		for _, bi := range items {
			bi.done <- putOutcome{err: statusError(bi.k, status, answer)}
		}
	case len(results) != len(items):
		err := fmt.Errorf("%d results for %d blobs", len(results), len(items))
		for _, bi := range items {
			bi.done <- putOutcome{err: errs.Wrap(errs.Unavailable, err, "node %s: %s: malformed batch answer", b.node, bi.k.op)}
		}
	default:
		for i, bi := range items {
			if results[i].ID != bi.it.ID {
				err := fmt.Errorf("result %d is for blob %q", i, results[i].ID)
				bi.done <- putOutcome{err: errs.Wrap(errs.Unavailable, err, "node %s: %s: malformed batch answer", b.node, bi.k.op)}
				continue
			}
			bi.done <- itemOutcome(bi.k, results[i])
		}
	}
}

// itemOutcome is what Put returns for one blob's result in a batch answer:
// what it would have returned for the same answer to a PUT.
func itemOutcome(k call, r wire.BatchResult) putOutcome {
	switch r.Status {
	case http.StatusCreated, http.StatusOK:
		return putOutcome{info: wire.BlobInfo{ID: r.ID, Size: r.Size, Checksum: r.Checksum}, created: r.Status == http.StatusCreated}
	}
	se := &StatusError{Status: r.Status, Code: r.Error, Message: r.Message}
	return putOutcome{err: errs.Wrap(kindOfAnswer(r.Status), se, "node %s: %s", k.node, k.op)}
}

// postBatch sends a batch and reads the answer: its results when the status
// is 200, else the status and the answer's body.
func (c *Client) postBatch(ctx context.Context, k call) ([]wire.BatchResult, int, []byte, error) {
	req, err := c.newRequest(ctx, k)
	if err != nil {
		return nil, 0, nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, b, nil
	}
	var a wire.BatchAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, 0, nil, fmt.Errorf("malformed batch answer: %w", err)
	}
	return a.Results, http.StatusOK, nil, nil
}
