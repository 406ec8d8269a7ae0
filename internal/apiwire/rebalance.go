package apiwire

import "time"

// Trigger names why a rebalance runs.
type Trigger string

// The triggers a rebalance report names (API.md).
const (
	TriggerJoined    Trigger = "JOINED"
	TriggerFailed    Trigger = "FAILED"
	TriggerRecovered Trigger = "RECOVERED"
	// TriggerPlacementChanged: a node on the ring changed its zone or weight.
	TriggerPlacementChanged Trigger = "PLACEMENT_CHANGED"
	TriggerDeregistered     Trigger = "DEREGISTERED"
	TriggerManual           Trigger = "MANUAL"
	TriggerRepair           Trigger = "REPAIR"
)

// RebalanceReport is the outcome of one rebalance run: the answer of POST
// /api/admin/rebalance and the run of a drain's report.
type RebalanceReport struct {
	Trigger       Trigger `json:"trigger"`
	Node          string  `json:"node,omitempty"`
	FilesScanned  int     `json:"filesScanned"`
	FilesAffected int     `json:"filesAffected"`
	// ChunksMoved counts the affected blobs that are chunks of larger
	// files; each is also counted in FilesAffected.
	ChunksMoved        int      `json:"chunksMoved"`
	CopiesCreated      int      `json:"copiesCreated"`
	CopiesRemoved      int      `json:"copiesRemoved"`
	PrimariesPromoted  int      `json:"primariesPromoted"`
	Failures           int      `json:"failures"`
	UnrecoverableFiles []string `json:"unrecoverableFiles"`
	// FilesSkipped counts the files this run did not reconcile: their lease
	// was held or could not be had, a reconcile ended in an error, or the
	// run was cut short before reaching them.
	FilesSkipped int   `json:"filesSkipped"`
	DurationMs   int64 `json:"durationMs"`
	// Complete is true when every file was reconciled. A run that is not
	// complete did not do its job: whoever asked for it must retry it.
	Complete bool `json:"complete"`
	// Skipped is true when another coordinator was running the same
	// rebalance, so this one did nothing.
	Skipped bool `json:"skipped,omitempty"`
}

// RunProgress is how far a run that is still going has come.
type RunProgress struct {
	StartedAt  time.Time `json:"startedAt"`
	FilesDone  int       `json:"filesDone"`
	FilesTotal int       `json:"filesTotal"`
	// BytesCopied counts the bytes of the copies created so far.
	BytesCopied    int64   `json:"bytesCopied"`
	BytesPerSecond float64 `json:"bytesPerSecond"`
	// EtaSeconds extrapolates the time left from the files done so far;
	// nil before the first one is done.
	EtaSeconds *float64 `json:"etaSeconds"`
}

// DrainReport tells how far a deregistered node's drain has come.
type DrainReport struct {
	Node           string `json:"node"`
	FilesRemaining int    `json:"filesRemaining"`
	// PendingUploads counts uploads still in flight (or abandoned, until the
	// repair loop settles them) with a copy planned on the node. They are
	// not files yet, so they do not hold the drain up.
	PendingUploads int              `json:"pendingUploads,omitempty"`
	Complete       bool             `json:"complete"`
	Run            *RebalanceReport `json:"run,omitempty"`
	// Progress is that of the drain's run going on in the answering
	// coordinator, if one is.
	Progress *RunProgress `json:"progress,omitempty"`
}

// DrainPlan is what draining a node would do, worked out from the metadata
// and the ring without the node, and whether doing it is safe: the answer
// of DELETE /api/nodes/{id}?dryRun=true. A drain reconciles every file with
// a copy on the node, so the nodes that gain a copy are those of the file's
// preference list on that ring that hold no ACTIVE copy yet; on a cluster
// at full replication they are exactly the nodes its preference list gains.
type DrainPlan struct {
	Node string `json:"node"`
	// Safe is true when Reasons is empty.
	Safe    bool     `json:"safe"`
	Reasons []string `json:"reasons"`
	// Files and Bytes are what the drain would copy: files that gain at
	// least one copy, and the bytes written summed over every new copy.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// FilesOnNode and BytesOnNode are what leaves the node: its files
	// (uploads in flight and deleted files aside) and their size.
	FilesOnNode int   `json:"filesOnNode"`
	BytesOnNode int64 `json:"bytesOnNode"`
	// PendingUploads counts uploads in flight with a copy planned on the
	// node; a drain leaves them to their upload.
	PendingUploads    int `json:"pendingUploads"`
	RemainingNodes    int `json:"remainingNodes"`
	ReplicationFactor int `json:"replicationFactor"`
	// Targets are the nodes that would receive copies, by node id.
	Targets []DrainTarget `json:"targets"`
	// SoleCopies lists the files whose only healthy copy is on the node
	// and that no remaining node can take (at most ten).
	SoleCopies []string `json:"soleCopies"`
}

// DrainTarget is one node's share of a drain.
type DrainTarget struct {
	NodeID string `json:"nodeId"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
	// FreeBytes is the free space the node reported; nil when it did not
	// answer.
	FreeBytes *int64 `json:"freeBytes"`
}
