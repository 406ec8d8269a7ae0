package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// admissionPoll is how often WaitAdmitted asks the coordinator about its nodes.
const admissionPoll = 100 * time.Millisecond

// nodeView is the part of the coordinator's GET /api/nodes answer that says
// whether a node takes files.
type nodeView struct {
	NodeID string `json:"nodeId"`
	Status string `json:"status"`
	OnRing bool   `json:"onRing"`
}

// WaitAdmitted waits until the coordinator reports every named storage node
// (every node of the cluster when none is named) HEALTHY and on the ring, so
// that an upload made next finds its nodes. A node's /health/ready says only
// that the process serves; the coordinator admits it after
// HEALTH_SUCCESS_THRESHOLD good probes. The wait is bounded by ctx and
// Options.ReadyTimeout; its error names each node not yet admitted and what
// the coordinator last said of it.
func (c *Cluster) WaitAdmitted(ctx context.Context, names ...string) error {
	if !c.HasCoordinator() {
		return errs.E(errs.Conflict, "localcluster: no coordinator to admit the nodes")
	}
	if len(names) == 0 {
		names = c.Nodes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.ReadyTimeout)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(admissionPoll)
	defer tick.Stop()
	for {
		missing, err := c.notAdmitted(ctx, names)
		if err == nil && len(missing) == 0 {
			c.log.Info("localcluster: nodes admitted", "nodes", names, "after", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if errs.Is(err, errs.Unauthorized) || errs.Is(err, errs.Forbidden) {
			// Waiting cannot make a refused key right.
			return err
		}
		select {
		case <-ctx.Done():
			last := strings.Join(missing, ", ")
			if err != nil {
				last = err.Error()
			}
			return errs.Wrap(errs.Unavailable, ctx.Err(), "localcluster: the coordinator did not admit every node to the ring within %s (%s); last lines of %s:\n%s",
				c.opts.ReadyTimeout, last, c.logPath(CoordinatorName), tailLines(c.logPath(CoordinatorName), logTail))
		case <-tick.C:
		}
	}
}

// notAdmitted returns, for each named node the coordinator does not have
// HEALTHY on its ring, "name (status)".
func (c *Cluster) notAdmitted(ctx context.Context, names []string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.CoordinatorURL()+"/api/nodes", nil)
	if err != nil {
		return nil, err
	}
	key, secret := c.rootKey()
	if key != "" {
		req.SetBasicAuth(key, secret)
	}
	resp, err := c.probe.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		var answer struct{ Error, Message string }
		if json.Unmarshal(body, &answer) != nil || answer.Error == "" {
			// Not the coordinator's error shape (a proxy's page, say).
			first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
			if len(first) > 200 {
				first = first[:200] + "…"
			}
			answer.Error, answer.Message = http.StatusText(resp.StatusCode), first
		}
		how := "with ROOT_ACCESS_KEY from the coordinator's environment"
		if key == "" {
			how = "without a key: the coordinator's environment sets no ROOT_ACCESS_KEY and ROOT_SECRET_KEY to poll with"
		}
		kind := errs.Unauthorized
		if resp.StatusCode == http.StatusForbidden {
			kind = errs.Forbidden
		}
		return nil, errs.E(kind, "localcluster: the coordinator refuses GET /api/nodes (%d %s: %s), asked %s",
			resp.StatusCode, answer.Error, answer.Message, how)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/nodes answered %s", resp.Status)
	}
	var nodes []nodeView
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return nil, fmt.Errorf("GET /api/nodes: %w", err)
	}
	var missing []string
	for _, name := range names {
		i := slices.IndexFunc(nodes, func(n nodeView) bool { return n.NodeID == name })
		switch {
		case i < 0:
			missing = append(missing, name+" (not registered)")
		case nodes[i].Status != "HEALTHY" || !nodes[i].OnRing:
			missing = append(missing, fmt.Sprintf("%s (%s, on ring: %t)", name, nodes[i].Status, nodes[i].OnRing))
		}
	}
	return missing, nil
}

// rootKey is the root key pair the coordinator starts with, from its
// environment as Start builds it; the admission poll needs it when the
// REST API requires keys (a root key without API_AUTH=open).
func (c *Cluster) rootKey() (key, secret string) {
	env := c.childEnv(c.opts.CoordinatorEnv)
	return lastValue(env, "ROOT_ACCESS_KEY"), lastValue(env, "ROOT_SECRET_KEY")
}

// lastValue is the value env gives key, as os/exec reads it (the last one).
func lastValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
