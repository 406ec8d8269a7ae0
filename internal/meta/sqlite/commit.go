package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// MaxBatch is the most write transactions that one SQLite transaction, and so
// one COMMIT and one fsync of the WAL, carries. A batch's members run one
// after another before the commit, so the bound caps how long the first of
// them waits for the others (each takes tens of microseconds, the fsync a few
// milliseconds) and how much one commit appends to the WAL. While fewer
// writers than this are waiting, all of them join the next commit.
const MaxBatch = 64

// errClosed is the cause a write gets when the store closes before the write
// has run.
var errClosed = errors.New("the metadata store is closed")

// savepoint names the savepoint that makes each member of a batch
// all-or-nothing. Members run one at a time, so one name serves them all.
const savepoint = "member"

// The states of a writeReq. Only a successful compare-and-swap out of
// reqWaiting decides who owns the request: the committer (which then runs it
// and always answers) or the caller (which has already returned).
const (
	reqWaiting   int32 = iota // queued; fn has not run
	reqClaimed                // the committer has taken it; an answer will come
	reqAbandoned              // the caller gave up; fn will never run
)

// panicked carries a panic in a member's fn, recovered by the committer so
// that the other members and later writes go on, back to the caller's
// goroutine, which panics with it.
type panicked struct {
	value any
	stack []byte // where fn panicked, on the committer's goroutine
}

func (p *panicked) Error() string {
	return fmt.Sprintf("panic in a write transaction: %v\n\n%s", p.value, p.stack)
}

// writeReq is one caller's write transaction, queued for the committer.
type writeReq struct {
	ctx   context.Context
	op    string
	fn    func(context.Context, *sql.Tx) error
	state atomic.Int32
	// done receives the answer. It has room for it, so the committer never
	// waits for a caller that stopped listening.
	done chan error
}

// answer hands r its outcome, given its kind as a direct write would get it.
func (r *writeReq) answer(err error) {
	r.done <- fail(r.ctx, err, r.op)
}

// committer is the write side of the Store: one goroutine that owns the write
// connection and commits the queued write transactions in batches.
type committer struct {
	write   *sql.DB
	ws      stmtSet // prepared statements, the savepoints among them
	queue   chan *writeReq
	closing chan struct{} // closed when Close begins
	stopped chan struct{} // closed when the goroutine has returned
	once    sync.Once     // closes closing

	// Counted for tests and benchmarks: write transactions whose fn ran, and
	// COMMITs issued.
	ran     atomic.Int64
	commits atomic.Int64
}

func newCommitter(write *sql.DB, ws stmtSet) *committer {
	c := &committer{
		write:   write,
		ws:      ws,
		queue:   make(chan *writeReq, MaxBatch),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go c.loop()
	return c
}

// writeTx runs fn as one all-or-nothing write transaction and returns once its
// outcome is durable: nil only after the COMMIT that includes it has
// returned. fn may run in the same SQLite transaction as other callers' fns,
// inside a savepoint of its own, so it must not commit, roll back or hold
// anything open on return.
//
// fn gets ctx without its cancellation, and its statements must use that
// context rather than the caller's: once fn has started, the caller's
// context can no longer end its statements, because interrupting a write
// statement would make SQLite roll back the whole shared transaction. The
// caller then waits for the outcome, which takes at most the rest of one
// batch. Until fn has started, a done ctx ends the wait with ctx's error and
// fn never runs.
func (c *committer) writeTx(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fail(ctx, err, op)
	}
	select {
	case <-c.closing:
		return fail(ctx, errClosed, op)
	default:
	}
	r := &writeReq{ctx: ctx, op: op, fn: fn, done: make(chan error, 1)}
	select {
	case c.queue <- r:
	case <-ctx.Done():
		return fail(ctx, ctx.Err(), op)
	case <-c.closing:
		return fail(ctx, errClosed, op)
	}
	var cause error
	select {
	case err := <-r.done:
		return rethrow(err)
	case <-ctx.Done():
		cause = ctx.Err()
	case <-c.closing:
		cause = errClosed
	}
	if r.state.CompareAndSwap(reqWaiting, reqAbandoned) {
		return fail(ctx, cause, op)
	}
	// The committer has claimed r: its answer is on the way.
	return rethrow(<-r.done)
}

// rethrow panics on the caller's goroutine if the caller's fn panicked on
// the committer's, as it would have without the committer.
func rethrow(err error) error {
	if p, ok := errors.AsType[*panicked](err); ok {
		panic(p)
	}
	return err
}

// close stops the committer. The batch under way, if any, finishes and its
// members get their outcomes; callers still queued get errClosed.
func (c *committer) close() {
	c.once.Do(func() { close(c.closing) })
	<-c.stopped
}

// loop takes the first queued request, adds whatever else is queued at that
// moment, up to MaxBatch, and runs them as one batch. It never waits for a
// batch to fill: a lone writer commits at once.
func (c *committer) loop() {
	defer close(c.stopped)
	batch := make([]*writeReq, 0, MaxBatch)
	for {
		// Closing wins over queued work, which the callers abandon.
		select {
		case <-c.closing:
			return
		default:
		}
		select {
		case <-c.closing:
			return
		case r := <-c.queue:
			batch = append(batch, r)
		}
	gather:
		for len(batch) < MaxBatch {
			select {
			case r := <-c.queue:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		c.run(batch)
		clear(batch)
		batch = batch[:0]
	}
}

// run executes batch in one IMMEDIATE transaction and answers every member
// that it claims.
//
// The transaction's context is no caller's, so no caller can roll it back.
// Each member runs inside a savepoint: a member whose fn fails is rolled back
// to it and answered with its own error at once; the batch goes on. The
// members whose fn succeeded are answered with the COMMIT's result, after it
// has returned.
func (c *committer) run(batch []*writeReq) {
	ctx := context.Background()
	tx, err := c.write.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range batch {
			if r.state.CompareAndSwap(reqWaiting, reqClaimed) {
				r.answer(err)
			}
		}
		return
	}
	succeeded := make([]*writeReq, 0, len(batch))
	for i, r := range batch {
		if !r.state.CompareAndSwap(reqWaiting, reqClaimed) {
			continue // abandoned: the caller has already returned
		}
		if err := r.ctx.Err(); err != nil {
			r.answer(err)
			continue
		}
		c.ran.Add(1)
		fnErr, txErr := runMember(ctx, c.ws, tx, r)
		if txErr != nil {
			// SQLite may have rolled the whole transaction back (it does so
			// for some I/O, full-disk and memory errors): nothing of the
			// batch can be trusted to commit.
			_ = tx.Rollback()
			cause := txErr
			if _, ok := fnErr.(*panicked); !ok && fnErr != nil {
				cause = errors.Join(fnErr, txErr) // fnErr most likely broke it
			}
			abort := fmt.Errorf("the transaction it shared with other writes was rolled back: %w", cause)
			if fnErr != nil {
				r.answer(fnErr)
			} else {
				r.answer(abort)
			}
			for _, o := range succeeded {
				o.answer(abort)
			}
			for _, o := range batch[i+1:] {
				if o.state.CompareAndSwap(reqWaiting, reqClaimed) {
					o.answer(abort)
				}
			}
			return
		}
		if fnErr != nil {
			r.answer(fnErr)
			continue
		}
		succeeded = append(succeeded, r)
	}
	if len(succeeded) == 0 {
		_ = tx.Rollback() // nothing to make durable
		return
	}
	c.commits.Add(1)
	err = tx.Commit()
	for _, r := range succeeded {
		r.answer(err)
	}
}

// runMember runs r's fn inside a savepoint, releasing it when fn succeeds and
// rolling back to it when fn fails. fnErr is fn's error; txErr is set when
// the savepoint statements fail, which leaves the transaction in a state the
// batch cannot rely on.
func runMember(ctx context.Context, ws stmtSet, tx *sql.Tx, r *writeReq) (fnErr, txErr error) {
	if _, err := ws.exec(ctx, tx, sqlSavepoint); err != nil {
		return nil, err
	}
	if fnErr = callFn(r, tx); fnErr == nil {
		_, txErr = ws.exec(ctx, tx, sqlRelease)
		return nil, txErr
	}
	if _, err := ws.exec(ctx, tx, sqlRollbackTo); err != nil {
		return fnErr, err
	}
	_, txErr = ws.exec(ctx, tx, sqlRelease)
	return fnErr, txErr
}

// callFn runs r's fn, turning a panic into a *panicked error.
func callFn(r *writeReq, tx *sql.Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicked{value: v, stack: debug.Stack()}
		}
	}()
	return r.fn(context.WithoutCancel(r.ctx), tx)
}
