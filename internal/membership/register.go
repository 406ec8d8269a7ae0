package membership

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// nodeIDPattern is what a node id may look like: it appears in URLs, log
// lines and ring point names ("id#i"), so it stays plain. A disk identity
// (a UUID from today's nodes) is held to the same rule, with room for 64
// characters.
var (
	nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	diskIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// maxHostLen is the longest DNS name.
const maxHostLen = 253

// Announcement is what a node says about itself when it registers.
type Announcement struct {
	NodeID string
	Host   string
	Port   int
	// DiskID is the identity of the node's data directory; empty from a
	// node older than identities, which leaves the stored one alone.
	DiskID string
	// Zone and Weight are the node's failure domain and relative size
	// (STORAGE_ZONE, STORAGE_WEIGHT): "" is no zone, 0 is weight 1. A node
	// older than zones reports neither, which reads as exactly that.
	Zone   string
	Weight float64
}

// Validate checks an announcement's fields and returns an errs.Invalid error
// naming the first bad one.
func (a Announcement) Validate() error {
	if !nodeIDPattern.MatchString(a.NodeID) {
		return errs.E(errs.Invalid, "invalid node id %q: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", a.NodeID)
	}
	if a.Host == "" {
		return errs.E(errs.Invalid, "host is required")
	}
	if len(a.Host) > maxHostLen {
		return errs.E(errs.Invalid, "host is longer than %d characters", maxHostLen)
	}
	if i := strings.IndexFunc(a.Host, badHostRune); i >= 0 {
		return errs.E(errs.Invalid, "invalid host %q: a bare host name or IP address has no spaces, slashes, brackets or %q", a.Host, a.Host[i])
	}
	if a.Port < 1 || a.Port > 65535 {
		return errs.E(errs.Invalid, "invalid port %d: must be between 1 and 65535", a.Port)
	}
	if a.DiskID != "" && !diskIDPattern.MatchString(a.DiskID) {
		return errs.E(errs.Invalid, "invalid disk id %q: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", a.DiskID)
	}
	if err := ValidZone(a.Zone); err != nil {
		return err
	}
	if a.Weight != 0 {
		return ValidWeight(a.Weight)
	}
	return nil
}

// MaxWeight bounds a node's weight, so that its points stay countable: a
// weight of 1000 is 100,000 points at the default VIRTUAL_NODES.
const MaxWeight = 1000

// ValidZone checks a zone name: "" (none), or up to 255 bytes of printable
// text without spaces, which appears in log lines, metrics labels and the
// `dfs ring` syntax.
func ValidZone(z string) error {
	if len(z) > 255 {
		return errs.E(errs.Invalid, "invalid zone: longer than 255 bytes")
	}
	if i := strings.IndexFunc(z, func(c rune) bool { return unicode.IsSpace(c) || !unicode.IsPrint(c) }); i >= 0 {
		return errs.E(errs.Invalid, "invalid zone %q: no spaces or control characters", z)
	}
	return nil
}

// ValidWeight checks a weight: a decimal > 0 and at most MaxWeight.
func ValidWeight(w float64) error {
	if !(w > 0) || w > MaxWeight {
		return errs.E(errs.Invalid, "invalid weight %v: must be a decimal > 0 and at most %d", w, MaxWeight)
	}
	return nil
}

// badHostRune rejects what would change the meaning of "http://host:port/…":
// a host is a name or an IP address, never a URL fragment. IPv6 addresses
// are given bare; the base URL adds the brackets.
func badHostRune(c rune) bool {
	return unicode.IsSpace(c) || unicode.IsControl(c) || strings.ContainsRune(`/\@?#[]`, c)
}

// Register records a node's announcement, an idempotent upsert that nodes
// repeat as a heartbeat:
//   - an unknown id is created UNHEALTHY, off the ring, with the disk
//     identity it reports; it joins after SuccessThreshold consecutive good
//     probes, the first of which Run makes at once;
//   - the same id at the same address with the same (or no) disk identity
//     changes nothing;
//   - a different address for a HEALTHY node's id is a Conflict;
//   - an UNHEALTHY node's id may be reclaimed at a new address (its counters
//     start over);
//   - another disk identity than the stored one is recorded, with a
//     DiskReplaced event; a node with none stored adopts the one it reports;
//   - a DEREGISTERED node stays deregistered: it is returned unchanged,
//     whatever it reports, and only Rejoin re-admits it.
func (r *Registry) Register(ctx context.Context, a Announcement) (meta.Node, error) {
	if err := a.Validate(); err != nil {
		return meta.Node{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		n, err := r.store.GetNode(ctx, a.NodeID)
		if errs.Is(err, errs.NotFound) {
			n, err = r.create(ctx, a)
			if errs.Is(err, errs.Conflict) {
				continue // another coordinator created it first: treat as an existing node
			}
			return n, err
		}
		if err != nil {
			return meta.Node{}, err
		}
		return r.reannounce(ctx, n, a)
	}
}

// create records a new node. It is not on the ring, so no rebalance follows
// and the membership epoch is left alone.
func (r *Registry) create(ctx context.Context, a Announcement) (meta.Node, error) {
	n := meta.Node{ID: a.NodeID, Host: a.Host, Port: a.Port, Status: meta.NodeUnhealthy, RegisteredAt: r.now(), DiskID: a.DiskID,
		Zone: a.Zone, Weight: a.Weight}
	if err := r.store.CreateNode(ctx, &n); err != nil {
		return meta.Node{}, err
	}
	r.setAddr(n)
	r.log.Info(fmt.Sprintf("node %s registered at %s, joins the ring after %d successful probe(s)", n.ID, address(n.Host, n.Port), r.okThresh),
		"node", n.ID, "address", address(n.Host, n.Port), "disk_id", n.DiskID, "zone", n.PlacementZone(), "weight", n.PlacementWeight())
	r.probeSoon(n.ID)
	return n, nil
}

// reannounce handles the announcement of a node the store already knows.
// Callers hold mu.
func (r *Registry) reannounce(ctx context.Context, n meta.Node, a Announcement) (meta.Node, error) {
	if n.Status == meta.NodeDeregistered {
		if !r.ignored[n.ID] {
			r.ignored[n.ID] = true
			r.log.Info(fmt.Sprintf("ignoring the registration of deregistered node %s; POST /api/nodes/%s/rejoin re-admits it", n.ID, n.ID),
				"node", n.ID, "address", address(a.Host, a.Port))
		}
		return n, nil
	}
	if n.Host == a.Host && n.Port == a.Port && compareDisk(n.DiskID, a.DiskID) == sameDisk && n.Zone == a.Zone && n.Weight == a.Weight {
		return n, nil // a heartbeat
	}
	old := address(n.Host, n.Port)
	var moved, reshaped bool
	var disk diskChange
	var previous string
	var before meta.Node
	n, changed, epoch, err := r.update(ctx, n.ID, func(n *meta.Node) (edit, error) {
		moved, reshaped, disk, previous, before = false, false, compareDisk(n.DiskID, a.DiskID), n.DiskID, *n
		if n.Status == meta.NodeDeregistered {
			return keep, nil
		}
		reported := n.Zone != a.Zone || n.Weight != a.Weight
		n.Zone, n.Weight = a.Zone, a.Weight
		reshaped = n.OnRing() && placementChanged(before, *n)
		if n.Host != a.Host || n.Port != a.Port {
			if n.Status == meta.NodeHealthy {
				return keep, errs.E(errs.Conflict, "%s is registered at %s and healthy", n.ID, address(n.Host, n.Port))
			}
			n.Host, n.Port = a.Host, a.Port
			n.ConsecutiveFailures, n.ConsecutiveSuccesses = 0, 0
			moved = true
		}
		switch disk {
		case newDisk:
			n.DiskID = a.DiskID
			return writeLostDisk, nil
		case firstDisk:
			n.DiskID = a.DiskID
		}
		switch {
		case reshaped:
			return writeRebalance, nil
		case moved || reported || disk == firstDisk:
			return write, nil
		}
		return keep, nil
	})
	if err != nil {
		return meta.Node{}, err
	}
	if !changed {
		return n, nil
	}
	r.setAddr(n)
	if moved {
		r.log.Info(fmt.Sprintf("node %s re-registered at %s (was %s), joins the ring after %d successful probe(s)", n.ID, address(a.Host, a.Port), old, r.okThresh),
			"node", n.ID, "address", address(a.Host, a.Port), "previous", old)
		r.probeSoon(n.ID)
	}
	switch disk {
	case firstDisk:
		r.log.Info(fmt.Sprintf("node %s reports disk identity %s", n.ID, n.DiskID), "node", n.ID, "disk_id", n.DiskID)
	case newDisk:
		r.diskReplaced(n, previous, epoch)
		return n, nil
	}
	if reshaped {
		r.reshaped(n, before, "the node reports", epoch)
	}
	return n, nil
}

// placementChanged reports whether the zone or weight placement uses differs
// between two versions of a node.
func placementChanged(a, b meta.Node) bool {
	return a.PlacementZone() != b.PlacementZone() || a.PlacementWeight() != b.PlacementWeight()
}

// reshaped publishes the ring of a node on it whose zone or weight changed
// and reports it. Callers hold mu.
func (r *Registry) reshaped(n, before meta.Node, by string, epoch int64) {
	rg := r.publish(n)
	r.log.Info(fmt.Sprintf("node %s now in zone %q with weight %v (%s; was zone %q, weight %v): keys move to follow",
		n.ID, n.PlacementZone(), n.PlacementWeight(), by, before.PlacementZone(), before.PlacementWeight()),
		"node", n.ID, "zone", n.PlacementZone(), "weight", n.PlacementWeight(), "points", rg.PointsOf(n.ID))
	r.emit(PlacementChanged, n, rg, epoch)
}

// PlacementEdit is an operator's change of a node's zone and weight. Zone
// and Weight, when set, become overrides that win over what the node
// reports (Zone "" meaning no zone); ResetZone and ResetWeight drop the
// override and return to what the node reports.
type PlacementEdit struct {
	Zone                   *string
	Weight                 *float64
	ResetZone, ResetWeight bool
}

// SetPlacement applies an operator's PlacementEdit to a node. A change of
// the zone or weight of a node on the ring is a membership change: the ring
// is re-published and a PlacementChanged event starts the rebalance that
// moves only what must move. Setting what is already set changes nothing.
func (r *Registry) SetPlacement(ctx context.Context, id string, e PlacementEdit) (meta.Node, error) {
	if e.Zone != nil {
		if err := ValidZone(*e.Zone); err != nil {
			return meta.Node{}, err
		}
	}
	if e.Weight != nil {
		if err := ValidWeight(*e.Weight); err != nil {
			return meta.Node{}, err
		}
	}
	if (e.Zone != nil && e.ResetZone) || (e.Weight != nil && e.ResetWeight) {
		return meta.Node{}, errs.E(errs.Invalid, "set or reset a zone or weight, not both")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var before meta.Node
	var reshaped bool
	n, changed, epoch, err := r.update(ctx, id, func(n *meta.Node) (edit, error) {
		before = *n
		switch {
		case e.Zone != nil:
			z := *e.Zone
			n.ZoneOverride = &z
		case e.ResetZone:
			n.ZoneOverride = nil
		}
		switch {
		case e.Weight != nil:
			w := *e.Weight
			n.WeightOverride = &w
		case e.ResetWeight:
			n.WeightOverride = nil
		}
		if samePtr(before.ZoneOverride, n.ZoneOverride) && samePtr(before.WeightOverride, n.WeightOverride) {
			return keep, nil
		}
		if reshaped = n.OnRing() && placementChanged(before, *n); reshaped {
			return writeRebalance, nil
		}
		return write, nil
	})
	if err != nil {
		return meta.Node{}, notFound(id, err)
	}
	if !changed {
		return n, nil
	}
	if reshaped {
		r.reshaped(n, before, "an operator set it", epoch)
	} else {
		r.setAddr(n)
		r.log.Info(fmt.Sprintf("node %s: zone %q, weight %v from now on (an operator set it)", n.ID, n.PlacementZone(), n.PlacementWeight()),
			"node", n.ID, "zone", n.PlacementZone(), "weight", n.PlacementWeight())
	}
	return n, nil
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// Deregister takes a node off the ring at once and marks it DEREGISTERED,
// which its own heartbeats cannot undo; only Rejoin re-admits it. Its copies
// stay readable: BaseURL keeps answering for it. Deregistering a
// deregistered node changes nothing and emits no second event.
func (r *Registry) Deregister(ctx context.Context, id string) (meta.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, changed, epoch, err := r.update(ctx, id, func(n *meta.Node) (edit, error) {
		if n.Status == meta.NodeDeregistered {
			return keep, nil
		}
		n.Status = meta.NodeDeregistered
		n.ConsecutiveFailures, n.ConsecutiveSuccesses = 0, 0
		return writeRebalance, nil
	})
	if err != nil {
		return meta.Node{}, notFound(id, err)
	}
	if !changed {
		return n, nil
	}
	rg := r.publish(n)
	r.log.Info(fmt.Sprintf("node %s deregistered, off the ring, %d node(s) remain", id, len(rg.Nodes())), "node", id)
	r.emit(Deregistered, n, rg, epoch)
	return n, nil
}

// Rejoin re-admits a deregistered node. It becomes UNHEALTHY with its
// counters and LastHealthyAt cleared, so it re-enters the ring like a new
// node: after SuccessThreshold good probes, with a Joined event. A node that
// is not deregistered is a Conflict.
func (r *Registry) Rejoin(ctx context.Context, id string) (meta.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Not on the ring yet: no rebalance follows until it joins, which bumps
	// the epoch then.
	n, _, _, err := r.update(ctx, id, func(n *meta.Node) (edit, error) {
		if n.Status != meta.NodeDeregistered {
			return keep, errs.E(errs.Conflict, "node %s is %s, not deregistered; only a deregistered node can rejoin", id, n.Status)
		}
		n.Status = meta.NodeUnhealthy
		n.ConsecutiveFailures, n.ConsecutiveSuccesses = 0, 0
		n.LastHealthyAt = nil
		return write, nil
	})
	if err != nil {
		return meta.Node{}, notFound(id, err)
	}
	delete(r.ignored, id)
	rg := r.publish(n)
	r.log.Info(fmt.Sprintf("node %s re-admitted, joins the ring after %d successful probe(s)", id, r.okThresh), "node", id)
	r.emit(Rejoined, n, rg, 0)
	r.probeSoon(id)
	return n, nil
}

// probeSoon asks Run to probe id without waiting for the next sweep.
func (r *Registry) probeSoon(id string) {
	select {
	case r.kick <- id:
	default:
	}
}
