package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

// Acked is a file the coordinator acknowledged with a 201: a promise that its
// bytes are stored and will be readable.
type Acked struct {
	ID       string        `json:"fileId"`
	Content  Content       `json:"content"`
	Checksum string        `json:"checksum"`
	Status   string        `json:"status"` // as acknowledged: ACTIVE or DEGRADED
	At       time.Duration `json:"atNs"`   // from the start of the run
}

// Ledger holds every acknowledged file. It is safe for concurrent use.
type Ledger struct {
	mu    sync.Mutex
	files []Acked
}

func (l *Ledger) add(a Acked) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files = append(l.files, a)
}

// pick returns a random acknowledged file.
func (l *Ledger) pick(rng *rand.Rand) (Acked, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.files) == 0 {
		return Acked{}, false
	}
	return l.files[rng.IntN(len(l.files))], true
}

// Files returns a copy of every acknowledged file, in order of acknowledgement.
func (l *Ledger) Files() []Acked {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Acked(nil), l.files...)
}

// Len is the number of acknowledged files.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.files)
}

// TrafficOptions shape the load.
type TrafficOptions struct {
	// Workers is the number of concurrent clients, each a closed loop of one
	// upload followed by ReadsPerWrite downloads. Default 4.
	Workers int
	// MinSize and MaxSize bound the size of each uploaded file, drawn
	// uniformly. Defaults 1 KiB and 64 KiB.
	MinSize, MaxSize int64
	// ReadsPerWrite is how many downloads of random acknowledged files follow
	// each upload. Default 2.
	ReadsPerWrite int
	// RequestTimeout bounds every request. Default 30s.
	RequestTimeout time.Duration
	// FailurePause is how long a worker waits after a failed request, so
	// that a worker facing a dead coordinator does not spin. Default 100ms.
	FailurePause time.Duration
	// Seed makes the file sizes, contents and picks reproducible. Default 1.
	Seed uint64
}

func (o TrafficOptions) withDefaults() TrafficOptions {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MinSize <= 0 {
		o.MinSize = 1 << 10
	}
	if o.MaxSize <= 0 {
		o.MaxSize = 64 << 10
	}
	o.MaxSize = max(o.MaxSize, o.MinSize)
	if o.ReadsPerWrite < 0 {
		o.ReadsPerWrite = 0
	} else if o.ReadsPerWrite == 0 {
		o.ReadsPerWrite = 2
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.FailurePause <= 0 {
		o.FailurePause = 100 * time.Millisecond
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// NewClient returns an API client for baseURL whose connection pool keeps a
// connection per worker, so that the load measures dfs rather than TCP
// connection setup.
func NewClient(baseURL string, conns int) (*client.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns * 2
	t.MaxIdleConnsPerHost = conns * 2
	return client.New(baseURL, client.Options{HTTPClient: &http.Client{Transport: t}})
}

// traffic is the running load.
type traffic struct {
	opts TrafficOptions
	c    *client.Client
	rec  *Recorder
	led  *Ledger
}

// RunTraffic runs the load until stop is cancelled, then lets every request
// in flight finish (each is bounded by RequestTimeout) and returns. A request
// is never cut short by stop, so an upload acknowledged at the last moment
// is in the ledger like any other.
func RunTraffic(stop context.Context, c *client.Client, opts TrafficOptions, rec *Recorder, led *Ledger) {
	t := &traffic{opts: opts.withDefaults(), c: c, rec: rec, led: led}
	var wg sync.WaitGroup
	for w := range t.opts.Workers {
		wg.Go(func() { t.worker(stop, uint64(w)) })
	}
	wg.Wait()
}

func (t *traffic) worker(stop context.Context, w uint64) {
	rng := rand.New(rand.NewPCG(t.opts.Seed, w))
	pause := func(err error) {
		if err == nil {
			return
		}
		select {
		case <-stop.Done():
		case <-time.After(t.opts.FailurePause):
		}
	}
	// Each content seed is unique across workers: worker w draws seeds
	// w, w+W, w+2W, …
	next := w
	for stop.Err() == nil {
		size := t.opts.MinSize + rng.Int64N(t.opts.MaxSize-t.opts.MinSize+1)
		next += uint64(t.opts.Workers)
		pause(t.upload(stop, Content{Seed: t.opts.Seed<<32 ^ next, Size: size}))
		for range t.opts.ReadsPerWrite {
			if stop.Err() != nil {
				return
			}
			a, ok := t.led.pick(rng)
			if !ok {
				break
			}
			pause(t.download(stop, a, KindDownload))
		}
	}
}

// requestContext bounds one request by RequestTimeout but not by the run's
// end, which only stops new requests.
func (t *traffic) requestContext(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(parent), t.opts.RequestTimeout)
}

func (t *traffic) upload(parent context.Context, content Content) error {
	ctx, cancel := t.requestContext(parent)
	defer cancel()
	h := sha256.New()
	start := time.Now()
	res, err := t.c.Upload(ctx, fmt.Sprintf("lt-%016x.bin", content.Seed), io.TeeReader(content.Reader(), h), content.Size, client.UploadOptions{})
	if err != nil {
		t.rec.Fail(KindUpload, start, err)
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if res.Checksum != sum || res.SizeBytes != content.Size {
		err := errs.E(errs.Corrupt, "acknowledged as %d bytes with checksum %s; uploaded %d bytes with checksum %s",
			res.SizeBytes, res.Checksum, content.Size, sum)
		t.rec.Fail(KindUpload, start, err)
		t.rec.Violate(KindUpload, res.FileID, err.Error())
		return err
	}
	t.rec.OK(KindUpload, start, content.Size, "")
	t.led.add(Acked{ID: res.FileID, Content: content, Checksum: sum, Status: string(res.Status), At: t.rec.Since(time.Now())})
	return nil
}

// download reads an acknowledged file and compares it with what was
// uploaded. A failure to answer is a failed request; a 404 or wrong bytes
// delivered as a complete answer is a violation too.
func (t *traffic) download(parent context.Context, a Acked, kind Kind) error {
	ctx, cancel := t.requestContext(parent)
	defer cancel()
	return readAndCompare(ctx, t.c, t.rec, a, kind)
}

func readAndCompare(ctx context.Context, c *client.Client, rec *Recorder, a Acked, kind Kind) error {
	cmp := NewComparer(a.Content)
	start := time.Now()
	info, err := c.Download(ctx, a.ID, cmp, client.DownloadOptions{})
	var apiErr *client.APIError
	switch {
	case err == nil:
		if cerr := cmp.Err(); cerr != nil {
			rec.Fail(kind, start, cerr)
			rec.Violate(kind, a.ID, fmt.Sprintf("a complete download served by %s: %v", info.ServedBy, cerr))
			return cerr
		}
		rec.OK(kind, start, cmp.Bytes(), info.ServedBy)
		return nil
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
		rec.Violate(kind, a.ID, "an acknowledged file answered "+Classify(err))
	case errs.KindOf(err) == errs.Corrupt:
		// The client hashed a complete body and it did not match the
		// declared checksum: corrupt bytes were delivered as a success.
		rec.Violate(kind, a.ID, fmt.Sprintf("served by %s: %v", info.ServedBy, err))
	}
	rec.Fail(kind, start, err)
	return err
}
