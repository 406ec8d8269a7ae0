// Package apiwire holds the JSON bodies of the coordinator's REST API that
// the server writes and the client reads unchanged, so that each answer has
// one definition on both sides (the openapi document describes them, and the
// client's schema test checks it against them). It imports nothing of the
// server, so the client stays free of it.
package apiwire

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
