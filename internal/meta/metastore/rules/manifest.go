package rules

import (
	"slices"

	"github.com/dfs-project/dfs/internal/meta"
)

// ManifestState is what a store found when it brought a chunked file's
// stored status in line with its chunks (meta.ManifestStatus).
type ManifestState struct {
	Status  meta.FileStatus
	Reason  string
	Changed bool // whether the stored status or reason moved
}

// ChangedIDs adds to ids those of the manifests in set whose status moved,
// each once, and sorts the result.
func ChangedIDs(ids []string, set map[string]ManifestState) []string {
	for id, m := range set {
		if m.Changed && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Derived reports whether a files row with status and chunkCount has the
// status the store derives from its chunks: a manifest neither PENDING nor
// DELETED (those are left to their upload and their delete).
func Derived(status string, chunkCount int) bool {
	return chunkCount > 0 && status != string(meta.FilePending) && status != string(meta.FileDeleted)
}

// RefreshTarget names the manifest whose status a write of the row id
// (with parent and chunkCount as stored) moves: itself when it is one, else
// its parent, "" when it has none.
func RefreshTarget(id, parent string, chunkCount int) string {
	if chunkCount > 0 {
		return id
	}
	return parent
}

// Refreshed gives c the status set holds for it, if any, so that a write
// returns what it stored.
func Refreshed(c *meta.FileRecord, set map[string]ManifestState) {
	if f, ok := set[c.ID]; ok {
		c.Status, c.StatusReason = f.Status, f.Reason
	}
}
