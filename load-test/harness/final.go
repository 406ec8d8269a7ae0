package harness

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

// FinalOptions bound the closing pass.
type FinalOptions struct {
	// Concurrency is how many files are read at once. Default 4.
	Concurrency int
	// Attempts is how many times a file whose read fails for want of an
	// answer (a 503, a broken connection) is tried before it counts as
	// unreadable. A 404 or wrong bytes count at once. Default 5.
	Attempts int
	// Backoff is the pause between attempts. Default 1s.
	Backoff time.Duration
	// RequestTimeout bounds each read. Default 30s.
	RequestTimeout time.Duration
}

func (o FinalOptions) withDefaults() FinalOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	return o
}

// FinalReport is the outcome of reading back every acknowledged file.
type FinalReport struct {
	Checked int `json:"checked"`
	Intact  int `json:"intact"`
	// Lost files answered 404; Corrupt ones delivered other bytes;
	// Unreadable ones had no answer with their bytes in any attempt.
	Lost       int      `json:"lost"`
	Corrupt    int      `json:"corrupt"`
	Unreadable int      `json:"unreadable"`
	Retried    int      `json:"retried"` // files that needed more than one attempt
	Bytes      int64    `json:"bytesCompared"`
	Bad        []string `json:"bad,omitempty"` // "id: why", the first few
}

// OK reports whether every acknowledged file was read back intact.
func (f FinalReport) OK() bool { return f.Intact == f.Checked }

// maxBadListed bounds the files a report names one by one.
const maxBadListed = 20

// FinalPass downloads every file in files and compares its bytes with what
// was uploaded, recording each read as KindFinalRead.
func FinalPass(ctx context.Context, c *client.Client, files []Acked, rec *Recorder, opts FinalOptions) FinalReport {
	opts = opts.withDefaults()
	var (
		mu  sync.Mutex
		rep = FinalReport{Checked: len(files)}
		wg  sync.WaitGroup
		ch  = make(chan Acked)
	)
	bad := func(a Acked, why string) {
		if len(rep.Bad) < maxBadListed {
			rep.Bad = append(rep.Bad, a.ID+": "+why)
		}
	}
	for range opts.Concurrency {
		wg.Go(func() {
			for a := range ch {
				attempts, err := readWithRetries(ctx, c, rec, a, opts)
				mu.Lock()
				if attempts > 1 {
					rep.Retried++
				}
				var apiErr *client.APIError
				switch {
				case err == nil:
					rep.Intact++
					rep.Bytes += a.Content.Size
				case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
					rep.Lost++
					bad(a, "lost: "+Classify(err))
				case errs.KindOf(err) == errs.Corrupt:
					rep.Corrupt++
					bad(a, "corrupt: "+err.Error())
				default:
					rep.Unreadable++
					bad(a, "unreadable: "+Classify(err))
				}
				mu.Unlock()
			}
		})
	}
	for _, a := range files {
		select {
		case ch <- a:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
	// Files never handed out because ctx ended count as unreadable.
	if missing := rep.Checked - rep.Intact - rep.Lost - rep.Corrupt - rep.Unreadable; missing > 0 {
		rep.Unreadable += missing
		if len(rep.Bad) < maxBadListed {
			rep.Bad = append(rep.Bad, "the pass was cut short: "+context.Cause(ctx).Error())
		}
	}
	return rep
}

// readWithRetries reads a once, and again after Backoff while the failure is
// a want of an answer, up to Attempts times. It returns the attempts made and
// the last error.
func readWithRetries(ctx context.Context, c *client.Client, rec *Recorder, a Acked, opts FinalOptions) (int, error) {
	var err error
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
		err = readAndCompare(rctx, c, rec, a, KindFinalRead)
		cancel()
		var apiErr *client.APIError
		final := err == nil ||
			(errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound) ||
			errs.KindOf(err) == errs.Corrupt
		if final || attempt == opts.Attempts || ctx.Err() != nil {
			return attempt, err
		}
		select {
		case <-ctx.Done():
			return attempt, err
		case <-time.After(opts.Backoff):
		}
	}
}
