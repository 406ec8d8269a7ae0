package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// perfShares sums a flat `perf report --sort symbol` listing by where the
// time went: "kernel" for kernel symbols, the Go package of a user symbol
// ("modernc.org/sqlite/lib", "runtime", "net/http"), or "other" for a symbol
// without a package (assembly helpers, the vDSO). A flat profile of a Go
// server spreads over hundreds of small functions; summed by package it
// says at a glance whether the metadata store, the runtime or the network
// stack takes the time.
func perfShares(r io.Reader) (map[string]float64, error) {
	shares := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pct, rest, ok := strings.Cut(line, "%")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil {
			continue
		}
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(rest, "[k]"):
			shares["kernel"] += v
		case strings.HasPrefix(rest, "[.]"):
			fields := strings.Fields(strings.TrimPrefix(rest, "[.]"))
			if len(fields) == 0 {
				continue
			}
			shares[goPackage(fields[0])] += v
		}
	}
	return shares, sc.Err()
}

// goPackage returns the package path of a Go symbol such as
// "net/http.(*conn).serve" or "modernc.org/sqlite/lib._walChecksumBytes".
func goPackage(sym string) string {
	slash := strings.LastIndexByte(sym, '/')
	dot := strings.IndexByte(sym[slash+1:], '.')
	if dot < 0 {
		return "other"
	}
	return sym[:slash+1+dot]
}

// writeShares writes shares largest first, one per line.
func writeShares(w io.Writer, shares map[string]float64) {
	keys := make([]string, 0, len(shares))
	for k := range shares {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return shares[keys[i]] > shares[keys[j]] })
	for _, k := range keys {
		fmt.Fprintf(w, "%6.2f%%  %s\n", shares[k], k)
	}
}
