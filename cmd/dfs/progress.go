package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progressThreshold is the smallest transfer that gets a progress bar: a
// smaller one is over before a bar could tell anything.
const progressThreshold = 1 << 20

// progressInterval is how often the bar is redrawn.
const progressInterval = 200 * time.Millisecond

// isTerminal reports whether w is a character device, which is how a
// terminal looks without a terminal library: progress is drawn there and
// not into pipes and files.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress counts the bytes of one transfer and, when drawing, redraws a bar
// on a terminal until done is called. A progress that does not draw only
// counts, so commands use it the same way either way.
type progress struct {
	label string
	total int64 // < 0 when unknown
	n     atomic.Int64

	w     io.Writer // nil: do not draw
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
	// waiting is what the bar says once every byte has passed but the
	// transfer is not over (an upload waits for the copies to be stored).
	waiting string
	// sent is when the last byte passed, as time since start; 0 until then.
	sent atomic.Int64
}

// newProgress starts a bar on w when draw is set and the transfer is large
// (or of unknown size); otherwise the progress only counts.
func newProgress(w io.Writer, draw bool, label string, total int64, waiting string) *progress {
	p := &progress{label: label, total: total, waiting: waiting, start: time.Now()}
	if !draw || (total >= 0 && total < progressThreshold) {
		return p
	}
	p.w, p.stop = w, make(chan struct{})
	p.wg.Go(func() {
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw(false)
			}
		}
	})
	return p
}

func (p *progress) add(n int) {
	if total := p.n.Add(int64(n)); p.total >= 0 && total >= p.total && p.sent.Load() == 0 {
		p.sent.CompareAndSwap(0, int64(time.Since(p.start)))
	}
}

func (p *progress) draw(final bool) {
	line := renderProgress(p.label, p.n.Load(), p.total, time.Since(p.start), time.Duration(p.sent.Load()), p.waiting, final)
	end := ""
	if final {
		end = "\n"
	}
	// \r returns to the line's start; \x1b[K clears what a longer previous
	// line left behind.
	fmt.Fprintf(p.w, "\r%s\x1b[K%s", line, end)
}

// done stops the bar and, when the transfer succeeded, leaves its final
// state on the terminal; a failed one is erased, since an error follows.
func (p *progress) done(ok bool) {
	if p.w == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
	if ok {
		p.draw(true)
	} else {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// reader counts what is read through it.
func (p *progress) reader(r io.Reader) io.Reader { return &countingReader{r: r, p: p} }

// writer counts what is written through it.
func (p *progress) writer(w io.Writer) io.Writer { return &countingWriter{w: w, p: p} }

type countingReader struct {
	r io.Reader
	p *progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.add(n)
	return n, err
}

type countingWriter struct {
	w io.Writer
	p *progress
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.p.add(n)
	return n, err
}

// The widths of the label and the bar, in cells: with the other fields a
// line stays within 80 columns.
const (
	labelWidth = 16
	barWidth   = 18
)

// renderProgress draws one line of a transfer's progress: the label, a bar
// (when the total is known), the bytes so far and the average rate. A final
// line gives the elapsed time instead of the bar and, for a transfer that
// waited after its last byte (sent > 0 and a waiting text), how long sending
// took.
func renderProgress(label string, n, total int64, elapsed, sent time.Duration, waiting string, final bool) string {
	if r := []rune(label); len(r) > labelWidth {
		label = string(r[:labelWidth-1]) + "…"
	}
	if final {
		line := fmt.Sprintf("%-*s %s in %s (%s)", labelWidth, label, humanBytes(n), elapsed.Round(100*time.Millisecond), rate(n, elapsed))
		if waiting != "" && sent > 0 {
			line += fmt.Sprintf("; sent in %s (%s)", sent.Round(100*time.Millisecond), rate(n, sent))
		}
		return line
	}
	if total < 0 {
		return fmt.Sprintf("%-*s %10s  %s", labelWidth, label, humanBytes(n), rate(n, elapsed))
	}
	frac := 1.0
	if total > 0 {
		frac = min(float64(n)/float64(total), 1)
	}
	filled := int(frac * barWidth)
	bar := strings.Repeat("=", filled)
	if filled < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-filled-1)
	}
	if n >= total && waiting != "" {
		return fmt.Sprintf("%-*s [%s] 100%% %s", labelWidth, label, bar, waiting)
	}
	return fmt.Sprintf("%-*s [%s] %3d%% %9s / %-9s %s", labelWidth, label, bar, int(frac*100), humanBytes(n), humanBytes(total), rate(n, elapsed))
}

// rate is the average rate of n bytes in d.
func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return humanBytes(int64(float64(n)/d.Seconds())) + "/s"
}
