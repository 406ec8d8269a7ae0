package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/dfs-project/dfs/internal/errs"
)

// Nodes returns every known storage node.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var nodes []Node
	_, err := c.doJSON(ctx, http.MethodGet, "/api/nodes", nil, nil, &nodes)
	return nodes, err
}

// Node returns one storage node.
func (c *Client) Node(ctx context.Context, id string) (Node, error) {
	if err := checkID("node", id); err != nil {
		return Node{}, err
	}
	var n Node
	_, err := c.doJSON(ctx, http.MethodGet, pathOf("api", "nodes", id), nil, nil, &n)
	return n, err
}

// Ring returns the ring's size and every node's share of the keyspace.
func (c *Client) Ring(ctx context.Context) (RingInfo, error) {
	var r RingInfo
	_, err := c.doJSON(ctx, http.MethodGet, "/api/nodes/ring", nil, nil, &r)
	return r, err
}

// Register announces a storage node, as nodes do themselves; with a cluster
// token configured it needs Options.Token.
func (c *Client) Register(ctx context.Context, req RegisterRequest) (Node, error) {
	var n Node
	_, err := c.doJSON(ctx, http.MethodPost, "/api/nodes/register", nil, req, &n)
	return n, err
}

// Deregister takes a node off the ring for good and drains it. With wait the
// coordinator runs the drain before answering (bounded by its DRAIN_TIMEOUT)
// and Drain.Complete says whether it finished; without, the answer gives the
// drain's progress so far. A drain that is not safe is refused (409
// UNSAFE_DRAIN); DeregisterWith can force it.
func (c *Client) Deregister(ctx context.Context, id string, wait bool) (DeregisterResult, error) {
	return c.DeregisterWith(ctx, id, DrainOptions{Wait: wait})
}

// DrainOptions are the choices of a drain.
type DrainOptions struct {
	// Wait runs the drain before the answer (see Deregister).
	Wait bool
	// Force drains even when the coordinator finds the drain unsafe.
	Force bool
}

// DeregisterWith is Deregister with every option.
func (c *Client) DeregisterWith(ctx context.Context, id string, o DrainOptions) (DeregisterResult, error) {
	if err := checkID("node", id); err != nil {
		return DeregisterResult{}, err
	}
	q := url.Values{}
	if o.Wait {
		q.Set("wait", "true")
	}
	if o.Force {
		q.Set("force", "true")
	}
	var res DeregisterResult
	_, err := c.doJSON(ctx, http.MethodDelete, pathOf("api", "nodes", id), q, nil, &res)
	return res, err
}

// PlanDrain asks what draining node id would do and whether it is safe;
// nothing changes.
func (c *Client) PlanDrain(ctx context.Context, id string) (DrainPlan, error) {
	if err := checkID("node", id); err != nil {
		return DrainPlan{}, err
	}
	var p DrainPlan
	_, err := c.doJSON(ctx, http.MethodDelete, pathOf("api", "nodes", id), url.Values{"dryRun": {"true"}}, nil, &p)
	return p, err
}

// Rejoin re-admits a deregistered node; it re-enters the ring after enough
// good probes.
func (c *Client) Rejoin(ctx context.Context, id string) (Node, error) {
	if err := checkID("node", id); err != nil {
		return Node{}, err
	}
	var n Node
	_, err := c.doJSON(ctx, http.MethodPost, pathOf("api", "nodes", id, "rejoin"), nil, nil, &n)
	return n, err
}

// MaxWeight is the largest weight the coordinator accepts for a node.
const MaxWeight = 1000

// SetPlacement sets an operator's zone and weight for node id (PUT
// /api/nodes/{id}/placement) and returns the node as it is now. A set Zone
// or Weight becomes an override that wins over what the node reports, Zone
// "" meaning no zone; Reset names "zone" and/or "weight" to drop an
// override. A change of a node on the ring is a membership change: the
// coordinator rebuilds the ring and moves only the copies that must move.
// A request CheckPlacement refuses is not sent.
func (c *Client) SetPlacement(ctx context.Context, id string, req PlacementRequest) (Node, error) {
	if err := checkID("node", id); err != nil {
		return Node{}, err
	}
	if err := CheckPlacement(req); err != nil {
		return Node{}, err
	}
	var n Node
	_, err := c.doJSON(ctx, http.MethodPut, pathOf("api", "nodes", id, "placement"), nil, req, &n)
	return n, err
}

// CheckPlacement returns an errs.Invalid error naming what the coordinator
// would refuse in req: nothing to do, a zone with spaces or control
// characters or over 255 bytes, a weight not > 0 and at most MaxWeight, a
// reset of something other than zone or weight, or a value both set and
// reset.
func CheckPlacement(req PlacementRequest) error {
	if req.Zone == nil && req.Weight == nil && len(req.Reset) == 0 {
		return errs.E(errs.Invalid, "nothing to change: give a zone, a weight or a reset")
	}
	if req.Zone != nil {
		z := *req.Zone
		if len(z) > 255 {
			return errs.E(errs.Invalid, "zone %.20q…: longer than 255 bytes", z)
		}
		if strings.IndexFunc(z, func(c rune) bool { return unicode.IsSpace(c) || !unicode.IsPrint(c) }) >= 0 {
			return errs.E(errs.Invalid, "zone %q: no spaces or control characters", z)
		}
	}
	if req.Weight != nil {
		if w := *req.Weight; !(w > 0) || w > MaxWeight {
			return errs.E(errs.Invalid, "weight %v: must be a decimal > 0 and at most %d", w, MaxWeight)
		}
	}
	seen := map[string]bool{}
	for _, f := range req.Reset {
		switch {
		case f != "zone" && f != "weight":
			return errs.E(errs.Invalid, "reset %q: want zone or weight", f)
		case seen[f]:
			return errs.E(errs.Invalid, "reset %s given twice", f)
		case f == "zone" && req.Zone != nil, f == "weight" && req.Weight != nil:
			return errs.E(errs.Invalid, "%s both set and reset: give one", f)
		}
		seen[f] = true
	}
	return nil
}

// Health returns the cluster's health. A DOWN cluster is a report too, not
// an error, although the coordinator answers it with 503.
func (c *Client) Health(ctx context.Context) (HealthReport, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/api/health", nil, nil)
	if err != nil {
		return HealthReport{}, err
	}
	resp, err := c.send(req, nil)
	if err != nil {
		return HealthReport{}, err
	}
	if resp.StatusCode == http.StatusOK {
		defer resp.Body.Close()
		var rep HealthReport
		return rep, decodeBody(resp, &rep)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		return HealthReport{}, readAPIError(resp)
	}
	// A 503 is either the DOWN report or, from a layer in front of the
	// handler, the error shape; the type of "status" tells them apart.
	raw := readLimited(resp)
	var rep HealthReport
	if json.Unmarshal(raw, &rep) == nil && rep.Status != "" {
		return rep, nil
	}
	return HealthReport{}, apiError(resp, raw)
}

// Rebalance reconciles every file now and returns the run's report.
func (c *Client) Rebalance(ctx context.Context) (RebalanceReport, error) {
	var rep RebalanceReport
	_, err := c.doJSON(ctx, http.MethodPost, "/api/admin/rebalance", nil, nil, &rep)
	return rep, err
}

// HealthCheck runs one probe sweep over every node now. Two sweeps in a row
// bring freshly registered nodes onto the ring at the default
// HEALTH_SUCCESS_THRESHOLD, without waiting for the detector's interval.
func (c *Client) HealthCheck(ctx context.Context) (HealthCheckResult, error) {
	var res HealthCheckResult
	_, err := c.doJSON(ctx, http.MethodPost, "/api/admin/health-check", nil, nil, &res)
	return res, err
}

// Durability returns how safe the files are now: files by healthy copies,
// bytes at risk, the failure headroom and what each node's failure would do.
func (c *Client) Durability(ctx context.Context) (DurabilityReport, error) {
	var rep DurabilityReport
	_, err := c.doJSON(ctx, http.MethodGet, "/api/cluster/durability", nil, nil, &rep)
	return rep, err
}
