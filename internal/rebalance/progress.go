package rebalance

import (
	"github.com/dfs-project/dfs/internal/apiwire"
	"sync"
	"sync/atomic"
	"time"
)

// Progress is how far a run that is still going has come.
type Progress = apiwire.RunProgress

// liveRun is the progress of one run, updated by its workers.
type liveRun struct {
	start time.Time
	total int
	done  atomic.Int64
	bytes atomic.Int64
}

// at is r's progress as of now.
func (r *liveRun) at(now time.Time) Progress {
	p := Progress{StartedAt: r.start.UTC(), FilesDone: int(r.done.Load()), FilesTotal: r.total, BytesCopied: r.bytes.Load()}
	elapsed := now.Sub(r.start).Seconds()
	if elapsed > 0 {
		p.BytesPerSecond = float64(p.BytesCopied) / elapsed
	}
	if p.FilesDone > 0 {
		eta := elapsed * float64(p.FilesTotal-p.FilesDone) / float64(p.FilesDone)
		p.EtaSeconds = &eta
	}
	return p
}

// liveRuns are the runs going on in this process, by trigger and node; the
// latest of two runs with the same key is shown.
type liveRuns struct{ m sync.Map }

func runKey(t Trigger, node string) string { return string(t) + ":" + node }

// begin registers a run and returns it with the function that ends it.
func (l *liveRuns) begin(t Trigger, node string, total int, start time.Time) (*liveRun, func()) {
	r := &liveRun{start: start, total: total}
	key := runKey(t, node)
	l.m.Store(key, r)
	return r, func() { l.m.CompareAndDelete(key, r) }
}

// progress is the progress of the run for t and node, if one is going on.
func (l *liveRuns) progress(t Trigger, node string, now time.Time) (Progress, bool) {
	v, ok := l.m.Load(runKey(t, node))
	if !ok {
		return Progress{}, false
	}
	return v.(*liveRun).at(now), true
}
