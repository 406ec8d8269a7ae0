package storagenode

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/scrub"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// newScrubber builds the node's scrubber over its store, reporting to the
// coordinator when the node has one.
func (s *Server) newScrubber() (*scrub.Scrubber, error) {
	var rep scrub.Reporter
	if s.cfg.CoordinatorURL != "" {
		rep = &corruptReporter{
			url:    strings.TrimRight(s.cfg.CoordinatorURL, "/") + wire.CorruptPath(s.cfg.NodeID),
			token:  s.cfg.ClusterToken,
			client: &http.Client{},
		}
	}
	return scrub.New(scrub.Options{
		Store: s.store, StatePath: filepath.Join(s.cfg.DataDir, scrub.StateFile),
		Period: s.cfg.ScrubPeriod, Bandwidth: s.cfg.ScrubBandwidth, Reporter: rep, Logger: s.log,
		StartDelay: scrubStartDelay,
	})
}

// scrubStartDelay lets a starting node serve and register before its
// scrubber reads the disk, and keeps a node in a crash loop from rewriting
// its scrub state at every start.
const scrubStartDelay = 2 * time.Second

// corruptReporter tells the coordinator about a corrupt copy, which it
// checks again and quarantines and rebuilds as a failed verify does.
type corruptReporter struct {
	url    string
	token  string
	client *http.Client
}

func (c *corruptReporter) ReportCorrupt(ctx context.Context, f scrub.Finding) error {
	body, _ := json.Marshal(wire.CorruptReport{BlobID: f.ID, StoredChecksum: f.Stored, ActualChecksum: f.Actual, Reason: f.Reason}) // strings only
	return postToCoordinator(ctx, c.client, c.url, c.token, body)
}

// scrubStatus answers GET /internal/scrub.
func (s *Server) scrubStatus(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, s.scrubWire(r.Context()))
}

func (s *Server) scrubWire(ctx context.Context) wire.ScrubStatus {
	st := s.scrubber.Status(ctx)
	var last *wire.ScrubPass
	if p := st.LastPass; p != nil {
		last = &wire.ScrubPass{StartedAt: p.Start.UTC(), FinishedAt: p.End.UTC(), Copies: p.Copies, Bytes: p.Bytes, CorruptionsFound: p.CorruptionsFound}
	}
	return wire.ScrubStatus{
		NodeID: s.cfg.NodeID,
		ScrubProgress: wire.ScrubProgress{
			PeriodStart: timeOrNil(st.PeriodStart), LastFullPassAt: timeOrNil(st.LastFullPassAt),
			PeriodSeconds: st.Period.Seconds(), BandwidthBytesPerSecond: st.Bandwidth,
			CopiesScrubbed: st.CopiesScrubbed, BytesScrubbed: st.BytesScrubbed,
			CopiesTotal: st.CopiesTotal, BytesTotal: st.BytesTotal, CorruptionsFound: st.CorruptionsFound,
			CorruptionsFoundTotal: st.CorruptionsFoundTotal, UnreportedCorruptions: st.Unreported,
			Running: st.Running, Behind: st.Behind,
		},
		HashedCopies: st.HashedCopies, HashedBytes: st.HashedBytes, ThrottledBytes: st.ThrottledBytes,
		LastPass: last,
	}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// registerScrubMetrics exports the scrubber's progress; each series reads
// it at scrape time.
func registerScrubMetrics(reg prometheus.Registerer, sc *scrub.Scrubber) error {
	read := func(pick func(scrub.Status) float64) func() float64 {
		return func() float64 { return pick(sc.Status(context.Background())) }
	}
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.Unix())
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	gauge := func(name, help string, f func(scrub.Status) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, read(f))
	}
	counter := func(name, help string, f func(scrub.Status) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, read(f))
	}
	for _, c := range []prometheus.Collector{
		gauge("dfs_node_scrub_period_copies", "Blobs the scrubber has hashed in its current period.",
			func(s scrub.Status) float64 { return float64(s.CopiesScrubbed) }),
		gauge("dfs_node_scrub_period_bytes", "Bytes the scrubber has hashed in its current period.",
			func(s scrub.Status) float64 { return float64(s.BytesScrubbed) }),
		gauge("dfs_node_scrub_period_start_timestamp_seconds", "When the scrubber's current period began.",
			func(s scrub.Status) float64 { return unix(s.PeriodStart) }),
		gauge("dfs_node_scrub_last_full_pass_timestamp_seconds", "When the scrubber last finished a pass over every blob (0 = never).",
			func(s scrub.Status) float64 { return unix(s.LastFullPassAt) }),
		gauge("dfs_node_scrub_running", "1 while the current period's pass is not finished.",
			func(s scrub.Status) float64 { return flag(s.Running) }),
		gauge("dfs_node_scrub_behind", "1 when the rest of the pass cannot be read within SCRUB_PERIOD at SCRUB_BANDWIDTH.",
			func(s scrub.Status) float64 { return flag(s.Behind) }),
		gauge("dfs_node_scrub_unreported_corruptions", "Corrupt copies found that the coordinator has not taken yet.",
			func(s scrub.Status) float64 { return float64(s.Unreported) }),
		counter("dfs_node_scrub_corruptions_found_total", "Corrupt copies the scrubber has found over the life of the data directory.",
			func(s scrub.Status) float64 { return float64(s.CorruptionsFoundTotal) }),
		counter("dfs_node_scrub_hashed_copies_total", "Blobs the scrubber has hashed since the process started.",
			func(s scrub.Status) float64 { return float64(s.HashedCopies) }),
		counter("dfs_node_scrub_hashed_bytes_total", "Bytes of blobs the scrubber has hashed since the process started.",
			func(s scrub.Status) float64 { return float64(s.HashedBytes) }),
		counter("dfs_node_scrub_throttled_bytes_total", "Bytes the scrubber has read through its SCRUB_BANDWIDTH token bucket.",
			func(s scrub.Status) float64 { return float64(s.ThrottledBytes) }),
		counter("dfs_node_scrub_throttle_wait_seconds_total", "Time the scrubber has waited for its token bucket.",
			func(s scrub.Status) float64 { return s.ThrottleWait.Seconds() }),
		counter("dfs_node_scrub_overruns_total", "Passes that finished after the end of their period.",
			func(s scrub.Status) float64 { return float64(s.Overruns) }),
	} {
		if err := reg.Register(c); err != nil {
			return errs.Wrap(errs.Invalid, err, "register scrub metrics")
		}
	}
	return nil
}
