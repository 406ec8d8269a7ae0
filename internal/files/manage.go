package files

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/reconcile"
)

// mutate applies fn to the current record and writes it, re-reading and
// re-applying when another writer got there first. fn reports whether it
// changed anything.
func (s *Service) mutate(ctx context.Context, id string, fn func(*meta.FileRecord) bool) (meta.FileRecord, error) {
	var err error
	for range 5 {
		var rec meta.FileRecord
		if rec, err = s.opt.Store.GetFile(ctx, id); err != nil {
			return rec, err
		}
		if !fn(&rec) {
			return rec, nil
		}
		if err = s.opt.Store.UpdateFile(ctx, &rec); !errs.Is(err, errs.Conflict) {
			return rec, err
		}
	}
	return meta.FileRecord{}, err
}

// rebuildTimeout bounds the background rebuild of one quarantined copy.
const rebuildTimeout = 10 * time.Minute

// quarantine takes a corrupt copy out of service: its row becomes FAILED, the
// file's status follows, and the bad bytes are removed from the node so that
// no later observation can mistake them for a good copy. The reconciler then
// rebuilds the copy from a good one in the background (see Run).
func (s *Service) quarantine(ctx context.Context, id, node, why string) {
	s.opt.Events.ChecksumMismatch(node)
	s.log.Error("corrupt copy quarantined", "file", id, "node", node, "why", why)
	s.markCorrupt(ctx, id, []string{node})
	queued := s.repairs.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
		defer cancel()
		if _, err := s.opt.Reconciler.Reconcile(ctx, id); err != nil {
			s.log.Warn("rebuild after quarantine failed; the repair loop will retry", "file", id, "err", err)
		}
	})
	if !queued {
		s.log.Warn("rebuild after quarantine not queued; the repair loop will rebuild the copy", "file", id)
	}
}

// reportCorrupt is how a streaming read reports that the copy it served does
// not match the file's checksum. The read has failed already; the
// quarantine, a metadata update and a node delete, is queued for Run rather
// than done inside the reader's Read.
func (s *Service) reportCorrupt(id, node, why string) {
	queued := s.repairs.Go(func(ctx context.Context) { s.quarantine(ctx, id, node, why) })
	if !queued {
		s.opt.Events.ChecksumMismatch(node)
		s.log.Error("corrupt copy found but its quarantine not queued; the next verified read or verify finds it again",
			"file", id, "node", node, "why", why)
	}
}

// markCorrupt marks the copies on nodes FAILED and deletes their bytes.
func (s *Service) markCorrupt(ctx context.Context, id string, nodes []string) {
	_, err := s.mutate(ctx, id, func(rec *meta.FileRecord) bool {
		if rec.Status == meta.FileDeleted || rec.Status == meta.FilePending {
			return false
		}
		changed := false
		for i := range rec.Replicas {
			for _, n := range nodes {
				if rec.Replicas[i].NodeID == n && rec.Replicas[i].Status != meta.ReplicaFailed {
					rec.Replicas[i].Status = meta.ReplicaFailed
					changed = true
				}
			}
		}
		if changed {
			active := rec.ActiveCopies()
			rec.Status = meta.StatusFor(active, active, rec.ReplicationFactor)
			rec.StatusReason = "corrupt copy quarantined; rebuilding"
		}
		return changed
	})
	if err != nil {
		s.log.Error("could not record quarantined copy", "file", id, "nodes", nodes, "err", err)
	}
	for _, n := range nodes {
		if base, ok := s.opt.Cluster.BaseURL(n); ok {
			if err := s.opt.Nodes.Delete(ctx, base, id); err != nil {
				s.log.Warn("could not remove corrupt copy; it stays marked FAILED", "file", id, "node", n, "err", err)
			}
		}
	}
}

// Metadata returns a file with every copy's placement. PENDING files are
// visible here; DELETED files are not.
func (s *Service) Metadata(ctx context.Context, id string) (meta.FileRecord, error) {
	rec, err := s.get(ctx, id)
	if err != nil {
		return rec, err
	}
	if rec.Status == meta.FileDeleted {
		return meta.FileRecord{}, fileNotFound(id)
	}
	return s.withChunks(ctx, rec)
}

// MaxPageSize bounds a page of the file list.
const MaxPageSize = 1000

// List returns one page of files, newest first, and the total count.
// statuses empty means the visible ones (neither PENDING nor DELETED);
// visibleTo, when set, is a non-admin access key, for whom the objects of
// other keys' buckets are left out (meta.FileQuery.VisibleTo).
func (s *Service) List(ctx context.Context, statuses []meta.FileStatus, page, size int, visibleTo string) ([]meta.File, int, error) {
	if page < 0 {
		return nil, 0, errs.E(errs.Invalid, "page must be 0 or more")
	}
	if size < 1 || size > MaxPageSize {
		return nil, 0, errs.E(errs.Invalid, "size must be between 1 and %d", MaxPageSize)
	}
	if page > (1<<31-1)/size {
		return nil, 0, errs.E(errs.Invalid, "page is too large")
	}
	return s.opt.Store.ListFiles(ctx, meta.FileQuery{Statuses: statuses, Offset: page * size, Limit: size, VisibleTo: visibleTo})
}

// DeleteResult tells whether every copy of a deleted file is gone.
type DeleteResult struct {
	FileID       string   `json:"fileId"`
	Status       string   `json:"status"` // DELETED
	Complete     bool     `json:"complete"`
	PendingNodes []string `json:"pendingNodes,omitempty"`
	Message      string   `json:"message,omitempty"`
}

// Delete marks the file DELETED, which hides it at once everywhere, and then
// removes every copy it can reach. Copies on nodes that cannot be reached
// stay DELETING until the repair loop finishes them; the file is never
// resurrected.
func (s *Service) Delete(ctx context.Context, id string) (DeleteResult, error) {
	if _, err := s.get(ctx, id); err != nil {
		return DeleteResult{}, err
	}
	ctx = context.WithoutCancel(ctx) // a client hanging up must not leave half a delete
	var prior meta.FileStatus
	_, err := s.mutate(ctx, id, func(rec *meta.FileRecord) bool {
		prior = rec.Status
		if rec.Status == meta.FileDeleted || rec.Status == meta.FilePending {
			return false
		}
		rec.Status, rec.StatusReason = meta.FileDeleted, ""
		for i := range rec.Replicas {
			rec.Replicas[i].Status = meta.ReplicaDeleting
		}
		return true
	})
	switch {
	case errs.Is(err, errs.NotFound), err == nil && prior == meta.FileDeleted:
		return DeleteResult{}, fileNotFound(id)
	case err != nil:
		return DeleteResult{}, err
	case prior == meta.FilePending:
		return DeleteResult{}, errs.E(errs.Conflict, "file %s is still being uploaded", id)
	}
	s.opt.ContentCache.Remove(id) // the record already refuses reads; this frees the memory
	// A manifest's chunks become DELETED with it (the store does that when
	// the reconciler drops the manifest's row); each is then removed as any
	// blob is.
	chunks, err := s.opt.Store.ChunksOf(ctx, id)
	if err != nil {
		s.log.Warn("could not list the chunks of a deleted file; the repair loop will remove them", "file", id, "err", err)
	}
	out, err := s.opt.Reconciler.Reconcile(ctx, id)
	if err == nil && len(chunks) > 0 {
		out, err = s.removeChunks(ctx, id, chunks)
	}
	if err != nil {
		s.log.Warn("delete recorded but copies not yet removed; the repair loop will finish it", "file", id, "err", err)
		return DeleteResult{FileID: id, Status: string(meta.FileDeleted), Message: "copies will be removed by the repair loop"}, nil
	}
	res := DeleteResult{FileID: id, Status: string(meta.FileDeleted), Complete: out.Removed, PendingNodes: out.RemainingHolders}
	s.opt.Events.Deleted(res.Complete)
	if !res.Complete {
		res.Message = "some holders are unreachable; their copies will be removed when they return"
	}
	s.log.Info("file deleted", "file", id, "complete", res.Complete, "pending", res.PendingNodes)
	return res, nil
}

// chunkWorkers bounds the chunks of one file reconciled or verified at once.
const chunkWorkers = 4

// forChunks runs fn on every chunk, chunkWorkers at a time.
func forChunks(chunks []meta.FileRecord, fn func(i int, c meta.FileRecord)) {
	slots := make(chan struct{}, chunkWorkers)
	var wg sync.WaitGroup
	for i, c := range chunks {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			fn(i, c)
		})
	}
	wg.Wait()
}

// removeChunks has the reconciler remove the copies of a deleted file's
// chunks and sums up the outcome as one file's.
func (s *Service) removeChunks(ctx context.Context, id string, chunks []meta.FileRecord) (reconcile.Outcome, error) {
	var mu sync.Mutex
	out := reconcile.Outcome{FileID: id, Removed: true}
	var firstErr error
	pending := map[string]bool{}
	forChunks(chunks, func(_ int, c meta.FileRecord) {
		o, err := s.opt.Reconciler.Reconcile(ctx, c.ID)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out.Removed = out.Removed && err == nil && o.Removed
		for _, n := range o.RemainingHolders {
			pending[n] = true
		}
	})
	for n := range pending {
		out.RemainingHolders = append(out.RemainingHolders, n)
	}
	slices.Sort(out.RemainingHolders)
	return out, firstErr
}

// CopyCheck is the verification of one copy.
type CopyCheck struct {
	NodeID         string             `json:"nodeId"`
	Result         string             `json:"result"` // OK, CORRUPT, MISSING, UNREACHABLE
	StoredChecksum string             `json:"storedChecksum,omitempty"`
	ActualChecksum string             `json:"actualChecksum,omitempty"`
	Rebuilt        bool               `json:"rebuilt"`
	Status         meta.ReplicaStatus `json:"status,omitempty"` // the copy's status after verification
	Error          string             `json:"error,omitempty"`
}

// VerifyResult is the answer to a verification.
type VerifyResult struct {
	FileID        string          `json:"fileId"`
	Checksum      string          `json:"checksum"`
	Status        meta.FileStatus `json:"status"`
	HealthyCopies int             `json:"healthyCopies"`
	Copies        []CopyCheck     `json:"copies"`
	// Chunks reports each chunk of a chunked file, which has no copies of
	// its own (Copies is empty; HealthyCopies is the fewest any chunk has).
	Chunks []ChunkVerify `json:"chunks,omitempty"`
}

// ChunkVerify is the verification of one chunk.
type ChunkVerify struct {
	Index int `json:"index"`
	VerifyResult
}

// Verify re-hashes every copy on its node, quarantines copies whose bytes do
// not match, rebuilds them from a good copy and reports each one.
func (s *Service) Verify(ctx context.Context, id string) (VerifyResult, error) {
	rec, err := s.Metadata(ctx, id)
	if err != nil {
		return VerifyResult{}, err
	}
	if rec.Status == meta.FilePending {
		return VerifyResult{}, errs.E(errs.Conflict, "file %s is still being uploaded", id)
	}
	if rec.Manifest() {
		return s.verifyChunks(ctx, rec)
	}
	return s.verifyBlob(ctx, rec)
}

// verifyChunks verifies every chunk of a chunked file as a blob of its own,
// so a bad copy of one chunk is rebuilt alone.
func (s *Service) verifyChunks(ctx context.Context, rec meta.FileRecord) (VerifyResult, error) {
	res := VerifyResult{FileID: rec.ID, Checksum: rec.Checksum, Copies: []CopyCheck{}, Chunks: make([]ChunkVerify, len(rec.Chunks))}
	errsByChunk := make([]error, len(rec.Chunks))
	forChunks(rec.Chunks, func(i int, c meta.FileRecord) {
		r, err := s.verifyBlob(ctx, c)
		res.Chunks[i], errsByChunk[i] = ChunkVerify{Index: i, VerifyResult: r}, err
	})
	for i, err := range errsByChunk {
		if err != nil {
			return VerifyResult{}, errs.Wrap(errs.KindOf(err), err, "verify chunk %d of %s", i, rec.ID)
		}
	}
	after, err := s.withChunks(ctx, rec)
	if err != nil {
		return VerifyResult{}, err
	}
	res.Status = after.Status
	for i, c := range res.Chunks {
		if i == 0 || c.HealthyCopies < res.HealthyCopies {
			res.HealthyCopies = c.HealthyCopies
		}
	}
	return res, nil
}

// verifyBlob re-hashes every copy of one blob, a whole file or a chunk.
func (s *Service) verifyBlob(ctx context.Context, rec meta.FileRecord) (VerifyResult, error) {
	id := rec.ID
	checks := make([]CopyCheck, len(rec.Replicas))
	var wg sync.WaitGroup
	for i, c := range rec.Replicas {
		wg.Go(func() { checks[i] = s.check(ctx, rec.File, c.NodeID) })
	}
	wg.Wait()
	var bad []string
	for _, c := range checks {
		if c.Result == "CORRUPT" {
			bad = append(bad, c.NodeID)
			s.opt.Events.ChecksumMismatch(c.NodeID)
		}
	}
	s.opt.Events.Verified(len(bad))
	if len(bad) > 0 {
		s.log.Error("verify found corrupt copies; quarantining and rebuilding", "file", id, "nodes", bad)
		s.markCorrupt(ctx, id, bad)
	}
	if _, err := s.opt.Reconciler.Reconcile(ctx, id); err != nil {
		s.log.Warn("rebuild after verify failed; the repair loop will retry", "file", id, "err", err)
	}
	after, err := s.opt.Store.GetFile(ctx, id)
	if err != nil {
		return VerifyResult{}, err
	}
	for i := range checks {
		if r, ok := after.Replica(checks[i].NodeID); ok {
			checks[i].Status = r.Status
			checks[i].Rebuilt = checks[i].Result != "OK" && checks[i].Result != "UNREACHABLE" && r.Status == meta.ReplicaActive
		}
	}
	// Copies the reconciler placed on nodes that had none are reported too.
	for _, r := range after.Replicas {
		if _, seen := rec.Replica(r.NodeID); !seen {
			checks = append(checks, CopyCheck{NodeID: r.NodeID, Result: "MISSING", Rebuilt: r.Status == meta.ReplicaActive, Status: r.Status})
		}
	}
	return VerifyResult{FileID: id, Checksum: after.Checksum, Status: after.Status, HealthyCopies: after.ActiveCopies(), Copies: checks}, nil
}

func (s *Service) check(ctx context.Context, f meta.File, node string) CopyCheck {
	c := CopyCheck{NodeID: node}
	base, ok := s.opt.Cluster.BaseURL(node)
	if !ok {
		c.Result, c.Error = "UNREACHABLE", "node has no known address"
		return c
	}
	rh, err := s.opt.Nodes.Rehash(ctx, base, f.ID)
	switch {
	case errs.Is(err, errs.NotFound):
		c.Result = "MISSING"
	case err != nil:
		c.Result, c.Error = "UNREACHABLE", err.Error()
	default:
		c.StoredChecksum, c.ActualChecksum = rh.StoredChecksum, rh.ActualChecksum
		c.Result = "OK"
		// The recorded checksum counts as much as the bytes: a copy whose
		// sidecar is missing, empty or garbage would be refused by the node
		// on every read, so it is not a good copy however intact its bytes.
		if rh.ActualChecksum != f.Checksum || rh.StoredChecksum != f.Checksum || rh.Size != f.SizeBytes {
			c.Result = "CORRUPT"
		}
	}
	return c
}
