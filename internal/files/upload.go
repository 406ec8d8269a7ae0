package files

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// uploadTimeout bounds the node writes of one upload once its bytes are
// spooled; they run detached from the client's request so that a client that
// hangs up cannot leave an upload half-recorded.
const uploadTimeout = 6 * time.Hour

// UploadRequest is one file to store.
type UploadRequest struct {
	FileName       string
	ContentType    string
	Body           io.Reader
	IdempotencyKey string
	// Object, when set, names the S3 object the new file is to become.
	// It is called once the body has been read whole and the copies
	// written, with the file about to be committed, and the key moves to
	// the file in the transaction of the file's final write
	// (meta.Store.UpdateFileAndPutObject): the key and the complete file
	// become visible together, at the cost of one commit, not two. A body
	// stored as chunks (over ChunkSize) is committed without it, and its
	// result's Object is nil: the caller moves the key itself.
	Object func(meta.File) meta.Object
}

// UploadResult is the answer to an upload.
type UploadResult struct {
	FileID            string          `json:"fileId"`
	FileName          string          `json:"fileName"`
	ContentType       string          `json:"contentType"`
	SizeBytes         int64           `json:"sizeBytes"`
	Checksum          string          `json:"checksum"`
	Status            meta.FileStatus `json:"status"`
	PrimaryNode       string          `json:"primaryNode"`
	Replicas          []string        `json:"replicas"`
	ReplicationFactor int             `json:"replicationFactor"`
	CreatedAt         time.Time       `json:"createdAt"`
	Reason            string          `json:"reason,omitempty"`
	// Replayed is true when an Idempotency-Key matched an earlier upload of
	// the same bytes and this result is that upload's.
	Replayed bool `json:"-"`
	// Object is the object the final write bound to the file (nil when it
	// bound none) as stored, and Replaced the file its key held before,
	// which the caller deletes.
	Object   *meta.Object `json:"-"`
	Replaced string       `json:"-"`
}

// ResultOf describes a stored file as an upload result: the primary and the
// ids of the other nodes holding an ACTIVE copy.
func ResultOf(rec meta.FileRecord) UploadResult {
	others := []string{}
	for _, r := range rec.Replicas {
		if r.Status == meta.ReplicaActive && r.NodeID != rec.PrimaryNodeID {
			others = append(others, r.NodeID)
		}
	}
	return UploadResult{
		FileID: rec.ID, FileName: rec.Name, ContentType: rec.ContentType,
		SizeBytes: rec.SizeBytes, Checksum: rec.Checksum, Status: rec.Status,
		PrimaryNode: rec.PrimaryNodeID, Replicas: others,
		ReplicationFactor: rec.ReplicationFactor, CreatedAt: rec.CreatedAt, Reason: rec.StatusReason,
	}
}

// Upload spools the body while hashing it, records a PENDING file, writes the
// copies in parallel (each failing over down the preference list; the
// primary is the first node in ring order that took one), and commits the
// outcome: ACTIVE with replication-factor copies,
// DEGRADED with fewer (and the reason), or nothing at all when no node took
// the bytes. With req.Object, that commit also moves an S3 key to the file.
func (s *Service) Upload(ctx context.Context, req UploadRequest) (UploadResult, error) {
	if err := validateIdempotencyKey(req.IdempotencyKey); err != nil {
		return UploadResult{}, err
	}
	if s.opt.Cluster.Ring().Len() == 0 {
		return UploadResult{}, noHealthyNodes()
	}
	// A body larger than a chunk is stored as chunks while it streams; the
	// spool holds only its first chunk and a byte.
	limit := min(s.opt.MaxFileSize, s.opt.ChunkSize)
	sp, over, err := s.spoolAtMost(req.Body, limit)
	if err != nil {
		return UploadResult{}, err
	}
	defer sp.remove()
	s.opt.Events.Spooled(sp.f == nil)
	if over {
		if limit == s.opt.MaxFileSize {
			return UploadResult{}, tooLarge(s.opt.MaxFileSize)
		}
		if req.IdempotencyKey != "" {
			release, res, done, err := s.claimKey(ctx, req.IdempotencyKey, sp, req.Body)
			if done {
				return res, err
			}
			defer release()
		}
		return s.uploadChunked(ctx, req, io.MultiReader(sp.reader(), req.Body))
	}

	// From here on the work is the cluster's, not the client's: finish it even
	// if the client goes away, so no upload is left half-recorded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uploadTimeout)
	defer cancel()

	rec := meta.FileRecord{File: meta.File{
		ID: uuid.NewString(), Name: cleanFileName(req.FileName), ContentType: cleanContentType(req.ContentType),
		IdempotencyKey: req.IdempotencyKey,
	}}
	w, err := s.storeBlob(ctx, &rec, sp, req.Object)
	if err != nil {
		if req.IdempotencyKey != "" && errs.Is(err, errs.Conflict) {
			return s.replay(ctx, req.IdempotencyKey, sp.sum, sp.size)
		}
		return UploadResult{}, err
	}
	id := rec.ID
	if sp.mem != nil && s.cacheable(rec.File) {
		// These bytes were hashed to make the file's checksum, so they are
		// verified by construction; the spool's buffer goes back to its pool,
		// so the cache gets a copy.
		s.opt.ContentCache.Put(id, rec.Checksum, bytes.Clone(sp.mem))
	}
	s.opt.Events.Uploaded(rec.Status, rec.SizeBytes)
	s.log.Info("upload finished", "file", id, "name", rec.Name, "bytes", rec.SizeBytes, "status", rec.Status,
		"primary", rec.PrimaryNodeID, "copies", w.copies(), "reason", rec.StatusReason)
	res := ResultOf(rec)
	res.Object, res.Replaced = w.object, w.replaced
	return res, nil
}

// storeBlob stores sp's bytes as the blob rec describes (its ID, name,
// content type and idempotency key set by the caller): it writes the copies
// in parallel (each failing over down the preference list of rec's own id;
// the primary is the first node in ring order that took one) and commits the
// outcome: ACTIVE with replication-factor copies, DEGRADED with fewer (and
// the reason), or nothing at all when no node took the bytes. A whole file
// and a chunk are stored alike. With object set, the outcome's commit moves
// the key it names to the file (commit).
//
// While the copies are written the file is PENDING, so that a coordinator
// crash leaves nothing the repair loop does not adopt or remove. A chunk and
// an upload with an Idempotency-Key (whose row claims the key) record the
// PENDING row before their first copy. Other uploads record it only if they
// are still writing after PendingRecordDelay: most take milliseconds and
// then make one metadata write, not two. A crash before
// such an upload has any row leaves copies that no file lists, which the
// anti-entropy sweep removes after its orphan grace (ARCHITECTURE.md,
// "Upload"). A Conflict from recording the PENDING row is returned
// as it is, for the idempotency check.
func (s *Service) storeBlob(ctx context.Context, rec *meta.FileRecord, sp *spooled, object func(meta.File) meta.Object) (*uploadWrite, error) {
	r := s.opt.Cluster.Ring()
	if r.Len() == 0 {
		return nil, noHealthyNodes()
	}
	id := rec.ID
	rf := s.opt.ReplicationFactor
	candidates := r.Preference(id, len(r.Nodes()))
	plan := candidates[:min(rf, len(candidates))]
	rec.SizeBytes, rec.Checksum, rec.Status = sp.size, sp.sum, meta.FilePending
	rec.ReplicationFactor, rec.RingPosition = rf, ring.Position(id)
	rec.Replicas = nil
	for _, n := range plan {
		rec.Replicas = append(rec.Replicas, meta.Replica{FileID: id, NodeID: n, Status: meta.ReplicaPending})
	}
	w := &uploadWrite{s: s, id: id, rec: rec, sp: sp, rg: r}
	if s.opt.PendingRecordDelay <= 0 || rec.IdempotencyKey != "" || rec.IsChunk() {
		if err := s.opt.Store.CreateFile(ctx, rec); err != nil {
			return nil, err
		}
		w.recorded = true
	} else {
		// The file's creation time is the upload's start, whenever its
		// row is written.
		rec.CreatedAt = time.Now()
	}
	// At the default level an upload logs one line, when it is done (and the
	// access log one more): a line costs a write of its own, and small
	// uploads come by the thousand a second. A large upload's chunks are
	// many; its part and session log the summary.
	if rec.IsChunk() {
		s.log.Debug("chunk upload started", "chunk", id, "parent", rec.Chunk.ParentID, "index", rec.Chunk.Index, "bytes", sp.size, "plan", plan)
	} else {
		s.log.Debug("upload started", "file", id, "name", rec.Name, "bytes", sp.size, "plan", plan)
	}

	stopTouch := w.keepAlive(ctx)
	w.run(ctx, candidates)
	stopTouch()

	if w.primary == "" {
		if w.recorded {
			if err := s.opt.Store.DeleteFile(ctx, id); err != nil {
				s.log.Error("upload failed and its PENDING row could not be removed; the repair loop will discard it", "file", id, "err", err)
			}
		}
		s.log.Warn("upload failed: no storage node accepted the file", "file", id, "failures", w.reason())
		return nil, errs.E(errs.Unavailable, "no storage node accepted the file (%s)", w.reason())
	}
	w.finish(rf, len(candidates))
	if err := w.commit(ctx, object); err != nil {
		return nil, err
	}
	return w, nil
}

// commit writes the upload's outcome: the first row of an upload that has
// none yet, else the update of its PENDING row. With object set, the key it
// names moves to the file in the same transaction. When that write fails
// (its bucket was deleted while the bytes were uploading, most likely) the
// upload fails and the key keeps what it held: the file is committed
// without the key and deleted at once through the file delete, which
// removes its copies, as a file a key no longer holds is. Should that
// commit fail too, the PENDING row is left to the repair loop, as any
// upload's whose commit failed.
func (w *uploadWrite) commit(ctx context.Context, object func(meta.File) meta.Object) error {
	store := w.s.opt.Store
	if !w.recorded {
		return w.commitFirst(ctx, object)
	}
	if object == nil {
		if err := store.UpdateFile(ctx, w.rec); err != nil {
			return errs.Wrap(errs.KindOf(err), err, "commit upload %s", w.id)
		}
		return nil
	}
	o := object(w.rec.File)
	replaced, err := store.UpdateFileAndPutObject(ctx, w.rec, &o)
	if err == nil {
		w.object, w.replaced = &o, replaced
		return nil
	}
	if uerr := store.UpdateFile(ctx, w.rec); uerr != nil {
		return errs.Wrap(errs.KindOf(err), err, "commit upload %s as %s/%s", w.id, o.Bucket, o.Key)
	}
	if _, derr := w.s.Delete(ctx, w.id); derr != nil {
		w.s.log.Warn("could not delete an upload whose key could not be recorded; it stays as a file without a key",
			"file", w.id, "bucket", o.Bucket, "key", o.Key, "err", derr)
	}
	return err
}

// commitFirst writes the outcome of an upload that has no row: its only
// metadata write, which with object set also moves the key it names to the
// file. When the write fails (for an object, its bucket deleted while the
// bytes were uploading, say), no file lists the copies just written, so
// they are removed now; a copy that cannot be is an orphan the anti-entropy
// sweep removes later. A PENDING row whose write failed with an unclear
// outcome (keep) may exist after all: then the outcome is written over it,
// and should that fail too, the row is left to the repair loop.
func (w *uploadWrite) commitFirst(ctx context.Context, object func(meta.File) meta.Object) error {
	store := w.s.opt.Store
	var o *meta.Object
	if object != nil {
		obj := object(w.rec.File)
		o = &obj
	}
	write := func() (err error) {
		if o == nil {
			return store.CreateFile(ctx, w.rec)
		}
		w.replaced, err = store.CreateFileAndPutObject(ctx, w.rec, o)
		return err
	}
	err := write()
	if errs.Is(err, errs.Conflict) && w.tried {
		stored, gerr := store.GetFile(ctx, w.id)
		if gerr == nil {
			w.rec.Version = stored.Version
			if o == nil {
				err = store.UpdateFile(ctx, w.rec)
			} else {
				w.replaced, err = store.UpdateFileAndPutObject(ctx, w.rec, o)
			}
			if err != nil {
				return errs.Wrap(errs.KindOf(err), err, "commit upload %s", w.id)
			}
		}
	}
	if err == nil {
		w.object = o
		return nil
	}
	for _, r := range w.rec.Replicas {
		if r.Status != meta.ReplicaActive {
			continue
		}
		base, ok := w.s.opt.Cluster.BaseURL(r.NodeID)
		if !ok {
			continue
		}
		if derr := w.s.opt.Nodes.Delete(ctx, base, w.id); derr != nil {
			w.s.log.Warn("could not remove a copy of an upload whose commit failed; the anti-entropy sweep will", "file", w.id, "node", r.NodeID, "err", derr)
		}
	}
	if o != nil {
		return err // the key's error, as the S3 API answers it
	}
	return errs.Wrap(errs.KindOf(err), err, "commit upload %s", w.id)
}

// replay answers a repeated Idempotency-Key with the first upload's result.
func (s *Service) replay(ctx context.Context, key, sum string, size int64) (UploadResult, error) {
	prev, err := s.opt.Store.FileByIdempotencyKey(ctx, key)
	if err != nil {
		return UploadResult{}, err
	}
	switch {
	case prev.Status == meta.FilePending:
		return UploadResult{}, errs.E(errs.Conflict, "an upload with this Idempotency-Key is still in progress")
	case prev.Status == meta.FileDeleted:
		return UploadResult{}, errs.E(errs.Conflict, "the file uploaded with this Idempotency-Key (%s) has been deleted", prev.ID)
	case prev.Checksum != sum || prev.SizeBytes != size:
		return UploadResult{}, errs.E(errs.Conflict, "this Idempotency-Key was used for different content (file %s)", prev.ID)
	}
	res := ResultOf(prev)
	res.Replayed = true
	return res, nil
}

// keepAlive keeps the upload's PENDING row while its copies are written, so
// the repair loop can tell a live upload from one abandoned by a crashed
// coordinator: it records the row after PendingRecordDelay if the upload has
// none yet, and touches it every PendingTouch after that. stop returns once
// no write of the row is under way, so the upload's commit knows whether the
// row exists.
func (w *uploadWrite) keepAlive(ctx context.Context) (stop func()) {
	s := w.s
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		wait := s.opt.PendingTouch
		if !w.recorded {
			wait = s.opt.PendingRecordDelay
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			// The row's writes use the upload's context, not one that
			// stop cancels, so their outcome is known when stop returns.
			if err := w.keep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("could not record a running upload", "file", w.id, "err", err)
			}
			t.Reset(s.opt.PendingTouch)
		}
	}()
	return func() { close(quit); <-done }
}

// keep records the upload's PENDING row, with every copy planned so far,
// or touches it once it exists.
func (w *uploadWrite) keep(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.recorded {
		return w.s.opt.Store.TouchFile(ctx, w.id)
	}
	// The store changes rec only when the write succeeds.
	w.tried = true
	if err := w.s.opt.Store.CreateFile(ctx, w.rec); err != nil {
		return err
	}
	w.recorded = true
	w.s.log.Debug("slow upload recorded as PENDING", "file", w.id, "copies_planned", len(w.rec.Replicas))
	return nil
}

// uploadWrite is the state of one upload's node writes.
type uploadWrite struct {
	s   *Service
	sp  *spooled
	id  string     // the file's id, read by writers without the lock
	mu  sync.Mutex // guards rec (the store rewrites it on update), results, next, recorded and tried while replica writers run
	rec *meta.FileRecord
	// recorded says the file's PENDING row exists; tried, that keep
	// attempted to write it (an attempt that failed may still have
	// landed).
	recorded, tried bool

	primary string
	results []writeResult
	// queue is the preference list the writers take their nodes from, in
	// order, and next the first node not yet taken; held counts, per
	// failure domain of rg, the writers writing to it or done there.
	queue []string
	next  int
	rg    *ring.Ring
	held  map[string]int

	// object is the key commit moved to the file, and replaced the file
	// that key held before.
	object   *meta.Object
	replaced string
}

type writeResult struct {
	node string
	err  error
}

// run writes replication-factor copies at once, each writer starting on its
// own node of the preference list and moving further down the list when a
// write fails, so a dead node costs one failed attempt, not a round. The
// primary is the first node in preference order that took a copy — the node
// a primary-first, replicas-after write would have chosen — while the upload
// waits for one write time instead of two. The first writer does not wait
// for a copy slot, so an upload always makes progress however busy the
// others keep REPLICA_WRITE_CONCURRENCY.
func (w *uploadWrite) run(ctx context.Context, candidates []string) {
	w.queue = slices.Clone(candidates)
	w.held = map[string]int{}
	workers := min(w.s.opt.ReplicationFactor, len(candidates))
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { w.writer(ctx, i > 0) })
	}
	wg.Wait()
	took := map[string]bool{}
	for _, r := range w.results {
		if r.err == nil {
			took[r.node] = true
		}
	}
	for _, n := range candidates {
		if took[n] {
			w.primary = n
			break
		}
	}
}

// writer places one copy: it takes the next candidate off the queue and
// tries it, moving further down the preference list after a failure.
func (w *uploadWrite) writer(ctx context.Context, needSlot bool) {
	for {
		n, ok := w.take()
		if !ok {
			return
		}

		if needSlot {
			w.s.copySlot <- struct{}{}
		}
		err := w.write(ctx, n)
		if needSlot {
			<-w.s.copySlot
		}

		w.mu.Lock()
		w.results = append(w.results, writeResult{n, err})
		if err != nil {
			w.held[w.rg.Domain(n)]--
		}
		w.mu.Unlock()
		if err == nil {
			return
		}
	}
}

// take hands a writer its next node: the first one left in the queue whose
// failure domain no other writer holds, or the first one left when every
// domain in the queue is held. The preference list already puts one node
// of each zone first, so the writers start on distinct zones; take keeps
// them apart when a write fails, trying the failed node's zone-mate before
// a node of a zone that has a copy. Without zones every domain is one node
// and take follows the list.
func (w *uploadWrite) take() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next >= len(w.queue) {
		return "", false
	}
	rest := w.queue[w.next:]
	if i := slices.IndexFunc(rest, func(n string) bool { return w.held[w.rg.Domain(n)] == 0 }); i > 0 {
		n := rest[i]
		copy(rest[1:i+1], rest[:i])
		rest[0] = n
	}
	n := w.queue[w.next]
	w.next++
	w.held[w.rg.Domain(n)]++
	return n, true
}

// write stores one copy on node n from the spool. A node outside the plan is
// first recorded as PENDING, so that a coordinator crash can never leave a
// copy the metadata does not know of.
func (w *uploadWrite) write(ctx context.Context, n string) error {
	if err := w.plan(ctx, n); err != nil {
		return err
	}
	base, ok := w.s.opt.Cluster.BaseURL(n)
	if !ok {
		return errs.E(errs.Unavailable, "node %s has no known address", n)
	}
	_, _, err := w.s.opt.Nodes.Put(ctx, base, w.id, w.sp.sum, w.sp.size, w.sp.reader())
	if err != nil {
		w.s.log.Warn("copy write failed", "file", w.id, "node", n, "err", err)
	}
	return err
}

func (w *uploadWrite) plan(ctx context.Context, n string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.ContainsFunc(w.rec.Replicas, func(r meta.Replica) bool { return r.NodeID == n }) {
		return nil
	}
	w.rec.Replicas = append(w.rec.Replicas, meta.Replica{FileID: w.id, NodeID: n, Status: meta.ReplicaPending})
	if !w.recorded {
		return nil // the row, when it is written, lists the node
	}
	if err := w.s.opt.Store.UpdateFile(ctx, w.rec); err != nil {
		w.rec.Replicas = w.rec.Replicas[:len(w.rec.Replicas)-1]
		return errs.Wrap(errs.KindOf(err), err, "record planned copy on %s", n)
	}
	return nil
}

// finish turns the write results into the file's final state.
func (w *uploadWrite) finish(rf, ringNodes int) {
	ok := map[string]bool{}
	for _, r := range w.results {
		if r.err == nil {
			ok[r.node] = true
		}
	}
	for i := range w.rec.Replicas {
		if ok[w.rec.Replicas[i].NodeID] {
			w.rec.Replicas[i].Status = meta.ReplicaActive
		} else {
			w.rec.Replicas[i].Status = meta.ReplicaFailed
		}
	}
	w.rec.PrimaryNodeID = w.primary
	if len(ok) >= rf {
		w.rec.Status, w.rec.StatusReason = meta.FileActive, ""
		return
	}
	w.rec.Status = meta.FileDegraded
	var why []string
	if ringNodes < rf {
		why = append(why, fmt.Sprintf("only %d node(s) on the ring for replication factor %d", ringNodes, rf))
	}
	if f := w.reason(); f != "" {
		why = append(why, f)
	}
	w.rec.StatusReason = fmt.Sprintf("%d of %d copies written: %s", len(ok), rf, strings.Join(why, "; "))
}

// reason names each node that did not take a copy and why.
func (w *uploadWrite) reason() string {
	var parts []string
	for _, r := range w.results {
		if r.err != nil {
			parts = append(parts, r.node+": "+r.err.Error())
		}
	}
	return strings.Join(parts, "; ")
}

func (w *uploadWrite) copies() int {
	n := 0
	for _, r := range w.results {
		if r.err == nil {
			n++
		}
	}
	return n
}

func noHealthyNodes() error {
	return errs.WithCode(errs.Unavailable, errs.CodeNoHealthyNodes, nil, "no storage node is on the ring")
}

// ValidateFileID accepts only canonical lower-case UUID strings, the form
// dfs gives every file.
func ValidateFileID(id string) error {
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return errs.E(errs.Invalid, "invalid file id %q: expected a lower-case UUID", truncate(id, 80))
	}
	return nil
}

func validateIdempotencyKey(k string) error {
	if k == "" {
		return nil
	}
	if len(k) > 255 {
		return errs.E(errs.Invalid, "Idempotency-Key is longer than 255 characters")
	}
	for _, c := range k {
		if c < 0x21 || c > 0x7e {
			return errs.E(errs.Invalid, "Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return nil
}

// cleanFileName keeps the last path element of a client-supplied name, drops
// control characters and bounds its length; an empty result becomes "file".
func cleanFileName(name string) string {
	name = strings.ReplaceAll(name, "\\", "/")
	name = path.Base(name)
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "_")
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "" || name == "." || name == "/" || name == ".." {
		return "file"
	}
	return truncate(name, 255)
}

// cleanContentType keeps a syntactically valid media type and falls back to
// application/octet-stream.
func cleanContentType(ct string) string {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !strings.Contains(mt, "/") {
		return "application/octet-stream"
	}
	return mime.FormatMediaType(mt, params)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
