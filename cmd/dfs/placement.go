package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dfs-project/dfs/internal/client"
)

const setPlacementHelp = `usage: dfs nodes set [flags] NODE [zone=<z>] [weight=<w>]
       dfs nodes set [flags] NODE -reset zone,weight

Sets an operator's zone and weight for the storage node NODE. They win over
what the node reports (STORAGE_ZONE, STORAGE_WEIGHT), through its
re-registrations and restarts, until reset.

  zone=<z>     the node's zone: up to 255 bytes without spaces, compared
               exactly; zone= (empty) is no zone, a zone of its own
  weight=<w>   the node's weight: a decimal > 0 and at most 1000; the node
               gets weight × VIRTUAL_NODES ring points (at least 1)
  -reset L     drop the overrides L names (zone, weight or zone,weight):
               the node's own values count again

Give one or both of zone= and weight=, or -reset, or a value and the reset
of the other. A changed zone or weight of a node on the ring is a membership
change: the coordinator rebuilds the ring and moves only the copies whose
preference lists changed. Setting what is already in force changes nothing.
Prints the node's zone and weight now, each with what the node reports, and
its points and keyspace share.
`

func runSetPlacement(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("nodes set", setPlacementHelp, s)
	reset := cc.fs.String("reset", "", "drop the overrides in the `list` (zone, weight or zone,weight): the node's own values count again")
	pos, code, done := cc.parse(args, 0, -1)
	if done {
		return code
	}
	if len(pos) == 0 || strings.Contains(pos[0], "=") {
		return cc.usageError("missing NODE: dfs nodes set NODE [zone=<z>] [weight=<w>] [-reset zone,weight]")
	}
	id := pos[0]
	req, err := placementRequest(pos[1:], *reset)
	if err != nil {
		return cc.usageError("%v", err)
	}
	if req.Zone == nil && req.Weight == nil && req.Reset == nil {
		return cc.usageError("nothing to change: give zone=<z>, weight=<w> or -reset zone,weight")
	}
	if err := client.CheckPlacement(req); err != nil {
		return cc.usageError("%v", err)
	}
	n, err := cc.c.SetPlacement(ctx, id, req)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(n)
	} else {
		printPlacement(cc.s.out, n)
	}
	return exitOK
}

// placementRequest reads the zone=<z> and weight=<w> settings of dfs nodes
// set and its -reset list; client.CheckPlacement judges the values.
func placementRequest(settings []string, reset string) (client.PlacementRequest, error) {
	var req client.PlacementRequest
	for _, a := range settings {
		key, value, ok := strings.Cut(a, "=")
		switch key = strings.ToLower(key); {
		case !ok || (key != "zone" && key != "weight"):
			return req, fmt.Errorf("unknown setting %q: want zone=<z> or weight=<w>", a)
		case key == "zone" && req.Zone != nil, key == "weight" && req.Weight != nil:
			return req, fmt.Errorf("%s given twice", key)
		case key == "zone":
			req.Zone = &value
		default:
			w, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return req, fmt.Errorf("weight %q: must be a decimal > 0 and at most %d", value, client.MaxWeight)
			}
			req.Weight = &w
		}
	}
	if reset != "" {
		for _, f := range strings.Split(reset, ",") {
			req.Reset = append(req.Reset, strings.ToLower(strings.TrimSpace(f)))
		}
	}
	return req, nil
}

// printPlacement shows a node's zone and weight in force, each with what the
// node itself reports when an operator's override wins over it.
func printPlacement(w io.Writer, n client.Node) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "node\t%s, %s\n", n.NodeID, n.Status)
	zone := zoneName(n.Zone)
	if slices.Contains(n.Overridden, "zone") {
		zone += " (set by an operator; the node reports " + zoneName(n.ReportedZone) + ")"
	} else {
		zone += " (the node's own)"
	}
	weight := weightText(n.Weight)
	if slices.Contains(n.Overridden, "weight") {
		weight += " (set by an operator; the node reports " + weightText(n.ReportedWeight) + ")"
	} else {
		weight += " (the node's own)"
	}
	fmt.Fprintf(tw, "zone\t%s\n", zone)
	fmt.Fprintf(tw, "weight\t%s\n", weight)
	if n.OnRing {
		fmt.Fprintf(tw, "ring\t%d points, %.2f %% of the keyspace\n", n.Points, n.KeyspaceSharePercent)
	} else {
		fmt.Fprintf(tw, "ring\toff the ring: the zone and weight count once it joins\n")
	}
	tw.Flush()
}

// zoneName shows a zone in a sentence.
func zoneName(z string) string {
	if z == "" {
		return "no zone"
	}
	return z
}

const nodesRingHelp = `usage: dfs nodes ring [flags]

Shows the coordinator's ring: for each node on it (largest share first) its
zone, weight, ring points and share of the keyspace, then each zone's share
and number of nodes. A node of no zone (zone -) is a zone of its own and is
not in the zone table. Shares measure where keys fall (the primaries), not
the bytes a node holds. -json prints the API's answer (GET /api/nodes/ring).
`

func runNodesRing(ctx context.Context, args []string, s stdio) int {
	cc := newClientCmd("nodes ring", nodesRingHelp, s)
	if _, code, done := cc.parse(args, 0, 0); done {
		return code
	}
	ring, err := cc.c.Ring(ctx)
	if err != nil {
		return cc.fail(err)
	}
	if cc.json {
		cc.printJSON(ring)
		return exitOK
	}
	printRing(cc.s.out, ring)
	return exitOK
}

func printRing(w io.Writer, ring client.RingInfo) {
	fmt.Fprintf(w, "the ring has %d nodes × %d virtual nodes per unit of weight, %d points\n",
		ring.PhysicalNodes, ring.VirtualNodesPerNode, ring.TotalRingPositions)
	if len(ring.Nodes) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tZONE\tWEIGHT\tPOINTS\tSHARE")
	var zoneless []string
	for _, n := range ring.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f %%\n", n.NodeID, zoneText(n.Zone), weightText(n.Weight), n.Points, n.KeyspaceSharePercent)
		if n.Zone == "" {
			zoneless = append(zoneless, n.NodeID)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(ring.Zones) == 0 {
		fmt.Fprintln(w, "no node has a zone: each node is a zone of its own")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ZONE\tNODES\tSHARE")
	for _, z := range ring.Zones {
		fmt.Fprintf(tw, "%s\t%d\t%.2f %%\n", z.Zone, z.Nodes, z.KeyspaceSharePercent)
	}
	tw.Flush()
	if len(zoneless) > 0 {
		fmt.Fprintf(w, "of no zone, each a zone of its own: %s\n", strings.Join(zoneless, ", "))
	}
}
