package ringsim

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzLimits are small so random scripts stay fast and reach every limit.
var fuzzLimits = limits{vnodes: 20, points: 200, spread: 200, line: 64}

func FuzzRun(f *testing.F) {
	for _, seed := range []string{
		"VNODES 3\nADD P\nADD Q\nADD R\nREPLICAS x5 3\nREPLICAS foo 5\n",
		"LOOKUP k\nREPLICAS k 3\nSPREAD 10 3\n",
		"add a\nADD b\nremove a\nlookup k\nSPREAD 20 2\n",
		"\n \t\r\nVNODES 0\nVNODES 21\nREPLICAS k -1\nSPREAD x y\nBOGUS\nADD a,b\n",
		"ADD A\r\nVNODES 2\r\nREPLICAS k 99999999999999999999\nLOOKUP " + strings.Repeat("x", 80) + "\n",
		"VNODES 3\nADD P zone=z1\nADD Q zone=z2 weight=2\nSET R zone=z1\nADD R zone=z1\nSET Q weight=0.5\nREPLICAS x5 3\nSPREAD 9 2\n",
		"ADD a\nADD a\nREMOVE z\nVNODES 20\nADD b\nADD c\nADD d\nADD e\nADD f\nADD g\nADD h\nADD i\nADD j\nADD k\nSPREAD 200 11",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script string) {
		var out strings.Builder
		require.NoError(t, run(strings.NewReader(script), &out, fuzzLimits))

		// Replay line by line on a twin to tie each answer to its line.
		twin := newSim(fuzzLimits)
		var want strings.Builder
		lines := strings.Split(script, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1] // the newline ends the last line
		}
		for _, line := range lines {
			fields := strings.Fields(line)
			if len(line) > fuzzLimits.line {
				want.WriteString("ERROR line longer than 64 bytes\n")
				continue
			}
			answer := twin.exec(line)
			require.NotContains(t, answer, "\n")
			if len(fields) == 0 {
				require.Empty(t, answer, "a blank line has no answer")
				continue
			}
			switch asciiUpper(fields[0]) {
			case "LOOKUP", "REPLICAS", "SPREAD":
				require.NotEmpty(t, answer, "a query has exactly one answer: %q", line)
			}
			if asciiUpper(fields[0]) == "REPLICAS" && !strings.HasPrefix(answer, "ERROR") && answer != "NONE" {
				names := strings.Split(answer, ",")
				require.Len(t, names, len(slices.Compact(slices.Sorted(slices.Values(names)))), "distinct replicas: %q", answer)
			}
			if answer != "" {
				want.WriteString(answer + "\n")
			}
		}
		require.Equal(t, want.String(), out.String())
	})
}
