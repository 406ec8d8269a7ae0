package api

// Cluster health states.
const (
	HealthUp       = "UP"
	HealthDegraded = "DEGRADED"
	HealthDown     = "DOWN"
)

// HealthReport is the answer of GET /api/health.
type HealthReport struct {
	Status            string         `json:"status"`
	Reasons           []string       `json:"reasons,omitempty"`
	ReplicationFactor int            `json:"replicationFactor"`
	Nodes             NodeCounts     `json:"nodes"`
	MetadataStore     ComponentState `json:"metadataStore"`
	Redis             ComponentState `json:"redis"`
}

// NodeCounts counts nodes by state.
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
