package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/httpx"
)

const (
	// freshGrace is how long a connection that has sent no request yet is
	// left open once shutdown begins: long enough for a client that has just
	// connected to send its request line, after which the connection is
	// closed like an idle one. net/http's Shutdown would wait 5 s for it,
	// all of a local cluster's stop timeout: Go's HTTP client leaves such a
	// connection in its pool whenever another one freed up before its dial
	// completed.
	freshGrace = time.Second
	// freshCheck is how often shutdown looks for such connections.
	freshCheck = 100 * time.Millisecond
	// cutoffWait bounds the wait for handlers to return once their requests
	// were cancelled at the end of SHUTDOWN_TIMEOUT; one that ignores its
	// context is left behind rather than holding the process.
	cutoffWait = time.Second
	// slowStop is when a stage of the shutdown is worth a log line saying
	// what it waits for.
	slowStop = time.Second
	// inflightListed bounds the requests one log line names.
	inflightListed = 10
)

// listener is one of the coordinator's HTTP servers (the REST API, the S3
// API) with what its shutdown needs to know: the connections that have sent
// no request yet and the requests being served.
type listener struct {
	name string
	srv  *http.Server

	mu       sync.Mutex
	fresh    map[net.Conn]time.Time      // connections with no request yet, by when they were accepted
	inflight map[*http.Request]time.Time // requests being served, by when they arrived
}

// newListener serves h; every request's context derives from requests, so
// cancelling it cuts off every request still running.
func newListener(name string, h http.Handler, requests context.Context) *listener {
	l := &listener{name: name, fresh: map[net.Conn]time.Time{}, inflight: map[*http.Request]time.Time{}}
	l.srv = &http.Server{
		Handler:           l.track(h),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return requests },
		ConnState:         l.connState,
		ConnContext:       httpx.GatherContext,
	}
	return l
}

func (l *listener) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == http.StateNew {
		l.fresh[c] = time.Now()
	} else {
		delete(l.fresh, c)
	}
}

func (l *listener) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.inflight[r] = time.Now()
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			delete(l.inflight, r)
			l.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// closeFresh closes the connections that have sent no request for longer
// than age.
func (l *listener) closeFresh(age time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c, since := range l.fresh {
		if time.Since(since) > age {
			_ = c.Close()
			delete(l.fresh, c)
		}
	}
}

// requests describes the requests being served, oldest first, at most
// inflightListed of them, and counts them all.
func (l *listener) requests() ([]string, int) {
	l.mu.Lock()
	type req struct {
		what  string
		since time.Time
	}
	all := make([]req, 0, len(l.inflight))
	for r, since := range l.inflight {
		all = append(all, req{r.Method + " " + r.URL.Path, since})
	}
	l.mu.Unlock()
	slices.SortFunc(all, func(a, b req) int { return a.since.Compare(b.since) })
	var out []string
	for _, r := range all[:min(len(all), inflightListed)] {
		out = append(out, fmt.Sprintf("%s (%s)", r.what, time.Since(r.since).Round(time.Millisecond)))
	}
	return out, len(all)
}

// shutdown stops accepting, lets the requests in flight finish until grace
// ends, and closes connections as they fall idle. It reports whether every
// request finished in time; if not, the caller cuts them off.
func (l *listener) shutdown(grace context.Context) (bool, error) {
	done := make(chan error, 1)
	go func() { done <- l.srv.Shutdown(grace) }()
	tick := time.NewTicker(freshCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if grace.Err() != nil {
				return false, nil
			}
			return true, err
		case <-tick.C:
			l.closeFresh(freshGrace)
		}
	}
}

// cutOff closes every connection, after their requests' contexts were
// cancelled, and waits up to cutoffWait for the handlers to return. It
// returns the requests whose handlers are still running.
func (l *listener) cutOff() ([]string, int) {
	_ = l.srv.Close()
	deadline := time.Now().Add(cutoffWait)
	for {
		left, n := l.requests()
		if n == 0 || time.Now().After(deadline) {
			return left, n
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopServing shuts the listeners down together: no new connections, then
// SHUTDOWN_TIMEOUT for the requests in flight, then the rest are cancelled
// and their connections closed. Running out of grace is part of an orderly
// shutdown, not a failure: it is logged, with the requests it cut off.
func (a *App) stopServing(ls []*listener) error {
	start := time.Now()
	var inflight int
	for _, l := range ls {
		_, n := l.requests()
		inflight += n
	}
	a.log.Info("coordinator shutting down", "requests_in_flight", inflight, "grace", a.cfg.ShutdownTimeout)
	grace, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	finished := make([]bool, len(ls))
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() {
			finished[i], errs[i] = l.shutdown(grace)
			// What is still running when grace ends is named before it is
			// cut. Named here, once shutdown has returned, not from a
			// context.AfterFunc on grace: shutdown can see grace end and
			// return before such a function has started, and stopping it
			// then would skip the line.
			if !finished[i] {
				if left, n := l.requests(); n > 0 {
					a.log.Warn("shutdown grace is over; cutting off the requests still running", "api", l.name,
						"requests", n, "oldest", left, "grace", a.cfg.ShutdownTimeout)
				}
			}
		})
	}
	wg.Wait()
	if !slices.Contains(finished, false) {
		if d := time.Since(start); d > slowStop {
			a.log.Info("the requests and connections open at shutdown are done", "requests", inflight, "duration_ms", d.Milliseconds())
		}
		return errors.Join(errs...)
	}
	// Handlers see the cancellation through their requests' contexts, and
	// the API's detached work (a manual rebalance) through a.requests too.
	a.cancelRequests()
	for i, l := range ls {
		if finished[i] {
			continue
		}
		if left, n := l.cutOff(); n > 0 {
			a.log.Warn("handlers still running after their requests were cancelled; shutting down without them", "api", l.name,
				"requests", n, "oldest", left)
		}
	}
	return errors.Join(errs...)
}

// loops are the coordinator's background goroutines, by name, so that a
// shutdown slow to stop them can say which it waits for.
type loops struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[string]bool
}

func (l *loops) Go(name string, fn func()) {
	l.mu.Lock()
	if l.running == nil {
		l.running = map[string]bool{}
	}
	l.running[name] = true
	l.mu.Unlock()
	l.wg.Go(func() {
		defer func() {
			l.mu.Lock()
			delete(l.running, name)
			l.mu.Unlock()
		}()
		fn()
	})
}

// wait waits for every loop to return, and logs the ones still running after
// slowStop, then how long they took.
func (l *loops) wait(log *slog.Logger) {
	start := time.Now()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(slowStop):
	}
	l.mu.Lock()
	names := make([]string, 0, len(l.running))
	for name := range l.running {
		names = append(names, name)
	}
	l.mu.Unlock()
	slices.Sort(names)
	log.Warn("shutdown is waiting for background loops to stop", "loops", names)
	<-done
	log.Info("background loops stopped", "duration_ms", time.Since(start).Milliseconds())
}
