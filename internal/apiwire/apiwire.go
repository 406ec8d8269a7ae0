// Package apiwire holds the JSON bodies of the coordinator's REST API that
// the server writes and the client reads unchanged, so that each answer has
// one definition on both sides (the openapi document describes them, and the
// client's schema test checks it against them). It imports nothing of the
// server but the operations tracker's Operation (package ops, which imports
// nothing itself), so the client stays free of it.
package apiwire

import "strconv"

// Cluster health states.
const (
	HealthUp       = "UP"
	HealthDegraded = "DEGRADED"
	HealthDown     = "DOWN"
)

// HealthReport is the answer of GET /api/health.
type HealthReport struct {
	Status            string         `json:"status"` // HealthUp, HealthDegraded or HealthDown
	Reasons           []string       `json:"reasons,omitempty"`
	ReplicationFactor int            `json:"replicationFactor"`
	Nodes             NodeCounts     `json:"nodes"`
	MetadataStore     ComponentState `json:"metadataStore"`
	Redis             ComponentState `json:"redis"`
}

// NodeCounts counts the known nodes by state.
type NodeCounts struct {
	Total        int `json:"total"`
	OnRing       int `json:"onRing"`
	Healthy      int `json:"healthy"`
	Unhealthy    int `json:"unhealthy"`
	Deregistered int `json:"deregistered"`
}

// ComponentState is the state of one dependency.
type ComponentState struct {
	Status string `json:"status"` // UP, DOWN or DISABLED
	Kind   string `json:"kind,omitempty"`
	Error  string `json:"error,omitempty"`
}

// DurabilityReport is the answer of GET /api/cluster/durability: how safe
// the readable files are right now (API.md, "Durability"). A healthy copy is
// an ACTIVE copy on a HEALTHY node.
type DurabilityReport struct {
	// FilesByCopies maps a number of healthy copies, as a decimal string, to
	// the number of readable files with exactly that many (a chunked file
	// once, by its chunk with the fewest). Every count from
	// "0" to the replication factor is present; a larger one only while
	// some file has it (a copy being moved).
	FilesByCopies     map[string]int `json:"filesByCopies"`
	Files             int            `json:"files"`
	BytesAtRisk       int64          `json:"bytesAtRisk"`
	FailureHeadroom   int            `json:"failureHeadroom"`
	ReplicationFactor int            `json:"replicationFactor"`
	HealthyNodes      int            `json:"healthyNodes"`
	Nodes             []NodeRisk     `json:"nodes"`
	// ZoneFailureHeadroom is how many whole zones can fail now, whichever
	// they are, without a readable file losing its last healthy copy (a
	// node without a zone is a zone of its own).
	ZoneFailureHeadroom int `json:"zoneFailureHeadroom"`
	// FilesZoneCollapsed counts the readable files with two healthy copies
	// in one zone while a zone they are not in has a healthy node.
	FilesZoneCollapsed int `json:"filesZoneCollapsed"`
	// Zones holds one entry per zone of the healthy nodes: the named zones
	// in name order, then each healthy node without a zone, by ID.
	Zones []ZoneRisk `json:"zones"`
}

// ZoneRisk is what the failure of every node of one zone at once would do
// now.
type ZoneRisk struct {
	// Zone is the zone's name; "" for a node without one, the only entry
	// of Nodes.
	Zone                 string   `json:"zone"`
	Nodes                []string `json:"nodes"`
	FilesLeftWithOneCopy int      `json:"filesLeftWithOneCopy"`
	FilesLeftWithNoCopy  int      `json:"filesLeftWithNoCopy"`
}

// NodeRisk is what one node's failure would do now. A node that is not
// HEALTHY holds no healthy copy, so its numbers are 0.
type NodeRisk struct {
	NodeID               string `json:"nodeId"`
	Status               string `json:"status"` // the node's status: HEALTHY, UNHEALTHY or DEREGISTERED
	FilesLeftWithOneCopy int    `json:"filesLeftWithOneCopy"`
	FilesLeftWithNoCopy  int    `json:"filesLeftWithNoCopy"`
}

// FilesBelow counts the files with fewer than n healthy copies.
func (d DurabilityReport) FilesBelow(n int) int {
	total := 0
	for copies, files := range d.FilesByCopies {
		if c, err := strconv.Atoi(copies); err == nil && c < n {
			total += files
		}
	}
	return total
}
