package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The machine's baselines: what the same work costs without dfs, measured
// in the same run so that ratios hold on a shared, drifting machine.
const (
	baseHTTPPost   = "baseline.http.post4k.rate"
	baseHTTPPostP  = "baseline.http.post4k.p"
	baseHTTPGet    = "baseline.http.get4k.rate"
	baseHTTPGetP   = "baseline.http.get4k.p"
	baseHTTPBigGet = "baseline.http.get-large.mbps"
	baseHTTPBigPut = "baseline.http.post-large.mbps"
	baseFsync      = "baseline.fsync4k.rate"
	baseFsyncP     = "baseline.fsync4k.p"
	baseDisk       = "baseline.disk-write-large.mbps"
)

// trivialServer is the loopback HTTP baseline: it answers from memory and
// discards what it is sent, doing nothing else.
func trivialServer(largeSize int64) (url string, stop func(), err error) {
	small := bytes.Repeat([]byte("x"), 4<<10)
	chunk := bytes.Repeat([]byte("y"), 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"sizeBytes":%d}`, n)
	})
	mux.HandleFunc("GET /small", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(small)))
		_, _ = w.Write(small)
	})
	mux.HandleFunc("GET /large", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(largeSize, 10))
		for left := largeSize; left > 0; left -= int64(len(chunk)) {
			if _, err := w.Write(chunk[:min(left, int64(len(chunk)))]); err != nil {
				return
			}
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

// httpClient is a client with a kept-alive connection per worker.
func httpClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conns*2, conns*2
	return &http.Client{Transport: t, Timeout: 5 * time.Minute}
}

func (b *bench) baselines(ctx context.Context) error {
	s := newSeries()
	url, stop, err := trivialServer(b.largeSize)
	if err != nil {
		return err
	}
	defer stop()
	hc := httpClient(b.clients)
	body := bytes.Repeat([]byte("z"), 4<<10)
	post := func(ctx context.Context, _, _ int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/upload", bytes.NewReader(body))
		if err != nil {
			return err
		}
		return drain(hc.Do(req))
	}
	get := func(ctx context.Context, _, _ int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/small", nil)
		if err != nil {
			return err
		}
		return drain(hc.Do(req))
	}
	dir := filepath.Join(b.root, "baseline")
	for run := range b.runs {
		b.logf("baselines, run %d of %d", run+1, b.runs)
		for _, m := range []struct {
			key string
			op  func(context.Context, int, int) error
		}{{baseHTTPPost, post}, {baseHTTPGet, get}} {
			r := closedLoop(ctx, b.clients, b.warm, b.window/2, m.op)
			if r.firstErr != nil {
				return fmt.Errorf("%s: %w", m.key, r.firstErr)
			}
			addRate(s, m.key, r)
		}
		mbps, err := timedBytes(b.largeSize, func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/large", nil)
			if err != nil {
				return err
			}
			return drainExact(hc.Do(req))(b.largeSize)
		})
		if err != nil {
			return fmt.Errorf("loopback GET: %w", err)
		}
		s.add(baseHTTPBigGet, "MB/s", mbps)
		mbps, err = timedBytes(b.largeSize, func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/upload", io.LimitReader(zeroReader{}, b.largeSize))
			if err != nil {
				return err
			}
			req.ContentLength = b.largeSize
			return drain(hc.Do(req))
		})
		if err != nil {
			return fmt.Errorf("loopback POST: %w", err)
		}
		s.add(baseHTTPBigPut, "MB/s", mbps)

		r, err := fsyncLoop(ctx, dir, b.clients, b.warm, b.window/2)
		if err != nil {
			return err
		}
		addRate(s, baseFsync, r)
		mbps, err = diskWrite(dir, b.largeSize)
		if err != nil {
			return err
		}
		s.add(baseDisk, "MB/s", mbps)
	}
	// The published 4 KiB files stay until the bench ends (see keepData).
	figs := s.figures()
	rename(figs, baseHTTPPost, fmt.Sprintf("loopback HTTP POST 4 KiB ×%d", b.clients))
	rename(figs, baseHTTPPostP+"50", "loopback POST p50")
	rename(figs, baseHTTPPostP+"99", "loopback POST p99")
	rename(figs, baseHTTPGet, fmt.Sprintf("loopback HTTP GET 4 KiB ×%d", b.clients))
	rename(figs, baseHTTPGetP+"50", "loopback GET p50")
	rename(figs, baseHTTPGetP+"99", "loopback GET p99")
	rename(figs, baseHTTPBigGet, "loopback HTTP GET "+sizeText(b.largeSize))
	rename(figs, baseHTTPBigPut, "loopback HTTP POST "+sizeText(b.largeSize))
	rename(figs, baseFsync, fmt.Sprintf("fsync'd 4 KiB write+rename ×%d", b.clients))
	rename(figs, baseFsyncP+"50", "fsync'd write p50")
	rename(figs, baseFsyncP+"99", "fsync'd write p99")
	rename(figs, baseDisk, "fsync'd disk write "+sizeText(b.largeSize))
	b.res.addFigures(figs)
	return nil
}

// addRate adds a loop's rate and its p50 and p99 under key, key's stem+"50"
// and stem+"99" (the stem is key with its last part, ".rate", cut to ".p").
func addRate(s *series, key string, r loopResult) {
	stem := key[:len(key)-len("rate")] + "p"
	s.add(key, "/s", r.rate())
	s.add(stem+"50", "ms", msOf(r.hist.Quantile(0.50)))
	s.add(stem+"99", "ms", msOf(r.hist.Quantile(0.99)))
}

func rename(figs map[string]Figure, key, name string) {
	if f, ok := figs[key]; ok {
		f.Name = name
		figs[key] = f
	}
}

// fsyncLoop measures n writers each publishing 4 KiB files durably, the way
// a storage node publishes a copy: write a temporary file, fsync it, rename
// it into place, fsync the directory.
func fsyncLoop(ctx context.Context, dir string, n int, warm, window time.Duration) (loopResult, error) {
	data := bytes.Repeat([]byte("f"), 4<<10)
	for w := range n {
		if err := os.MkdirAll(filepath.Join(dir, "fsync", strconv.Itoa(w)), 0o755); err != nil {
			return loopResult{}, err
		}
	}
	r := closedLoop(ctx, n, warm, window, func(_ context.Context, w, i int) error {
		d := filepath.Join(dir, "fsync", strconv.Itoa(w))
		f, err := os.CreateTemp(d, ".tmp-*")
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(f.Name(), filepath.Join(d, strconv.Itoa(i))); err != nil {
			return err
		}
		return syncDir(d)
	})
	return r, r.firstErr
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// diskWrite writes size bytes to a new file in 1 MiB writes, fsyncs it and
// returns MB/s over the whole (the fsync included).
func diskWrite(dir string, size int64) (float64, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	path := filepath.Join(dir, "large")
	defer os.Remove(path)
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	return timedBytes(size, func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		for left := size; left > 0; left -= int64(len(buf)) {
			if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return f.Close()
	})
}

// timedBytes runs fn and returns size bytes over its duration in MB/s
// (10^6 bytes per second).
func timedBytes(size int64, fn func() error) (float64, error) {
	start := time.Now()
	if err := fn(); err != nil {
		return 0, err
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

// drain reads and closes an answer, failing on a status outside 2xx.
func drain(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// drainExact is drain that also checks the body's length.
func drainExact(resp *http.Response, err error) func(want int64) error {
	return func(want int64) error {
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		n, err := discard(resp.Body)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("got %d of %d bytes", n, want)
		}
		return nil
	}
}

// discard reads r to its end in 256 KiB reads and counts the bytes. (Not
// io.CopyBuffer into io.Discard: that hands the copy to io.Discard's own
// ReadFrom, which reads 8 KiB at a time whatever buffer it is given, and the
// load generator then spends 32 reads where one would do.)
func discard(r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// zeroReader is an endless source of zero bytes.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
