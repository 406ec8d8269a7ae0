package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/dfs-project/dfs/internal/client"
)

const nodesHelp = `usage: dfs nodes [flags]
       dfs nodes set [flags] NODE [zone=<z>] [weight=<w>] [-reset zone,weight]
       dfs nodes ring [flags]
       dfs nodes drain [flags] ID
       dfs nodes rejoin [flags] ID

Lists every known storage node: its state, whether it is on the ring, the
zone and weight placement uses and its ring points, its share of the
keyspace, its blobs and space, its address and when it was last probed. A
zone of - is none: the node is a zone of its own. A zone or weight marked *
is an operator's override, not what the node reports:
` + "`dfs nodes set NODE zone=<z> weight=<w>`" + ` sets one,
` + "`dfs nodes set NODE -reset zone,weight`" + ` drops it.

  set      set or reset an operator's zone and weight for a node
  ring     the ring: each node's zone, weight, points and share, each zone's share
  drain    take a node off the ring for good and move its copies elsewhere
  rejoin   re-admit a drained node

` + "`dfs nodes set -h`" + `, ` + "`dfs nodes ring -h`" + `, ` + "`dfs nodes drain -h`" + ` and ` + "`dfs nodes rejoin -h`" + ` describe them.
`

// nodeSubcommands are the subcommands of `dfs nodes`; without one it lists.
var nodeSubcommands = map[string]func(context.Context, []string, stdio) int{
	"set":    runSetPlacement,
	"ring":   runNodesRing,
	"drain":  runDrain,
	"rejoin": runRejoin,
}

// nodeSubcommandArgs are the arguments of each subcommand, for a usage line.
var nodeSubcommandArgs = map[string]string{
	"set":    " NODE [zone=<z>] [weight=<w>]",
	"drain":  " ID",
	"rejoin": " ID",
}

func runNodes(ctx context.Context, args []string, s stdio) int {
	if len(args) > 0 {
		if sub, ok := nodeSubcommands[args[0]]; ok {
			return sub(ctx, args[1:], s)
		}
	}
	cc := newClientCmd("nodes", nodesHelp, s)
	pos, code, done := cc.parse(args, 0, -1)
	if done {
		return code
	}
	if len(pos) > 0 {
		if _, ok := nodeSubcommands[pos[0]]; ok {
			return cc.usageError("the subcommand comes first, flags after it: dfs nodes %s [flags]%s", pos[0], nodeSubcommandArgs[pos[0]])
		}
		return cc.usageError("unknown subcommand %q (set, ring, drain or rejoin)", pos[0])
	}
	nodes, err := cc.c.Nodes(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(nodes)
		return exitOK
	}
	ring, err := cc.c.Ring(ctx)
	if err != nil {
		return cc.fail(err)
	}
	fmt.Fprintf(cc.s.out, "%d nodes known; the ring has %d nodes × %d virtual nodes per unit of weight, %d points\n",
		len(nodes), ring.PhysicalNodes, ring.VirtualNodesPerNode, ring.TotalRingPositions)
	if len(nodes) == 0 {
		return exitOK
	}
	tw := tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATUS\tON RING\tZONE\tWEIGHT\tPOINTS\tSHARE\tBLOBS\tSTORED\tFREE\tADDRESS\tLAST CHECK\tFAILURES")
	now := time.Now()
	overridden := false
	for _, n := range nodes {
		onRing, points, share := "no", "-", "-"
		if n.OnRing {
			onRing, points, share = "yes", fmt.Sprint(n.Points), fmt.Sprintf("%.2f %%", n.KeyspaceSharePercent)
		}
		blobs, stored, free := "-", "-", "-"
		if n.BlobCount != nil && n.BytesUsed != nil && n.FreeBytes != nil {
			blobs, stored, free = fmt.Sprint(*n.BlobCount), humanBytes(*n.BytesUsed), humanBytes(*n.FreeBytes)
		}
		zone, weight := zoneText(n.Zone), weightText(n.Weight)
		if slices.Contains(n.Overridden, "zone") {
			zone, overridden = zone+overrideMark, true
		}
		if slices.Contains(n.Overridden, "weight") {
			weight, overridden = weight+overrideMark, true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s:%d\t%s\t%d\n", n.NodeID, n.Status, onRing,
			zone, weight, points, share, blobs, stored, free, n.Host, n.Port, ago(now, n.LastCheckAt), n.ConsecutiveFailures)
	}
	tw.Flush()
	if overridden {
		fmt.Fprintln(cc.s.out, overrideLegend)
	}
	return exitOK
}

// overrideMark follows a zone or weight an operator set; overrideLegend
// explains it under a listing that shows one.
const (
	overrideMark   = "*"
	overrideLegend = "* set by an operator (`dfs nodes set`), not what the node reports; `dfs nodes set NODE -reset zone,weight` drops it"
)

// zoneText shows a zone, "-" for none.
func zoneText(z string) string {
	if z == "" {
		return "-"
	}
	return z
}

// weightText shows a weight as the decimal it was given, "-" when the
// coordinator did not say (one from before weights).
func weightText(w float64) string {
	if w == 0 {
		return "-"
	}
	return strconv.FormatFloat(w, 'f', -1, 64)
}

// ago says how long before now t was, to the second.
func ago(now time.Time, t *time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := now.Sub(*t).Round(time.Second)
	if d < time.Second {
		return "just now"
	}
	return d.String() + " ago"
}

const drainHelp = `usage: dfs nodes drain [flags] ID

Deregisters the storage node ID and drains it: it leaves the ring at once
and stays DEREGISTERED until ` + "`dfs nodes rejoin`" + `. Its copies keep serving
reads until each of its files has its copies on the nodes the ring now
names; then they are removed. Draining a drained node again only shows the
progress.

Without -wait the drain goes on in the background and the progress so far
is printed. With -wait the coordinator runs it before answering, bounded by
its DRAIN_TIMEOUT, and prints the report of the last round; the exit
status is then 1 when files remain on the node.

The coordinator refuses a drain that is not safe (409 UNSAFE_DRAIN): fewer
nodes than the replication factor would remain, a receiving node lacks the
free space, or a file's only healthy copy is on the node and no node can
take it. -dry-run shows what the drain would copy to which nodes and
whether it is safe, changing nothing (exit status 1 when it is not safe);
-force drains anyway.
`

func runDrain(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("nodes drain", drainHelp, s)
	wait := cc.fs.Bool("wait", false, "wait for the drain to finish (bounded by the coordinator's DRAIN_TIMEOUT)")
	dryRun := cc.fs.Bool("dry-run", false, "only show what the drain would move and whether it is safe")
	force := cc.fs.Bool("force", false, "drain even when the coordinator finds it unsafe")
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	if *dryRun {
		return planDrain(ctx, cc, pos[0])
	}
	res, err := cc.c.DeregisterWith(ctx, pos[0], client.DrainOptions{Wait: *wait, Force: *force})
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(res)
	} else {
		printDrain(cc.s.out, res)
	}
	if *wait && !res.Drain.Complete {
		fmt.Fprintf(cc.s.err, "dfs nodes drain: %s still holds %d files after the coordinator's DRAIN_TIMEOUT\n  the drain goes on in the background; `dfs nodes drain %s` shows its progress\n",
			pos[0], res.Drain.FilesRemaining, pos[0])
		return exitFailed
	}
	return exitOK
}

func planDrain(ctx context.Context, cc *clientCmd, id string) int {
	p, err := cc.c.PlanDrain(ctx, id)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(p)
	} else {
		printPlan(cc.s.out, p)
	}
	if !p.Safe {
		fmt.Fprintf(cc.s.err, "dfs nodes drain: draining %s is not safe; `dfs nodes drain -force %s` drains it anyway\n", id, id)
		return exitFailed
	}
	return exitOK
}

func printPlan(w io.Writer, p client.DrainPlan) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	verdict := "safe"
	if !p.Safe {
		verdict = "NOT safe"
	}
	fmt.Fprintf(tw, "drain of\t%s: %s (dry run, nothing changed)\n", p.Node, verdict)
	for _, r := range p.Reasons {
		fmt.Fprintf(tw, "reason\t%s\n", r)
	}
	fmt.Fprintf(tw, "on the node\t%d files, %s\n", p.FilesOnNode, humanBytes(p.BytesOnNode))
	fmt.Fprintf(tw, "to copy\t%d files, %s\n", p.Files, humanBytes(p.Bytes))
	fmt.Fprintf(tw, "ring after\t%d nodes at replication factor %d\n", p.RemainingNodes, p.ReplicationFactor)
	if p.PendingUploads > 0 {
		fmt.Fprintf(tw, "uploads in flight\t%d (they do not hold a drain up)\n", p.PendingUploads)
	}
	tw.Flush()
	if len(p.Targets) > 0 {
		fmt.Fprintln(w, "\nreceiving nodes:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tFILES\tBYTES\tFREE")
		for _, t := range p.Targets {
			free := "unknown"
			if t.FreeBytes != nil {
				free = humanBytes(*t.FreeBytes)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.NodeID, t.Files, humanBytes(t.Bytes), free)
		}
		tw.Flush()
	}
}

func printDrain(w io.Writer, res client.DeregisterResult) {
	d := res.Drain
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	ring := "still on the ring"
	if !res.Node.OnRing {
		ring = "off the ring"
	}
	fmt.Fprintf(tw, "node\t%s, %s, %s\n", res.Node.NodeID, res.Node.Status, ring)
	if d.Complete {
		fmt.Fprintf(tw, "drain\tcomplete: the node holds no file\n")
	} else {
		fmt.Fprintf(tw, "drain\tin progress: %d files still to move\n", d.FilesRemaining)
	}
	if p := d.Progress; p != nil {
		eta := "no estimate yet"
		if p.EtaSeconds != nil {
			eta = "about " + (time.Duration(*p.EtaSeconds * float64(time.Second))).Round(time.Second).String() + " left"
		}
		fmt.Fprintf(tw, "this round\t%d of %d files, %s copied at %s/s, %s\n", p.FilesDone, p.FilesTotal,
			humanBytes(p.BytesCopied), humanBytes(int64(p.BytesPerSecond)), eta)
	}
	if d.PendingUploads > 0 {
		fmt.Fprintf(tw, "uploads in flight\t%d (they do not hold the drain up)\n", d.PendingUploads)
	}
	tw.Flush()
	if d.Run != nil {
		fmt.Fprintln(w, "\nlast round:")
		printRebalanceReport(w, *d.Run)
	}
}

const rejoinHelp = `usage: dfs nodes rejoin [flags] ID

Re-admits the drained (DEREGISTERED) storage node ID. It becomes UNHEALTHY
and re-enters the ring after the coordinator's HEALTH_SUCCESS_THRESHOLD
good health checks in a row; ` + "`dfs nodes`" + ` shows when. Rejoining a node that
is not drained fails (409 CONFLICT).
`

func runRejoin(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("nodes rejoin", rejoinHelp, s)
	pos, code, done := cc.parse(args, 1, 1)
	if done {
		return code
	}
	n, err := cc.c.Rejoin(ctx, pos[0])
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(n)
		return exitOK
	}
	fmt.Fprintf(cc.s.out, "%s is %s; it joins the ring after enough good health checks (`dfs nodes` shows when)\n", n.NodeID, n.Status)
	return exitOK
}

const healthHelp = `usage: dfs health [flags]

Shows the cluster's health: UP, DEGRADED (a node is down, fewer nodes than
the replication factor, or Redis unreachable) or DOWN (no node on the ring,
or the metadata store down), with the reasons. The exit status is 0 only
when the cluster is UP, so that a script can wait for it:
  until dfs health >/dev/null; do sleep 1; done
`

func runHealth(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("health", healthHelp, s)
	if _, code, done := cc.parse(args, 0, 0); done {
		return code
	}
	h, err := cc.c.Health(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(h)
	} else {
		tw := tabwriter.NewWriter(cc.s.out, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "cluster\t%s\n", h.Status)
		for _, r := range h.Reasons {
			fmt.Fprintf(tw, "reason\t%s\n", r)
		}
		fmt.Fprintf(tw, "nodes\t%d known: %d on the ring, %d healthy, %d unhealthy, %d deregistered\n",
			h.Nodes.Total, h.Nodes.OnRing, h.Nodes.Healthy, h.Nodes.Unhealthy, h.Nodes.Deregistered)
		fmt.Fprintf(tw, "replication\t%d copies per file\n", h.ReplicationFactor)
		fmt.Fprintf(tw, "metadata store\t%s\n", component(h.MetadataStore))
		fmt.Fprintf(tw, "redis\t%s\n", component(h.Redis))
		tw.Flush()
	}
	if h.Status != client.HealthUp {
		return exitFailed
	}
	return exitOK
}

func component(c client.ComponentState) string {
	s := c.Status
	if c.Kind != "" {
		s += " (" + c.Kind + ")"
	}
	if c.Error != "" {
		s += ": " + c.Error
	}
	return s
}

const rebalanceHelp = `usage: dfs rebalance [flags]

Reconciles every file's copies with the ring now and prints the report. The
exit status is 1 when any file could not be reconciled.
`

func runRebalance(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("rebalance", rebalanceHelp, s)
	if _, code, done := cc.parse(args, 0, 0); done {
		return code
	}
	rep, err := cc.c.Rebalance(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(rep)
	} else {
		printRebalanceReport(cc.s.out, rep)
	}
	if rep.Failures > 0 || len(rep.UnrecoverableFiles) > 0 {
		fmt.Fprintf(cc.s.err, "dfs rebalance: %d failures, %d unrecoverable files\n  `dfs nodes` shows which nodes are down; the repair loop retries\n",
			rep.Failures, len(rep.UnrecoverableFiles))
		return exitFailed
	}
	return exitOK
}

func printRebalanceReport(w io.Writer, rep client.RebalanceReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "trigger\t%s\n", rep.Trigger)
	if rep.Skipped {
		fmt.Fprintf(tw, "skipped\tanother coordinator was running the same rebalance\n")
	}
	fmt.Fprintf(tw, "files scanned\t%d\n", rep.FilesScanned)
	fmt.Fprintf(tw, "files affected\t%d\n", rep.FilesAffected)
	fmt.Fprintf(tw, "copies created\t%d\n", rep.CopiesCreated)
	fmt.Fprintf(tw, "copies removed\t%d\n", rep.CopiesRemoved)
	fmt.Fprintf(tw, "primaries promoted\t%d\n", rep.PrimariesPromoted)
	fmt.Fprintf(tw, "failures\t%d\n", rep.Failures)
	fmt.Fprintf(tw, "unrecoverable files\t%s\n", orNone(rep.UnrecoverableFiles))
	fmt.Fprintf(tw, "took\t%s\n", time.Duration(rep.DurationMs)*time.Millisecond)
	tw.Flush()
}
