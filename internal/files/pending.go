package files

import (
	"context"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// SettleAbandoned resolves the upload id when its PENDING row has gone
// untouched for timeout: a running upload touches its row every PendingTouch,
// so such a row belongs to an upload whose coordinator stopped. The planned
// nodes are asked what they hold; copies found are adopted and the file
// becomes an ordinary one (the reconciler then completes it), and a file with
// no copy anywhere is discarded. While a planned node cannot be asked, a file
// with no copy found is left for a later call, since discarding it could
// orphan a copy on that node. A file that is gone, no longer PENDING or
// touched since is left alone.
func (s *Service) SettleAbandoned(ctx context.Context, id string, timeout time.Duration) error {
	rec, err := s.opt.Store.GetFile(ctx, id)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Status != meta.FilePending || time.Since(rec.UpdatedAt) < timeout {
		return nil
	}
	found, unknown := 0, 0
	for i, c := range rec.Replicas {
		base, ok := s.opt.Cluster.BaseURL(c.NodeID)
		if !ok {
			unknown++
			rec.Replicas[i].Status = meta.ReplicaFailed
			continue
		}
		info, err := s.opt.Nodes.Head(ctx, base, id)
		switch {
		case err == nil && info.Checksum == rec.Checksum && info.Size == rec.SizeBytes:
			found++
			rec.Replicas[i].Status = meta.ReplicaActive
			if rec.PrimaryNodeID == "" {
				rec.PrimaryNodeID = c.NodeID
			}
		case errs.Is(err, errs.NotFound):
			rec.Replicas[i].Status = meta.ReplicaFailed
		default:
			unknown++
			rec.Replicas[i].Status = meta.ReplicaFailed
		}
	}
	switch {
	case found > 0:
		rec.Status = meta.StatusFor(found, found, rec.ReplicationFactor)
		rec.StatusReason = "adopted from an upload its coordinator abandoned"
		s.log.Info("adopting abandoned upload", "file", id, "copies_found", found)
		return s.opt.Store.UpdateFile(ctx, &rec)
	case unknown > 0:
		s.log.Info("abandoned upload kept: some planned nodes cannot be asked yet", "file", id, "unreachable", unknown)
		return nil
	default:
		s.log.Info("discarding abandoned upload: no planned node holds a copy", "file", id)
		return s.opt.Store.DeleteFile(ctx, id)
	}
}
