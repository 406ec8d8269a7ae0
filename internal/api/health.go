package api

import "github.com/dfs-project/dfs/internal/apiwire"

// Cluster health states.
const (
	HealthUp       = apiwire.HealthUp
	HealthDegraded = apiwire.HealthDegraded
	HealthDown     = apiwire.HealthDown
)

// The answer of GET /api/health, defined with the client's in apiwire.
type (
	HealthReport   = apiwire.HealthReport
	NodeCounts     = apiwire.NodeCounts
	ComponentState = apiwire.ComponentState
)
