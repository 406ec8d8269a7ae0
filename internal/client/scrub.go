package client

import (
	"context"
	"net/http"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// ScrubReport is every storage node's scrubber progress.
type ScrubReport struct {
	Nodes []NodeScrub `json:"nodes"`
}

// NodeScrub is one node's scrubber: what it has hashed in its current
// period, what it holds, when it last finished a pass and the corrupt copies
// it found (the figures are the node's own answer, relayed). A node that did
// not answer has Reachable false and Error set.
type NodeScrub struct {
	NodeID    string     `json:"nodeId"`
	Status    NodeStatus `json:"status"`
	Reachable bool       `json:"reachable"`
	Error     string     `json:"error,omitempty"`
	wire.ScrubProgress
}

// Scrub returns the storage nodes' scrubber progress.
func (c *Client) Scrub(ctx context.Context) (ScrubReport, error) {
	var rep ScrubReport
	_, err := c.doJSON(ctx, http.MethodGet, "/api/cluster/scrub", nil, nil, &rep)
	return rep, err
}

// ScrubPassReport is the report of a scrub pass (an Operation of kind
// SCRUB), present while it runs too.
type ScrubPassReport struct {
	CopiesScrubbed   int64 `json:"copiesScrubbed"`
	BytesScrubbed    int64 `json:"bytesScrubbed"`
	CorruptionsFound int64 `json:"corruptionsFound"`
	Behind           bool  `json:"behind"`
}
