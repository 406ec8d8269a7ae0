package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

const statusHelp = `usage: dfs status [flags]

Shows how safe the stored data is right now: the readable files by their
number of healthy copies (ACTIVE copies on HEALTHY nodes), the bytes of the
files below the replication factor, the failure headroom (how many node
failures, any of them, the files survive now without one losing its last
copy) and, per node, how many files would be left with one copy or none if
that node failed now. Then each storage node's scrubber: how far its pass
over the node's copies has come, when it last finished one, and the corrupt
copies (checksum mismatches) it found this period and ever. -json prints the
durability report only; GET /api/cluster/scrub has the scrubbers', with
each unreachable node's error in full (shortened here).

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
		// The scrubbers are a second question: its failure leaves the
		// durability answer and the exit status as they are.
		sc, err := cc.c.Scrub(ctx)
		switch {
		case errs.Is(err, errs.NotFound):
		case err != nil:
			fmt.Fprintf(cc.s.out, "\nscrub: not available: %v\n", err)
		default:
			printScrub(cc.s.out, sc)
		}
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
	zoned := slices.ContainsFunc(rep.Zones, func(z client.ZoneRisk) bool { return z.Zone != "" })
	if zoned {
		fmt.Fprintf(tw, "zone headroom\t%d (whole zones that can fail now without losing a file)\n", rep.ZoneFailureHeadroom)
		if rep.FilesZoneCollapsed > 0 {
			fmt.Fprintf(tw, "zone collapsed\t%d files keep two copies in one zone while another zone has a healthy node\n", rep.FilesZoneCollapsed)
		}
	}
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
	if !zoned {
		return
	}
	fmt.Fprintln(w, "\nif one whole zone failed now:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ZONE\tHEALTHY NODES\tFILES LEFT WITH 1 COPY\tFILES LEFT WITH NONE")
	for _, z := range rep.Zones {
		name := z.Zone
		if name == "" {
			name = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", name, strings.Join(z.Nodes, ","), z.FilesLeftWithOneCopy, z.FilesLeftWithNoCopy)
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

// printScrub shows each node's scrub pass: its progress in copies and bytes,
// the last full pass and the corrupt copies found this period and ever.
func printScrub(w io.Writer, rep client.ScrubReport) {
	if len(rep.Nodes) == 0 {
		return
	}
	fmt.Fprintln(w, "\nscrub passes:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPASS\tCOPIES\tBYTES\tLAST FULL PASS\tCORRUPT (PERIOD/EVER)")
	// An error can be a long line; in the table it would widen the PASS
	// column of every row, so each gets a line of its own below.
	var errors []string
	for _, n := range rep.Nodes {
		if !n.Reachable {
			fmt.Fprintf(tw, "%s\tunreachable\t-\t-\t-\t-\n", n.NodeID)
			if n.Error != "" {
				errors = append(errors, fmt.Sprintf("%s: %s", n.NodeID, clip(n.Error, maxErrorWidth)))
			}
			continue
		}
		last := "never"
		if n.LastFullPassAt != nil {
			last = n.LastFullPassAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s/%s\t%s\t%d/%d\n", n.NodeID, passState(n),
			n.CopiesScrubbed, n.CopiesTotal, humanBytes(n.BytesScrubbed), humanBytes(n.BytesTotal),
			last, n.CorruptionsFound, n.CorruptionsFoundTotal)
	}
	tw.Flush()
	for _, e := range errors {
		fmt.Fprintf(w, "  %s\n", e)
	}
}

// maxErrorWidth bounds a node's error under the scrub table, in runes.
const maxErrorWidth = 160

// clip is s on one line (each run of white space one space) and at most
// width runes: a longer one keeps its start, which says what was asked,
// and its end, where a Go error chain puts the cause, with " … " between.
func clip(s string, width int) string {
	r := []rune(strings.Join(strings.Fields(s), " "))
	if len(r) <= width {
		return string(r)
	}
	gap := []rune(" … ")
	head := (width - len(gap)) / 3
	tail := width - len(gap) - head
	return string(r[:head]) + string(gap) + string(r[len(r)-tail:])
}

// passState is a node's pass in a word or two: "running 25%", "done", or
// "not started" in the seconds before a node's scrubber begins.
func passState(n client.NodeScrub) string {
	switch {
	case n.PeriodStart == nil:
		return "not started"
	case !n.Running:
		return "done"
	}
	pct := 100.0
	if n.CopiesTotal > 0 {
		pct = 100 * float64(min(n.CopiesScrubbed, n.CopiesTotal)) / float64(n.CopiesTotal)
	}
	s := fmt.Sprintf("running %.0f%%", pct)
	if n.Behind {
		s += " (behind)"
	}
	return s
}
