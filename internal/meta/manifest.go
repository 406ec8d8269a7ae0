package meta

import (
	"fmt"
	"strings"
)

// ManifestStatus is a chunked file's status from its chunks (with their
// replicas), in order: ACTIVE when every chunk is ACTIVE with its RF copies,
// FAILED when some chunk has no readable copy, DEGRADED otherwise, with a
// reason naming the chunks short of their copies. The stores keep a
// manifest's stored status equal to it (see Store); the file service derives
// it the same way for what it shows.
func ManifestStatus(chunks []FileRecord) (FileStatus, string) {
	var short, lost []string
	for i, c := range chunks {
		active := c.ActiveCopies()
		switch {
		case active == 0 || c.Status == FileFailed:
			lost = append(lost, fmt.Sprintf("chunk %d (%s)", i, c.ID))
		case c.Status != FileActive || active < c.ReplicationFactor:
			why := fmt.Sprintf("chunk %d (%s) has %d of %d copies", i, c.ID, active, c.ReplicationFactor)
			if c.StatusReason != "" {
				why += ": " + c.StatusReason
			}
			short = append(short, why)
		}
	}
	switch {
	case len(lost) > 0:
		return FileFailed, fmt.Sprintf("%d of %d chunks have no readable copy: %s", len(lost), len(chunks), firstFew(lost))
	case len(short) > 0:
		return FileDegraded, fmt.Sprintf("%d of %d chunks are short of copies: %s", len(short), len(chunks), firstFew(short))
	}
	return FileActive, ""
}

// firstFew joins up to five items and says how many more there are.
func firstFew(items []string) string {
	const most = 5
	if len(items) <= most {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:most], "; ") + fmt.Sprintf("; and %d more", len(items)-most)
}
