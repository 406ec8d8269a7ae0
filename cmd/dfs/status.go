package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/dfs-project/dfs/internal/client"
)

const statusHelp = `usage: dfs status [flags]

Shows how safe the stored data is right now: the readable files by their
number of healthy copies (ACTIVE copies on HEALTHY nodes), the bytes of the
files below the replication factor, the failure headroom (how many node
failures, any of them, the files survive now without one losing its last
copy) and, per node, how many files would be left with one copy or none if
that node failed now.

The exit status is 1 when some file has fewer healthy copies than the
replication factor, so that a script can wait for repairs:
  until dfs status >/dev/null; do sleep 5; done
`

func runStatus(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("status", statusHelp, s)
	if _, code, done := cc.parse(args, 0, 0); done {
		return code
	}
	rep, err := cc.c.Durability(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(rep)
	} else {
		printDurability(cc.s.out, rep)
	}
	if rep.FilesBelow(rep.ReplicationFactor) > 0 {
		return exitFailed
	}
	return exitOK
}

func printDurability(w io.Writer, rep client.DurabilityReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "files\t%d readable, %d copies wanted each\n", rep.Files, rep.ReplicationFactor)
	fmt.Fprintf(tw, "healthy copies\t%s\n", copiesLine(rep.FilesByCopies))
	below := rep.FilesBelow(rep.ReplicationFactor)
	if below == 0 {
		fmt.Fprintf(tw, "at risk\tnothing: every file has all its copies\n")
	} else {
		fmt.Fprintf(tw, "at risk\t%d files below %d copies, %s\n", below, rep.ReplicationFactor, humanBytes(rep.BytesAtRisk))
	}
	if lost := rep.FilesByCopies["0"]; lost > 0 {
		fmt.Fprintf(tw, "unreadable\t%d files have no healthy copy\n", lost)
	}
	fmt.Fprintf(tw, "failure headroom\t%d (node failures survivable now without losing a file)\n", rep.FailureHeadroom)
	fmt.Fprintf(tw, "nodes\t%d healthy of %d known\n", rep.HealthyNodes, len(rep.Nodes))
	tw.Flush()
	if len(rep.Nodes) == 0 {
		return
	}
	fmt.Fprintln(w, "\nif one node failed now:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tFILES LEFT WITH 1 COPY\tFILES LEFT WITH NONE")
	for _, n := range rep.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", n.NodeID, n.Status, n.FilesLeftWithOneCopy, n.FilesLeftWithNoCopy)
	}
	tw.Flush()
}

// copiesLine lists the counts from the most copies down: "3: 10  2: 1  1: 0  0: 0".
func copiesLine(byCopies map[string]int) string {
	keys := make([]int, 0, len(byCopies))
	for k := range byCopies {
		if c, err := strconv.Atoi(k); err == nil {
			keys = append(keys, c)
		}
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	line := ""
	for i, c := range keys {
		if i > 0 {
			line += "  "
		}
		line += fmt.Sprintf("%d: %d", c, byCopies[strconv.Itoa(c)])
	}
	return line
}
