package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
)

func TestNewFigure(t *testing.T) {
	tests := []struct {
		name             string
		runs             []float64
		median, min, max float64
	}{
		{"odd count", []float64{3, 1, 2}, 2, 1, 3},
		{"even count takes the mean of the middle two", []float64{4, 1, 3, 2}, 2.5, 1, 4},
		{"one run", []float64{7}, 7, 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFigure("x", "/s", tt.runs)
			require.Equal(t, tt.median, f.Median)
			require.Equal(t, tt.min, f.Min)
			require.Equal(t, tt.max, f.Max)
			require.True(t, f.valid())
		})
	}
	require.False(t, newFigure("x", "/s", nil).valid(), "a figure without runs was not measured")
}

func TestRowRatio(t *testing.T) {
	r := &Results{Figures: map[string]Figure{
		"dfs":  newFigure("dfs", "/s", []float64{100}),
		"base": newFigure("base", "/s", []float64{600}),
	}}
	r.row("dfs", "base", 3, "RF ceiling")
	r.row("dfs", "base", 0, "")
	r.row("absent", "base", 0, "")
	require.Len(t, r.Rows, 2, "a row needs its dfs figure")
	require.InDelta(t, 0.5, r.Rows[0].Ratio, 1e-9, "100 against 600÷3")
	require.InDelta(t, 100.0/600, r.Rows[1].Ratio, 1e-9)

	var out strings.Builder
	r.writeTable(&out)
	require.Contains(t, out.String(), "base ÷ 3 (RF ceiling)")
	require.Contains(t, out.String(), "0.50")
}

func TestParseMetric(t *testing.T) {
	text := `# HELP dfs_rebalance_runs_total Rebalance runs by trigger.
# TYPE dfs_rebalance_runs_total counter
dfs_rebalance_runs_total{trigger="JOINED"} 2
dfs_rebalance_runs_total{trigger="MANUAL"} 0
dfs_rebalance_duration_seconds_sum{trigger="JOINED"} 1.25
`
	tests := []struct {
		sample string
		want   float64
	}{
		{`dfs_rebalance_runs_total{trigger="JOINED"}`, 2},
		{`dfs_rebalance_duration_seconds_sum{trigger="JOINED"}`, 1.25},
		{`dfs_rebalance_runs_total{trigger="FAILED"}`, 0},
	}
	for _, tt := range tests {
		got, err := parseMetric(strings.NewReader(text), tt.sample)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, tt.sample)
	}
}

func TestParseProcFiles(t *testing.T) {
	kib, err := parseStatusField(strings.NewReader("Name:\tcoordinator\nVmHWM:\t   25740 kB\nVmRSS:\t   20000 kB\n"), "VmHWM")
	require.NoError(t, err)
	require.EqualValues(t, 25740, kib)
	_, err = parseStatusField(strings.NewReader("Name:\tx\n"), "VmHWM")
	require.Error(t, err)

	// The command name may hold spaces and parentheses.
	ticks, err := parseProcStat("1234 (a (b) c) S 1 1 1 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 0 0")
	require.NoError(t, err)
	require.EqualValues(t, 325, ticks)

	busy, total := parseMachineStat("cpu  100 5 50 800 20 3 2 10 7 0")
	require.EqualValues(t, 100+5+50+3+2+10, busy, "idle and iowait are not busy; guest time is inside user time")
	require.EqualValues(t, 990, total)
}

func TestClosedLoopCountsOnlyTheWindow(t *testing.T) {
	calls := 0
	r := closedLoop(context.Background(), 1, 20*time.Millisecond, 50*time.Millisecond, func(context.Context, int, int) error {
		calls++
		time.Sleep(time.Millisecond)
		if calls%2 == 0 {
			return errors.New("even")
		}
		return nil
	})
	require.Positive(t, r.ops)
	require.Positive(t, r.failures)
	require.Less(t, r.ops+r.failures, calls, "calls that ended in the warm-up are not counted")
	require.EqualError(t, r.firstErr, "even")
	require.EqualValues(t, r.ops, r.hist.Count(), "only successful calls are timed")
}

func TestPerfShares(t *testing.T) {
	report := `# Samples: 2K of event 'cpu-clock:ppp'
#
    13.17%  [k] finish_task_switch.isra.0
     6.83%  [k] _raw_spin_unlock_irqrestore
     1.26%  [.] runtime.memmove
     0.99%  [.] modernc.org/sqlite/lib._walChecksumBytes
     0.92%  [.] modernc.org/sqlite/lib._sqlite3VdbeExec
     0.50%  [.] net/http.(*conn).serve
     0.46%  [.] indexbytebody
`
	shares, err := perfShares(strings.NewReader(report))
	require.NoError(t, err)
	require.InDelta(t, 20.0, shares["kernel"], 1e-9)
	require.InDelta(t, 1.91, shares["modernc.org/sqlite/lib"], 1e-9)
	require.InDelta(t, 1.26, shares["runtime"], 1e-9)
	require.InDelta(t, 0.50, shares["net/http"], 1e-9)
	require.InDelta(t, 0.46, shares["other"], 1e-9)

	var out strings.Builder
	writeShares(&out, shares)
	require.True(t, strings.HasPrefix(out.String(), " 20.00%  kernel\n"), out.String())
}

func TestPacedLoopKeepsToItsRate(t *testing.T) {
	var mu sync.Mutex
	calls, seen := 0, map[int]bool{}
	// 200/s over 20 ms of warm-up and 100 ms of window: at most 24 starts,
	// however fast the calls are, and each start number given once.
	r := pacedLoop(context.Background(), 4, 200, 20*time.Millisecond, 100*time.Millisecond, func(_ context.Context, _, i int) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		require.False(t, seen[i], "start %d given twice", i)
		seen[i] = true
		if i%3 == 0 {
			return errors.New("third")
		}
		return nil
	})
	require.LessOrEqual(t, calls, 24)
	require.LessOrEqual(t, r.ops+r.failures, calls)
	require.EqualValues(t, r.ops, r.hist.Count(), "only successful calls are timed")
}

func TestAddCPUPerOperation(t *testing.T) {
	s := newSeries()
	measured := func() (map[string]float64, float64) {
		return map[string]float64{localcluster.CoordinatorName: 0.5, "node1": 0.25, "node2": 0.25, loadGenerator: 0.1}, 0
	}
	addCPU(s, "upload4k", loopResult{ops: 2000, window: 2 * time.Second}, measured)
	addCPU(s, "download4k", loopResult{window: 2 * time.Second}, measured)
	figs := s.figures()
	require.InDelta(t, 500, figs[dfsCPU+"upload4k.coordinator"+usPerOp].Median, 1e-9, "0.5 cores at 1,000 ops/s is 500 µs an operation")
	require.InDelta(t, 500, figs[dfsCPU+"upload4k.nodes"+usPerOp].Median, 1e-9, "the nodes are added up")
	require.InDelta(t, 100, figs[dfsCPU+"upload4k.bench"+usPerOp].Median, 1e-9)
	require.InDelta(t, 1000, figs[dfsCPU+"upload4k"+servers+usPerOp].Median, 1e-9, "the coordinator and the nodes together")
	require.NotContains(t, figs, dfsCPU+"download4k"+servers+usPerOp)
	require.InDelta(t, 0.5, figs[dfsCPU+"download4k.coordinator"].Median, 1e-9)
	require.NotContains(t, figs, dfsCPU+"download4k.coordinator"+usPerOp, "no operation, no figure per operation")

	renameCPU(figs, "upload4k", "4 KiB uploads")
	r := &Results{Figures: figs}
	r.cpuRows("upload4k", "download4k")
	require.Len(t, r.Rows, 4+4+4, "cores and µs/op for upload, only cores for download")
	require.Equal(t, "coordinator CPU per operation, 4 KiB uploads", figs[dfsCPU+"upload4k.coordinator"+usPerOp].Name)
}
