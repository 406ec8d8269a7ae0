package apiwire

import (
	"time"

	"github.com/dfs-project/dfs/internal/ops"
)

// NodeStatus is a storage node's state.
type NodeStatus string

// Node states.
const (
	NodeHealthy      NodeStatus = "HEALTHY"
	NodeUnhealthy    NodeStatus = "UNHEALTHY"
	NodeDeregistered NodeStatus = "DEREGISTERED"
)

// Node is a storage node as GET /api/nodes and its neighbours show it.
type Node struct {
	NodeID               string     `json:"nodeId"`
	Host                 string     `json:"host"`
	Port                 int        `json:"port"`
	Status               NodeStatus `json:"status"`
	OnRing               bool       `json:"onRing"`
	KeyspaceSharePercent float64    `json:"keyspaceSharePercent"`
	RegisteredAt         time.Time  `json:"registeredAt"`
	LastCheckAt          *time.Time `json:"lastCheckAt"`
	LastHealthyAt        *time.Time `json:"lastHealthyAt"`
	ConsecutiveFailures  int        `json:"consecutiveFailures"`
	ConsecutiveSuccesses int        `json:"consecutiveSuccesses"`
	// BlobCount, BytesUsed and FreeBytes are the node's own figures, absent
	// (nil) when it did not answer in time.
	BlobCount *int64 `json:"blobCount,omitempty"`
	BytesUsed *int64 `json:"bytesUsed,omitempty"`
	FreeBytes *int64 `json:"freeBytes,omitempty"`
	// DiskID is the identity of the node's data directory; empty while
	// unknown.
	DiskID string `json:"diskId,omitempty"`
	// Zone and Weight are what placement uses: an operator's override when
	// one is set (Overridden names which), else what the node reports
	// (ReportedZone, ReportedWeight). Zone is absent for a node of no zone.
	// Points is its number of ring points, 0 while it is off the ring.
	Zone           string   `json:"zone,omitempty"`
	Weight         float64  `json:"weight"`
	Points         int      `json:"points"`
	ReportedZone   string   `json:"reportedZone,omitempty"`
	ReportedWeight float64  `json:"reportedWeight"`
	Overridden     []string `json:"overridden,omitempty"`
	// Drain is the node's drain while the answering coordinator runs it;
	// nil otherwise.
	Drain *ops.Operation `json:"drain,omitempty"`
}

// RegisterRequest is the body of POST /api/nodes/register.
type RegisterRequest struct {
	NodeID string `json:"nodeId"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// DiskID is the identity of the node's data directory; optional.
	DiskID string `json:"diskId,omitempty"`
	// Zone and Weight are the node's failure domain and relative size;
	// optional (no zone, weight 1).
	Zone   string  `json:"zone,omitempty"`
	Weight float64 `json:"weight,omitempty"`
}

// PlacementRequest is the body of PUT /api/nodes/{id}/placement: an
// operator's zone and weight for a node, which win over what the node
// reports until reset. Zone "" is an override to no zone; Reset lists
// "zone" and/or "weight" to drop an override.
type PlacementRequest struct {
	Zone   *string  `json:"zone,omitempty"`
	Weight *float64 `json:"weight,omitempty"`
	Reset  []string `json:"reset,omitempty"`
}

// DeregisterResult is the answer of DELETE /api/nodes/{id}.
type DeregisterResult struct {
	Node  Node        `json:"node"`
	Drain DrainReport `json:"drain"`
}

// RingInfo is the answer of GET /api/nodes/ring; Nodes are largest share
// first.
type RingInfo struct {
	PhysicalNodes       int         `json:"physicalNodes"`
	VirtualNodesPerNode int         `json:"virtualNodesPerNode"`
	TotalRingPositions  int         `json:"totalRingPositions"`
	Nodes               []RingShare `json:"nodes"`
	// Zones, present when some node has a zone, are the named zones,
	// largest share first; a node of no zone is a zone of its own and is
	// not listed here.
	Zones []ZoneShare `json:"zones,omitempty"`
	// Points, asked for with ?points=true, are the ring's virtual nodes in
	// ring order; each owns the arc from the point before it (exclusive) to
	// its own position (inclusive), the first one the arc wrapping past 0.
	Points []RingPoint `json:"points,omitempty"`
}

// RingPoint is one virtual node of the ring.
type RingPoint struct {
	NodeID   string `json:"nodeId"`
	Position int64  `json:"position"`
}

// RingShare is one node's part of the keyspace, in percent, with the zone
// (absent: none) and weight that gave it its points.
type RingShare struct {
	NodeID               string  `json:"nodeId"`
	KeyspaceSharePercent float64 `json:"keyspaceSharePercent"`
	Zone                 string  `json:"zone,omitempty"`
	Weight               float64 `json:"weight"`
	Points               int     `json:"points"`
}

// ZoneShare is one zone's part of the keyspace: the sum of its nodes'.
type ZoneShare struct {
	Zone                 string  `json:"zone"`
	KeyspaceSharePercent float64 `json:"keyspaceSharePercent"`
	Nodes                int     `json:"nodes"`
}
