package files

import (
	"context"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// Results of a reported corruption beyond those of a verify's CopyCheck.
const (
	// ReportUnknownFile: no file has the blob's id; the anti-entropy sweep
	// treats the blob as an orphan.
	ReportUnknownFile = "UNKNOWN_FILE"
	// ReportPending: the file is still being uploaded, and its upload
	// checks its own copies.
	ReportPending = "PENDING"
)

// CorruptReportResult is the answer to a node's report of a corrupt copy.
type CorruptReportResult struct {
	FileID string `json:"fileId"`
	NodeID string `json:"nodeId"`
	// Result is the coordinator's own check of the copy: CORRUPT, OK,
	// MISSING or UNREACHABLE as in a verify, or UNKNOWN_FILE or PENDING.
	Result string `json:"result"`
	// Quarantined is true when the copy was taken out of service and its
	// rebuild queued.
	Quarantined bool `json:"quarantined"`
}

// ReportCorrupt handles a storage node's report that its copy of id does not
// match its checksum (its scrubber found it). The report is not taken on
// trust: the copy is re-hashed on the node as a verify does, and only a copy
// that fails that check is quarantined and rebuilt, by the same path a
// verified download's corrupt copy takes (quarantine). A copy that was
// replaced meanwhile, or a node that names a file it holds no copy of, then
// changes nothing.
func (s *Service) ReportCorrupt(ctx context.Context, id, node string) (CorruptReportResult, error) {
	out := CorruptReportResult{FileID: id, NodeID: node}
	rec, err := s.Metadata(ctx, id)
	switch {
	case errs.Is(err, errs.NotFound):
		out.Result = ReportUnknownFile
		s.log.Warn("a node's scrubber reported a corrupt blob that no file has; the anti-entropy sweep removes it as an orphan",
			"blob", id, "node", node)
		return out, nil
	case err != nil:
		return out, err
	case rec.Status == meta.FilePending:
		out.Result = ReportPending
		return out, nil
	}
	c := s.check(ctx, rec.File, node)
	out.Result = c.Result
	if c.Result == "CORRUPT" {
		// The node that asked must not wait for the rebuild, and its hanging
		// up must not leave the quarantine half done.
		s.quarantine(context.WithoutCancel(ctx), id, node, "the node's scrubber found its bytes do not match the checksum")
		out.Quarantined = true
	}
	s.log.Info("corrupt copy reported by a node's scrubber", "file", id, "node", node, "result", out.Result, "quarantined", out.Quarantined)
	return out, nil
}
