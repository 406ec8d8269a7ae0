package main

import "slices"

// Figure is one measured quantity over several runs.
type Figure struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit"`
	Runs   []float64 `json:"runs"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

// newFigure summarises runs. The median of an even count is the mean of the
// middle two. Without runs every figure is zero and valid reports false.
func newFigure(name, unit string, runs []float64) Figure {
	f := Figure{Name: name, Unit: unit, Runs: slices.Clone(runs)}
	if len(runs) == 0 {
		return f
	}
	s := slices.Clone(runs)
	slices.Sort(s)
	f.Min, f.Max = s[0], s[len(s)-1]
	if n := len(s); n%2 == 1 {
		f.Median = s[n/2]
	} else {
		f.Median = (s[n/2-1] + s[n/2]) / 2
	}
	return f
}

// valid reports whether the figure was measured.
func (f Figure) valid() bool { return len(f.Runs) > 0 }

// series collects one value per run for several named figures.
type series struct {
	order []string
	units map[string]string
	runs  map[string][]float64
}

func newSeries() *series {
	return &series{units: map[string]string{}, runs: map[string][]float64{}}
}

func (s *series) add(name, unit string, v float64) {
	if _, ok := s.units[name]; !ok {
		s.order = append(s.order, name)
		s.units[name] = unit
	}
	s.runs[name] = append(s.runs[name], v)
}

func (s *series) figures() map[string]Figure {
	out := make(map[string]Figure, len(s.order))
	for _, name := range s.order {
		out[name] = newFigure(name, s.units[name], s.runs[name])
	}
	return out
}
