package harness

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReportOK(t *testing.T) {
	clean := func() *Report {
		return &Report{
			Final:  FinalReport{Checked: 2, Intact: 2},
			Events: []Event{{Action: "kill", Target: "node-2", Fault: true}},
		}
	}
	tests := []struct {
		name  string
		spoil func(*Report)
		ok    bool
	}{
		{"clean", func(*Report) {}, true},
		{"a file lost", func(r *Report) { r.Final.Intact, r.Final.Lost = 1, 1 }, false},
		{"a broken promise", func(r *Report) { r.Violations = []Violation{{What: "404"}} }, false},
		{"a crash", func(r *Report) { r.addExit("node-1", errors.New("signal: segmentation fault")) }, false},
		{"a fault not made", func(r *Report) { r.Events[0].Err = "no process named node-9" }, false},
		{"a bad repaired state", func(r *Report) { r.Repair = &RepairReport{Files: 2, Active: 1, Verified: 2} }, false},
		{"a clean repaired state", func(r *Report) { r.Repair = &RepairReport{Files: 2, Active: 2, Verified: 2} }, true},
		{"the invariant not reached", func(r *Report) {
			r.Invariant = &InvariantReport{Summary: "1 violations (orphan 1)", Violations: []string{"orphan file x on node-1: …"}}
		}, false},
		{"the invariant held", func(r *Report) { r.Invariant = &InvariantReport{OK: true, Summary: "the invariant holds"} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clean()
			tt.spoil(r)
			require.Equal(t, tt.ok, r.OK())
			var out bytes.Buffer
			r.WriteText(&out)
			if r.Invariant != nil {
				// Whatever the verdict, the report says what the last check saw.
				require.Contains(t, out.String(), r.Invariant.Summary)
				for _, v := range r.Invariant.Violations {
					require.Contains(t, out.String(), v)
				}
			}
			if tt.ok {
				require.Contains(t, out.String(), "RESULT: PASS")
			} else {
				require.Contains(t, out.String(), "RESULT: FAIL")
			}
		})
	}
}
