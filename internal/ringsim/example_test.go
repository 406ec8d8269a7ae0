package ringsim_test

import (
	"os"
	"strings"

	"github.com/dfs-project/dfs/internal/ringsim"
)

func ExampleRun() {
	script := "VNODES 3\nADD P\nADD Q\nADD R\nLOOKUP x5\nREPLICAS x5 3\nSPREAD 10 2\nREPLICAS x5 0\n"
	if err := ringsim.Run(strings.NewReader(script), os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// P
	// P,R,Q
	// P=7 Q=5 R=8
	// ERROR n must be a positive integer, got "0"
}
