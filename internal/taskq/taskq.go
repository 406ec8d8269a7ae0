// Package taskq runs work that outlives the call that asked for it — the
// rebuild of a copy a download found corrupt, a membership notice to the other
// coordinators — on a bounded queue whose workers the daemon runs with its
// other background loops. Nothing escapes shutdown: Run returns only when
// every task it started has returned, and tasks run in Run's context, so a
// shutdown cancels them instead of letting them work on against a closed
// store.
package taskq

import (
	"context"
	"log/slog"
	"sync"
)

// Task is one piece of background work. ctx ends when the queue's Run is
// cancelled.
type Task func(ctx context.Context)

// Options configure a Queue. The zero value is usable.
type Options struct {
	// Name names the queue in its log lines.
	Name string
	// Size bounds the tasks waiting to run (default 256); Go refuses more.
	Size int
	// Workers is how many tasks run at once (default 1).
	Workers int
	Logger  *slog.Logger
}

// Queue is a bounded queue of tasks. Its methods are safe for concurrent use.
type Queue struct {
	name    string
	workers int
	log     *slog.Logger
	tasks   chan Task

	mu      sync.Mutex
	stopped bool
}

// New returns a Queue; its tasks run once Run is called.
func New(o Options) *Queue {
	if o.Size <= 0 {
		o.Size = 256
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Queue{name: o.Name, workers: o.Workers, log: o.Logger, tasks: make(chan Task, o.Size)}
}

// Go queues t. It never blocks: it reports false, and t never runs, when the
// queue is full or Run has returned, and the caller falls back on whatever
// would have found the work anyway (a repair pass, the next refresh).
func (q *Queue) Go(t Task) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return false
	}
	select {
	case q.tasks <- t:
		return true
	default:
		return false
	}
}

// Run runs the queued tasks, Workers at a time, until ctx ends. It then
// returns once the running tasks have (their context is ctx, so they are
// cancelled too), and drops the tasks still waiting. A Queue runs once: after
// Run returns, Go refuses every task.
func (q *Queue) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range q.workers {
		wg.Go(func() {
			for {
				// A cancelled queue starts nothing more, even with
				// tasks waiting.
				if ctx.Err() != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case t := <-q.tasks:
					t(ctx)
				}
			}
		})
	}
	wg.Wait()
	q.mu.Lock()
	q.stopped = true
	dropped := len(q.tasks)
	for range dropped {
		<-q.tasks
	}
	q.mu.Unlock()
	if dropped > 0 {
		q.log.Info("background tasks dropped at shutdown", "queue", q.name, "tasks", dropped)
	}
}
