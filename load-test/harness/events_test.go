package harness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWindows(t *testing.T) {
	s := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	events := []Event{
		{At: s(10), Action: "kill", Target: "node-2", Fault: true},
		{At: s(25), Action: "restart", Target: "node-2"}, // not a fault: no window of its own
		{At: s(40), Action: "kill", Target: "coordinator", Fault: true},
	}
	tests := []struct {
		name     string
		failures []Failure
		want     []Window
	}{
		{
			name: "no failure",
			want: []Window{{Fault: "kill node-2", At: s(10)}, {Fault: "kill coordinator", At: s(40)}},
		},
		{
			name: "a failure in flight when the fault struck belongs to it",
			failures: []Failure{
				{Kind: KindUpload, Start: s(9.9), End: s(10.1), Class: "no answer: connection reset"},
				{Kind: KindDownload, Start: s(26), End: s(26.5), Class: "503 STORAGE_UNAVAILABLE"},
			},
			want: []Window{
				{Fault: "kill node-2", At: s(10), Failures: 2, FirstStart: s(9.9), LastEnd: s(26.5),
					ByKind:  map[Kind]int{KindUpload: 1, KindDownload: 1},
					Classes: map[string]int{"no answer: connection reset": 1, "503 STORAGE_UNAVAILABLE": 1}},
				{Fault: "kill coordinator", At: s(40)},
			},
		},
		{
			name: "failures before any fault get a window of their own",
			failures: []Failure{
				{Kind: KindUpload, Start: s(1), End: s(2), Class: "timeout"},
				{Kind: KindUpload, Start: s(40.5), End: s(41), Class: "no answer: connection refused"},
			},
			want: []Window{
				{Fault: "before any fault", Failures: 1, FirstStart: s(1), LastEnd: s(2),
					ByKind: map[Kind]int{KindUpload: 1}, Classes: map[string]int{"timeout": 1}},
				{Fault: "kill node-2", At: s(10)},
				{Fault: "kill coordinator", At: s(40), Failures: 1, FirstStart: s(40.5), LastEnd: s(41),
					ByKind: map[Kind]int{KindUpload: 1}, Classes: map[string]int{"no answer: connection refused": 1}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Windows(tt.failures, events))
		})
	}
}

func TestWindowSpan(t *testing.T) {
	require.Zero(t, Window{}.Span())
	require.Equal(t, 3*time.Second, Window{Failures: 2, FirstStart: time.Second, LastEnd: 4 * time.Second}.Span())
}
