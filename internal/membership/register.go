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
// lines and ring point names ("id#i"), so it stays plain.
var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// maxHostLen is the longest DNS name.
const maxHostLen = 253

// Validate checks a registration's fields and returns an errs.Invalid error
// naming the first bad one.
func Validate(nodeID, host string, port int) error {
	if !nodeIDPattern.MatchString(nodeID) {
		return errs.E(errs.Invalid, "invalid node id %q: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", nodeID)
	}
	if host == "" {
		return errs.E(errs.Invalid, "host is required")
	}
	if len(host) > maxHostLen {
		return errs.E(errs.Invalid, "host is longer than %d characters", maxHostLen)
	}
	if i := strings.IndexFunc(host, badHostRune); i >= 0 {
		return errs.E(errs.Invalid, "invalid host %q: a bare host name or IP address has no spaces, slashes, brackets or %q", host, host[i])
	}
	if port < 1 || port > 65535 {
		return errs.E(errs.Invalid, "invalid port %d: must be between 1 and 65535", port)
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
//   - an unknown id is created UNHEALTHY, off the ring; it joins after
//     SuccessThreshold consecutive good probes, the first of which Run makes
//     at once;
//   - the same id at the same address changes nothing;
//   - a different address for a HEALTHY node's id is a Conflict;
//   - an UNHEALTHY node's id may be reclaimed at a new address (its counters
//     start over);
//   - a DEREGISTERED node stays deregistered: it is returned unchanged and
//     only Rejoin re-admits it.
func (r *Registry) Register(ctx context.Context, nodeID, host string, port int) (meta.Node, error) {
	if err := Validate(nodeID, host, port); err != nil {
		return meta.Node{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		n, err := r.store.GetNode(ctx, nodeID)
		if errs.Is(err, errs.NotFound) {
			n, err = r.create(ctx, nodeID, host, port)
			if errs.Is(err, errs.Conflict) {
				continue // another coordinator created it first: treat as an existing node
			}
			return n, err
		}
		if err != nil {
			return meta.Node{}, err
		}
		return r.reannounce(ctx, n, host, port)
	}
}

func (r *Registry) create(ctx context.Context, id, host string, port int) (meta.Node, error) {
	n := meta.Node{ID: id, Host: host, Port: port, Status: meta.NodeUnhealthy, RegisteredAt: r.now()}
	if err := r.store.CreateNode(ctx, &n); err != nil {
		return meta.Node{}, err
	}
	r.setAddr(n)
	r.log.Info(fmt.Sprintf("node %s registered at %s, joins the ring after %d successful probe(s)", id, address(host, port), r.okThresh),
		"node", id, "address", address(host, port))
	r.probeSoon(id)
	return n, nil
}

// reannounce handles the announcement of a node the store already knows.
// Callers hold mu.
func (r *Registry) reannounce(ctx context.Context, n meta.Node, host string, port int) (meta.Node, error) {
	if n.Status == meta.NodeDeregistered {
		if !r.ignored[n.ID] {
			r.ignored[n.ID] = true
			r.log.Info(fmt.Sprintf("ignoring the registration of deregistered node %s; POST /api/nodes/%s/rejoin re-admits it", n.ID, n.ID),
				"node", n.ID, "address", address(host, port))
		}
		return n, nil
	}
	if n.Host == host && n.Port == port {
		return n, nil // a heartbeat
	}
	old := address(n.Host, n.Port)
	n, changed, err := r.update(ctx, n.ID, func(n *meta.Node) (bool, error) {
		switch {
		case n.Status == meta.NodeDeregistered:
			return false, nil
		case n.Host == host && n.Port == port:
			return false, nil
		case n.Status == meta.NodeHealthy:
			return false, errs.E(errs.Conflict, "%s is registered at %s and healthy", n.ID, address(n.Host, n.Port))
		}
		n.Host, n.Port = host, port
		n.ConsecutiveFailures, n.ConsecutiveSuccesses = 0, 0
		return true, nil
	})
	if err != nil {
		return meta.Node{}, err
	}
	if changed {
		r.setAddr(n)
		r.log.Info(fmt.Sprintf("node %s re-registered at %s (was %s), joins the ring after %d successful probe(s)", n.ID, address(host, port), old, r.okThresh),
			"node", n.ID, "address", address(host, port), "previous", old)
		r.probeSoon(n.ID)
	}
	return n, nil
}

// Deregister takes a node off the ring at once and marks it DEREGISTERED,
// which its own heartbeats cannot undo; only Rejoin re-admits it. Its copies
// stay readable: BaseURL keeps answering for it. Deregistering a
// deregistered node changes nothing and emits no second event.
func (r *Registry) Deregister(ctx context.Context, id string) (meta.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, changed, err := r.update(ctx, id, func(n *meta.Node) (bool, error) {
		if n.Status == meta.NodeDeregistered {
			return false, nil
		}
		n.Status = meta.NodeDeregistered
		n.ConsecutiveFailures, n.ConsecutiveSuccesses = 0, 0
		return true, nil
	})
	if err != nil {
		return meta.Node{}, notFound(id, err)
	}
	if !changed {
		return n, nil
	}
	rg := r.publish(n)
	r.log.Info(fmt.Sprintf("node %s deregistered, off the ring, %d node(s) remain", id, len(rg.Nodes())), "node", id)
	r.emit(Deregistered, n, rg)
	return n, nil
}

// Rejoin re-admits a deregistered node. It becomes UNHEALTHY with its
// counters and LastHealthyAt cleared, so it re-enters the ring like a new
// node: after SuccessThreshold good probes, with a Joined event. A node that
// is not deregistered is a Conflict.
func (r *Registry) Rejoin(ctx context.Context, id string) (meta.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, _, err := r.update(ctx, id, func(n *meta.Node) (bool, error) {
		if n.Status != meta.NodeDeregistered {
			return false, errs.E(errs.Conflict, "node %s is %s, not deregistered; only a deregistered node can rejoin", id, n.Status)
		}
		n.Status = meta.NodeUnhealthy
		n.ConsecutiveFailures, n.ConsecutiveSuccesses = 0, 0
		n.LastHealthyAt = nil
		return true, nil
	})
	if err != nil {
		return meta.Node{}, notFound(id, err)
	}
	delete(r.ignored, id)
	rg := r.publish(n)
	r.log.Info(fmt.Sprintf("node %s re-admitted, joins the ring after %d successful probe(s)", id, r.okThresh), "node", id)
	r.emit(Rejoined, n, rg)
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
