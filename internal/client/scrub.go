package client

import (
	"context"
	"net/http"
	"time"
)

// ScrubReport is every storage node's scrubber progress.
type ScrubReport struct {
	Nodes []NodeScrub `json:"nodes"`
}

// NodeScrub is one node's scrubber: what it has hashed in its current
// period, what it holds, when it last finished a pass and the corrupt copies
// it found. A node that did not answer has Reachable false and Error set.
type NodeScrub struct {
	NodeID                  string     `json:"nodeId"`
	Status                  NodeStatus `json:"status"`
	Reachable               bool       `json:"reachable"`
	Error                   string     `json:"error,omitempty"`
	PeriodStart             *time.Time `json:"periodStart"`
	PeriodSeconds           float64    `json:"periodSeconds"`
	BandwidthBytesPerSecond int64      `json:"bandwidthBytesPerSecond"`
	CopiesScrubbed          int64      `json:"copiesScrubbed"`
	BytesScrubbed           int64      `json:"bytesScrubbed"`
	CopiesTotal             int64      `json:"copiesTotal"`
	BytesTotal              int64      `json:"bytesTotal"`
	LastFullPassAt          *time.Time `json:"lastFullPassAt"`
	CorruptionsFound        int64      `json:"corruptionsFound"`
	CorruptionsFoundTotal   int64      `json:"corruptionsFoundTotal"`
	UnreportedCorruptions   int        `json:"unreportedCorruptions"`
	Running                 bool       `json:"running"`
	Behind                  bool       `json:"behind"`
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
