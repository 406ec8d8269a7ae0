// Package rules holds what both metadata stores (PostgreSQL and the embedded
// SQLite) must do identically, so the two cannot drift: input validation,
// timestamp precision, the default statuses of a listing, the translation of
// ring ranges into closed intervals, the matching of a new replica set against
// the stored one, and the errors with their API codes.
//
// It is used by internal/meta/postgres and internal/meta/sqlite only; callers
// of the metadata store use meta.Store.
package rules

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

// Time returns t as the stores keep it: UTC, truncated to whole microseconds
// (the precision of a PostgreSQL timestamp), so a value read back equals the
// value written, in either store.
func Time(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// TimePtr is Time for an optional timestamp; nil stays nil.
func TimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// Now is the current time at store precision.
func Now() time.Time { return Time(time.Now()) }

// CanonicalFileID reports whether id is a UUID in its canonical lower-case,
// hyphenated form: the only form a file ID takes, so that one file never has
// two spellings.
func CanonicalFileID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && len(id) == 36 && u.String() == id
}

// FileNotFound is the error for a file that does not exist. Its code,
// FILE_NOT_FOUND, lets the HTTP layer name what is missing without knowing
// which lookup failed.
func FileNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeFileNotFound, nil, "file %s not found", id)
}

// SessionNotFound is the error for an upload session that does not exist.
func SessionNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeUploadNotFound, nil, "upload session %s not found", id)
}

// CheckSession validates an upload session before it is stored.
func CheckSession(u *meta.UploadSession) error {
	switch {
	case !CanonicalFileID(u.ID):
		return errs.E(errs.Invalid, "upload session id %q is not a canonical lower-case UUID", u.ID)
	case u.ExpiresAt.IsZero():
		return errs.E(errs.Invalid, "upload session %s has no expiry", u.ID)
	}
	return nil
}

// CheckPart validates an attempt at a part.
func CheckPart(p *meta.UploadPart) error {
	switch {
	case !CanonicalFileID(p.PartID) || !CanonicalFileID(p.SessionID):
		return errs.E(errs.Invalid, "part %q of session %q: ids must be canonical lower-case UUIDs", p.PartID, p.SessionID)
	case p.Number < 1 || p.Number > 10000:
		return errs.E(errs.Invalid, "part number %d is outside 1..10000", p.Number)
	case p.SizeBytes < 0:
		return errs.E(errs.Invalid, "part %d: negative size", p.Number)
	}
	return nil
}

// NodeNotFound is the error for a storage node that does not exist.
func NodeNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeNodeNotFound, nil, "storage node %s not found", id)
}

// Unavailable is the error for a database that cannot be reached or did not
// answer in time; the API answers it with 503 METADATA_UNAVAILABLE.
func Unavailable(cause error, op string) error {
	return errs.WithCode(errs.Unavailable, errs.CodeMetadataUnavailable, cause, "metadata store unavailable: %s", op)
}

// Stale is the error for an update that names a version that is no longer
// the stored one.
func Stale(what, id string, version int64) error {
	return errs.E(errs.Conflict, "%s %s was changed by someone else (version %d is stale); re-read and retry", what, id, version)
}

var (
	nodeStatuses    = []meta.NodeStatus{meta.NodeHealthy, meta.NodeUnhealthy, meta.NodeDeregistered}
	fileStatuses    = []meta.FileStatus{meta.FilePending, meta.FileActive, meta.FileDegraded, meta.FileRebalancing, meta.FileFailed, meta.FileDeleted}
	replicaStatuses = []meta.ReplicaStatus{meta.ReplicaPending, meta.ReplicaActive, meta.ReplicaFailed, meta.ReplicaDeleting}
	// listedByDefault are the statuses a listing shows when it names none:
	// an upload in flight and a file being deleted are not shown.
	listedByDefault = []meta.FileStatus{meta.FileActive, meta.FileDegraded, meta.FileRebalancing, meta.FileFailed}
)

// FileStatuses lists every file status, in lifecycle order.
func FileStatuses() []meta.FileStatus { return slices.Clone(fileStatuses) }

// CheckNode validates n before it is written.
func CheckNode(n *meta.Node) error {
	switch {
	case n.ID == "":
		return errs.E(errs.Invalid, "storage node id is empty")
	case n.Host == "":
		return errs.E(errs.Invalid, "storage node %s: host is empty", n.ID)
	case n.Port < 1 || n.Port > 65535:
		return errs.E(errs.Invalid, "storage node %s: port %d is outside 1-65535", n.ID, n.Port)
	case !slices.Contains(nodeStatuses, n.Status):
		return errs.E(errs.Invalid, "storage node %s: unknown status %q", n.ID, n.Status)
	case n.ConsecutiveFailures < 0 || n.ConsecutiveSuccesses < 0:
		return errs.E(errs.Invalid, "storage node %s: negative probe counter", n.ID)
	case len(n.Zone) > MaxZoneBytes || (n.ZoneOverride != nil && len(*n.ZoneOverride) > MaxZoneBytes):
		return errs.E(errs.Invalid, "storage node %s: zone longer than %d bytes", n.ID, MaxZoneBytes)
	case !(n.Weight >= 0) || math.IsInf(n.Weight, 0):
		return errs.E(errs.Invalid, "storage node %s: weight %v is not a decimal >= 0", n.ID, n.Weight)
	case n.WeightOverride != nil && (!(*n.WeightOverride > 0) || math.IsInf(*n.WeightOverride, 0)):
		return errs.E(errs.Invalid, "storage node %s: weight override %v is not a decimal > 0", n.ID, *n.WeightOverride)
	}
	return nil
}

// MaxZoneBytes bounds a zone name.
const MaxZoneBytes = 255

// NormalizeNode brings n's timestamps to store precision.
func NormalizeNode(n *meta.Node) {
	n.RegisteredAt = Time(n.RegisteredAt)
	n.LastCheckAt = TimePtr(n.LastCheckAt)
	n.LastHealthyAt = TimePtr(n.LastHealthyAt)
}

// CheckFile validates rec before it is written: a canonical ID, known
// statuses, a non-negative size and ring position, a replication factor of at
// least one, and replicas that name distinct nodes and, if they name a file,
// this one.
func CheckFile(rec *meta.FileRecord) error {
	f := &rec.File
	switch {
	case !CanonicalFileID(f.ID):
		return errs.E(errs.Invalid, "file id %q is not a canonical lower-case UUID", f.ID)
	case !slices.Contains(fileStatuses, f.Status):
		return errs.E(errs.Invalid, "file %s: unknown status %q", f.ID, f.Status)
	case f.SizeBytes < 0:
		return errs.E(errs.Invalid, "file %s: negative size %d", f.ID, f.SizeBytes)
	case f.RingPosition < 0:
		return errs.E(errs.Invalid, "file %s: negative ring position %d", f.ID, f.RingPosition)
	case f.ReplicationFactor < 1:
		return errs.E(errs.Invalid, "file %s: replication factor %d is below 1", f.ID, f.ReplicationFactor)
	case f.IsChunk() && !CanonicalFileID(f.Chunk.ParentID):
		return errs.E(errs.Invalid, "chunk %s: parent %q is not a canonical UUID", f.ID, f.Chunk.ParentID)
	case f.Chunk.Part < 0 || f.Chunk.Index < 0 || f.Chunk.Offset < 0 || f.ChunkCount < 0:
		return errs.E(errs.Invalid, "file %s: negative chunk position", f.ID)
	case !f.IsChunk() && f.Chunk != (meta.ChunkRef{}):
		return errs.E(errs.Invalid, "file %s: a chunk position without a parent", f.ID)
	case f.IsChunk() && f.Manifest():
		return errs.E(errs.Invalid, "file %s: a chunk cannot have chunks", f.ID)
	case f.Manifest() && len(rec.Replicas) > 0:
		return errs.E(errs.Invalid, "file %s: a manifest has no copies of its own", f.ID)
	}
	seen := make(map[string]bool, len(rec.Replicas))
	for _, r := range rec.Replicas {
		switch {
		case r.NodeID == "":
			return errs.E(errs.Invalid, "file %s: a replica names no node", f.ID)
		case seen[r.NodeID]:
			return errs.E(errs.Invalid, "file %s: two replicas on node %s", f.ID, r.NodeID)
		case r.FileID != "" && r.FileID != f.ID:
			return errs.E(errs.Invalid, "file %s: a replica belongs to file %s", f.ID, r.FileID)
		case !slices.Contains(replicaStatuses, r.Status):
			return errs.E(errs.Invalid, "file %s: replica on %s has unknown status %q", f.ID, r.NodeID, r.Status)
		}
		seen[r.NodeID] = true
	}
	return nil
}

// CloneRecord returns a deep copy of rec, its replicas sorted by node ID and
// stamped with the file's ID, so a store can fill it in and hand it back to the
// caller only when the write has committed.
func CloneRecord(rec *meta.FileRecord) meta.FileRecord {
	c := *rec
	c.Replicas = slices.Clone(rec.Replicas)
	for i := range c.Replicas {
		c.Replicas[i].FileID = c.ID
	}
	SortReplicas(c.Replicas)
	return c
}

// SortReplicas orders replicas by node ID, the order every read returns.
func SortReplicas(rs []meta.Replica) {
	slices.SortFunc(rs, func(a, b meta.Replica) int { return cmp.Compare(a.NodeID, b.NodeID) })
}

// MergeReplicas matches the wanted replica set against the stored one by node
// ID. A wanted copy whose node already holds one with the same status takes
// the stored row as it is. The result names the positions in wanted of copies
// whose status changed (their ID and CreatedAt already filled in from the
// stored row) and of copies to insert, and the IDs of stored rows no longer
// wanted.
func MergeReplicas(stored, wanted []meta.Replica) (changed, added []int, removed []int64) {
	byNode := make(map[string]meta.Replica, len(stored))
	for _, r := range stored {
		byNode[r.NodeID] = r
	}
	for i := range wanted {
		w := &wanted[i]
		old, ok := byNode[w.NodeID]
		if !ok {
			added = append(added, i)
			continue
		}
		delete(byNode, w.NodeID)
		if old.Status == w.Status {
			*w = old
			continue
		}
		w.ID, w.CreatedAt = old.ID, old.CreatedAt
		changed = append(changed, i)
	}
	for _, r := range stored {
		if _, gone := byNode[r.NodeID]; gone {
			removed = append(removed, r.ID)
		}
	}
	return changed, added, removed
}

// ListStatuses returns the statuses a listing selects: q's, or the default
// set when q names none. An unknown status is Invalid.
func ListStatuses(statuses []meta.FileStatus) ([]string, error) {
	if len(statuses) == 0 {
		statuses = listedByDefault
	}
	return StatusStrings(statuses)
}

// StatusStrings converts file statuses to their stored form, refusing an
// unknown one.
func StatusStrings(statuses []meta.FileStatus) ([]string, error) {
	out := make([]string, 0, len(statuses))
	for _, s := range statuses {
		if !slices.Contains(fileStatuses, s) {
			return nil, errs.E(errs.Invalid, "unknown file status %q", s)
		}
		out = append(out, string(s))
	}
	return out, nil
}

// CheckPage validates a listing's offset and limit.
func CheckPage(q meta.FileQuery) error {
	if q.Offset < 0 {
		return errs.E(errs.Invalid, "negative offset %d", q.Offset)
	}
	if q.Limit < 1 {
		return errs.E(errs.Invalid, "limit %d is below 1", q.Limit)
	}
	return nil
}

// CheckFilesAfter validates a FilesAfter page: the cursor is empty or a
// canonical file ID, and the limit positive.
func CheckFilesAfter(after string, limit int) error {
	if after != "" && !CanonicalFileID(after) {
		return errs.E(errs.Invalid, "cursor %q is not a canonical file id", after)
	}
	if limit < 1 {
		return errs.E(errs.Invalid, "limit %d is below 1", limit)
	}
	return nil
}

// CheckFileIDs validates a list of file IDs: each canonical.
func CheckFileIDs(ids []string) error {
	for _, id := range ids {
		if !CanonicalFileID(id) {
			return errs.E(errs.Invalid, "file id %q is not a canonical UUID", id)
		}
	}
	return nil
}

// CheckStateKey validates the key of a coordinator state record.
func CheckStateKey(key string) error {
	if key == "" {
		return errs.E(errs.Invalid, "state key is empty")
	}
	return nil
}

// StateNotFound is the error for a state key with no record.
func StateNotFound(key string) error {
	return errs.E(errs.NotFound, "no state is stored under %q", key)
}

// CheckLease validates a lease request.
func CheckLease(name, owner string, ttl time.Duration) error {
	switch {
	case name == "":
		return errs.E(errs.Invalid, "lease name is empty")
	case owner == "":
		return errs.E(errs.Invalid, "lease %s: owner is empty", name)
	case ttl < time.Microsecond:
		return errs.E(errs.Invalid, "lease %s: ttl %s is below one microsecond", name, ttl)
	}
	return nil
}

// CheckPruneGrace validates PruneLeases' grace period.
func CheckPruneGrace(grace time.Duration) error {
	if grace < 0 {
		return errs.E(errs.Invalid, "lease prune grace %s is negative", grace)
	}
	return nil
}

// CheckEpoch validates the epoch a rebalance reports as completed.
func CheckEpoch(epoch int64) error {
	if epoch < 0 {
		return errs.E(errs.Invalid, "rebalance epoch %d is negative", epoch)
	}
	return nil
}

// NoEpochs is the error for a schema whose one row of epochs is missing,
// which only a hand edit of the database can cause.
func NoEpochs() error {
	return errs.E(errs.Other, "metadata store: the rebalance_epochs row is missing; restore it with (1, 0, 0)")
}

// Interval is a closed interval [Lo, Hi] of ring positions.
type Interval struct{ Lo, Hi int64 }

// Intervals turns half-open ring ranges (From, To], some of which may wrap
// past the end of the ring, into sorted, disjoint closed intervals that cover
// the same positions, so a query can join against them without returning a
// file twice. From == To is the whole ring. A negative bound is Invalid.
func Intervals(ranges []meta.PositionRange) ([]Interval, error) {
	iv := make([]Interval, 0, len(ranges)+1)
	for _, r := range ranges {
		if r.From < 0 || r.To < 0 {
			return nil, errs.E(errs.Invalid, "ring range (%d, %d] has a negative bound", r.From, r.To)
		}
		if r.From < r.To {
			iv = append(iv, Interval{r.From + 1, r.To})
			continue
		}
		// Wrapping: (From, max] ∪ [0, To]. The first part is empty when From
		// is the last position of the ring.
		if r.From < math.MaxInt64 {
			iv = append(iv, Interval{r.From + 1, math.MaxInt64})
		}
		iv = append(iv, Interval{0, r.To})
	}
	slices.SortFunc(iv, func(a, b Interval) int { return cmp.Compare(a.Lo, b.Lo) })
	merged := iv[:0]
	for _, x := range iv {
		n := len(merged)
		// Adjacent intervals merge too; Hi+1 cannot overflow when Hi < x.Lo.
		if n > 0 && (merged[n-1].Hi >= x.Lo || merged[n-1].Hi+1 == x.Lo) {
			merged[n-1].Hi = max(merged[n-1].Hi, x.Hi)
			continue
		}
		merged = append(merged, x)
	}
	return merged, nil
}

// NewRecord is a copy of rec as CreateFile stores it: version 1, its times
// (now, unless given) in the stores' precision.
func NewRecord(rec *meta.FileRecord) meta.FileRecord {
	c := CloneRecord(rec)
	t := Now()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = t
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = t
	}
	c.CreatedAt, c.UpdatedAt = Time(c.CreatedAt), Time(c.UpdatedAt)
	c.Version = 1
	return c
}

// CreateFailed says what a Conflict from inserting file id means; other
// errors it returns as they are.
func CreateFailed(id string, err error) error {
	if errs.Is(err, errs.Conflict) {
		return errs.Wrap(errs.Conflict, err, "file %s or its idempotency key already exists", id)
	}
	return err
}
