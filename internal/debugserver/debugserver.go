// Package debugserver serves Go's runtime profiles (net/http/pprof) on a
// listener of their own, apart from the service's API, so that profiling is
// switched on by an operator (PPROF_ADDR) and never reachable through the
// public port.
package debugserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"
)

// ValidateAddr accepts host:port with a numeric port (host may be empty for
// every interface); the empty string means profiling is off.
func ValidateAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port (127.0.0.1:6060, say): %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// Handler routes /debug/pprof/ and its profiles.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Start listens on addr and serves the profiles until ctx ends. It returns
// the address actually bound (useful with port 0) once the listener is open;
// an address that cannot be bound is an error at start, not a silent gap.
func Start(ctx context.Context, addr string, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("PPROF_ADDR %s: %w", addr, err)
	}
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("profiling listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	log.Warn("profiling endpoints open: /debug/pprof/ exposes stacks and command line; keep this address private",
		"addr", ln.Addr().String())
	return ln.Addr().String(), nil
}
