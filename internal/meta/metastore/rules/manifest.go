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
