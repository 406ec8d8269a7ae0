package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// Row sets a dfs figure beside the machine's baseline for the same work.
type Row struct {
	DFS      string  `json:"dfs"`                // a key of Results.Figures
	Baseline string  `json:"baseline,omitempty"` // a key of Results.Figures, or empty
	Divisor  float64 `json:"divisor,omitempty"`  // the baseline is divided by this first (RF ceilings)
	Note     string  `json:"note,omitempty"`
	// Ratio is dfs median / (baseline median / Divisor); for latencies and
	// memory, where less is better, it is still dfs over baseline.
	Ratio float64 `json:"ratio,omitempty"`
}

// Results is everything a bench run measured.
type Results struct {
	Started  string            `json:"started"`
	Machine  Machine           `json:"machine"`
	Config   map[string]string `json:"config"`
	Figures  map[string]Figure `json:"figures"`
	Rows     []Row             `json:"rows"`
	Notes    []string          `json:"notes,omitempty"`
	Failures []string          `json:"failures,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemoryMiB int64  `json:"memoryMiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
}

func (r *Results) addFigures(m map[string]Figure) {
	for k, v := range m {
		r.Figures[k] = v
	}
}

func (r *Results) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// row adds a row if its dfs figure was measured.
func (r *Results) row(dfs, baseline string, divisor float64, note string) {
	f, ok := r.Figures[dfs]
	if !ok || !f.valid() {
		return
	}
	row := Row{DFS: dfs, Baseline: baseline, Divisor: divisor, Note: note}
	if b, ok := r.Figures[baseline]; ok && b.valid() && b.Median != 0 {
		d := divisor
		if d == 0 {
			d = 1
		}
		row.Ratio = f.Median / (b.Median / d)
	}
	r.Rows = append(r.Rows, row)
}

// writeTable prints the results for people.
func (r *Results) writeTable(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("")
	p("== dfs cluster benchmark ==")
	p("started %s on %d CPU(s) %s, %d MiB RAM, %s, %s", r.Started, r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemoryMiB, r.Machine.Kernel, r.Machine.Go)
	keys := make([]string, 0, len(r.Config))
	for k := range r.Config {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p("  %s: %s", k, r.Config[k])
	}
	p("")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "dfs figure\tmedian (min–max)\tbaseline\tbaseline median\tdfs/baseline\t")
	for _, row := range r.Rows {
		f := r.Figures[row.DFS]
		base, baseVal, ratio := "-", "-", "-"
		if b, ok := r.Figures[row.Baseline]; ok && b.valid() {
			base = b.Name
			v := b.Median
			if row.Divisor > 1 {
				base += fmt.Sprintf(" ÷ %g", row.Divisor)
				v /= row.Divisor
			}
			baseVal = num(v) + " " + b.Unit
			ratio = ratioText(row.Ratio)
		}
		if row.Note != "" {
			base += " (" + row.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s %s (%s–%s)\t%s\t%s\t%s\t\n", f.Name, num(f.Median), f.Unit, num(f.Min), num(f.Max), base, baseVal, ratio)
	}
	tw.Flush()
	p("")
	p("all figures:")
	names := make([]string, 0, len(r.Figures))
	for k := range r.Figures {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		f := r.Figures[k]
		runs := make([]string, len(f.Runs))
		for i, v := range f.Runs {
			runs[i] = num(v)
		}
		p("  %-34s %s %s  runs: %s", k, num(f.Median), f.Unit, strings.Join(runs, ", "))
	}
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	for _, f := range r.Failures {
		p("FAILURE: %s", f)
	}
}

// writeJSON writes the results to path, creating its directory.
func (r *Results) writeJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// num formats a figure with about three significant digits.
func num(v float64) string {
	switch {
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// ratioText keeps two significant digits of small ratios, which a fixed
// two decimals would round to 0.00.
func ratioText(v float64) string {
	switch {
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.2g", v)
}
