package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// startProfiles fetches the coordinator's CPU profile over the measured
// window of a rate run (after warm) and its allocation profile at the end,
// into dir as <name>.cpu.pprof and <name>.allocs.pprof. The returned wait
// blocks until both are written and reports where. Without PPROF_ADDR on the
// coordinator (no -pprof) it does nothing.
func (b *bench) startProfiles(ctx context.Context, bc *benchCluster, name string) (wait func()) {
	if bc.pprofAddr == "" {
		return func() {}
	}
	dir := filepath.Join(filepath.Dir(b.jsonPath), "profiles")
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-time.After(b.warm):
		case <-ctx.Done():
			return
		}
		secs := max(1, int(b.window.Seconds()))
		for _, p := range []struct{ path, file string }{
			{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), name + ".cpu.pprof"},
			{"/debug/pprof/allocs", name + ".allocs.pprof"},
		} {
			if err := fetchTo(ctx, "http://"+bc.pprofAddr+p.path, filepath.Join(dir, p.file)); err != nil {
				b.logf("profile %s: %v", p.file, err)
				continue
			}
			b.logf("wrote %s (go tool pprof -top %s)", filepath.Join(dir, p.file), filepath.Join(dir, p.file))
		}
	}()
	return func() { <-done }
}

func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
