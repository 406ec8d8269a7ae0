package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/ring"
)

// MaxPartSize is the largest part of an upload session (5 GiB, as S3's).
const MaxPartSize = 5 << 30

// MaxPartNumber is the highest part number of an upload session.
const MaxPartNumber = 10000

// SessionSpec describes the file an upload session will make.
type SessionSpec struct {
	FileName, ContentType string
	// ExpectedSHA256 is an optional whole-file checksum checked at Complete.
	ExpectedSHA256 string
}

// Session is a resumable upload. Its ID is not the ID of the file it makes.
type Session struct {
	ID             string    `json:"uploadId"`
	FileName       string    `json:"fileName"`
	ContentType    string    `json:"contentType"`
	ExpectedSHA256 string    `json:"expectedChecksum,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
	// ChunkSize is the coordinator's CHUNK_SIZE: a file at or below it is
	// stored whole by one upload, so a client can send it that way instead.
	ChunkSize int64 `json:"chunkSize,omitempty"`
}

// Part is one received part of a session.
type Part struct {
	Number    int       `json:"partNumber"`
	SizeBytes int64     `json:"sizeBytes"`
	SHA256    string    `json:"checksum"`
	MD5       string    `json:"md5,omitempty"` // empty when skipped (PartOptions)
	CreatedAt time.Time `json:"createdAt"`
}

func (s *Service) sessionOf(u meta.UploadSession) Session {
	return Session{ID: u.ID, FileName: u.FileName, ContentType: u.ContentType, ExpectedSHA256: u.ExpectedSHA256,
		CreatedAt: u.CreatedAt, ExpiresAt: u.ExpiresAt, ChunkSize: s.opt.ChunkSize}
}

func uploadNotFound(id string) error {
	return errs.WithCode(errs.NotFound, errs.CodeUploadNotFound, nil, "upload session %s not found", truncate(id, 80))
}

// checkSHA256 accepts an empty string or 64 hex digits, and lower-cases it.
func checkSHA256(sum, what string) (string, error) {
	sum = strings.ToLower(strings.TrimSpace(sum))
	if sum == "" {
		return "", nil
	}
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return "", errs.E(errs.Invalid, "%s must be a SHA-256 in hex (64 digits)", what)
	}
	return sum, nil
}

// CreateSession starts an upload session that lives for SessionTTL.
func (s *Service) CreateSession(ctx context.Context, spec SessionSpec) (Session, error) {
	want, err := checkSHA256(spec.ExpectedSHA256, "the expected checksum")
	if err != nil {
		return Session{}, err
	}
	now := s.opt.Now()
	u := meta.UploadSession{
		ID: uuid.NewString(), FileName: cleanFileName(spec.FileName), ContentType: cleanContentType(spec.ContentType),
		ExpectedSHA256: want, CreatedAt: now, ExpiresAt: now.Add(s.opt.SessionTTL),
	}
	if err := s.opt.Store.CreateSession(ctx, &u); err != nil {
		return Session{}, err
	}
	s.log.Info("upload session created", "session", u.ID, "name", u.FileName, "expires", u.ExpiresAt)
	return s.sessionOf(u), nil
}

// liveSession loads a session that has not expired.
func (s *Service) liveSession(ctx context.Context, id string) (meta.UploadSession, []meta.UploadPart, error) {
	if ValidateFileID(id) != nil {
		return meta.UploadSession{}, nil, uploadNotFound(id)
	}
	u, parts, err := s.opt.Store.GetSession(ctx, id)
	if err != nil {
		return u, nil, err
	}
	if !s.opt.Now().Before(u.ExpiresAt) {
		return meta.UploadSession{}, nil, uploadNotFound(id)
	}
	return u, parts, nil
}

// GetSession returns a session and the parts received, by number.
func (s *Service) GetSession(ctx context.Context, sessionID string) (Session, []Part, error) {
	u, parts, err := s.liveSession(ctx, sessionID)
	if err != nil {
		return Session{}, nil, err
	}
	out := make([]Part, len(parts))
	for i, p := range parts {
		out[i] = Part{Number: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256, MD5: p.MD5, CreatedAt: p.CreatedAt}
	}
	return s.sessionOf(u), out, nil
}

// ListSessions returns up to limit sessions whose IDs sort after after.
func (s *Service) ListSessions(ctx context.Context, after string, limit int) ([]Session, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, errs.E(errs.Invalid, "limit must be between 1 and %d", MaxPageSize)
	}
	if after != "" && ValidateFileID(after) != nil {
		return nil, errs.E(errs.Invalid, "after must be an upload session id")
	}
	us, err := s.opt.Store.ListSessions(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Session, 0, len(us))
	for _, u := range us {
		out = append(out, s.sessionOf(u))
	}
	return out, nil
}

// PartOptions are a part's options.
type PartOptions struct {
	// SkipMD5 leaves the part's MD5 out (Part.MD5 empty): S3 needs it for
	// its ETags, a REST client rarely does, and it costs a hash pass.
	SkipMD5 bool
}

// PutPart stores one part with its MD5 (PutPartWith).
func (s *Service) PutPart(ctx context.Context, sessionID string, number int, body io.Reader, size int64) (Part, error) {
	return s.PutPartWith(ctx, sessionID, number, body, size, PartOptions{})
}

// PutPartWith stores one part (streamed: its chunks go to nodes while it is
// received); a part with the same number replaces the earlier one, whose
// chunks are then deleted. size is the part's length when known, -1 when
// not.
func (s *Service) PutPartWith(ctx context.Context, sessionID string, number int, body io.Reader, size int64, opt PartOptions) (Part, error) {
	if number < 1 || number > MaxPartNumber {
		return Part{}, errs.E(errs.Invalid, "part number %d is outside 1..%d", number, MaxPartNumber)
	}
	if size > MaxPartSize {
		return Part{}, errs.E(errs.TooLarge, "a part is at most %d bytes", int64(MaxPartSize))
	}
	u, _, err := s.liveSession(ctx, sessionID)
	if err != nil {
		return Part{}, err
	}
	if s.opt.Cluster.Ring().Len() == 0 {
		return Part{}, noHealthyNodes()
	}
	p, state, err := s.putPart(ctx, sessionID, number, body, size, MaxPartSize, !opt.SkipMD5)
	if err != nil {
		return Part{}, err
	}
	if number == 1 {
		// Part 1's own hash is where the file's begins: no read-back.
		s.seedFold(sessionID, u.ExpiresAt, p.PartID, state)
	}
	s.kickFold(sessionID, u.ExpiresAt, number, p.PartID)
	return Part{Number: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256, MD5: p.MD5, CreatedAt: p.CreatedAt}, nil
}

// putPart records an attempt at part number, writes body as its chunks and
// finishes the attempt, replacing earlier ones. Store writes run detached
// from ctx (the client's request), so that a client that hangs up leaves
// nothing half-recorded; reading the body still stops with it.
// It also returns the part's SHA-256 state (chunked.state).
func (s *Service) putPart(ctx context.Context, sessionID string, number int, body io.Reader, announced, limit int64, withMD5 bool) (meta.UploadPart, []byte, error) {
	storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), uploadTimeout)
	defer cancel()
	p := meta.UploadPart{PartID: uuid.NewString(), SessionID: sessionID, Number: number}
	if err := s.opt.Store.BeginPart(storeCtx, &p); err != nil {
		return p, nil, err
	}
	s.log.Info("part started", "session", sessionID, "part", number, "attempt", p.PartID)
	sum, err := s.writeChunks(ctx, storeCtx, p.PartID, body, limit, withMD5)
	if err != nil {
		s.log.Warn("part failed; its chunks are removed", "session", sessionID, "part", number, "err", err)
		return p, nil, err
	}
	if sum.size == 0 {
		return p, nil, errs.E(errs.Invalid, "part %d is empty: a part has at least one byte", number)
	}
	if announced >= 0 && sum.size != announced {
		s.dropChunks(storeCtx, p.PartID)
		return p, nil, errs.E(errs.Invalid, "part %d has %d bytes, not the %d announced", number, sum.size, announced)
	}
	p.SizeBytes, p.SHA256, p.MD5 = sum.size, sum.sha256, sum.md5
	dropped, err := s.opt.Store.FinishPart(storeCtx, &p)
	if err != nil {
		s.dropChunks(storeCtx, p.PartID)
		if errs.Is(err, errs.NotFound) {
			return p, nil, uploadNotFound(sessionID)
		}
		return p, nil, err
	}
	s.removeBlobs(dropped)
	s.log.Info("part stored", "session", sessionID, "part", number, "bytes", sum.size, "chunks", sum.chunks,
		"replaced_chunks", len(dropped))
	return p, sum.state, nil
}

// CompleteSession makes the listed parts (in increasing order; nil means
// every part received, by number) the new file's chunks, checks wantSHA256
// when not empty (else the session's expected checksum), and returns the
// file, ACTIVE or DEGRADED as its chunks are. Parts not listed are deleted.
func (s *Service) CompleteSession(ctx context.Context, sessionID string, parts []int, wantSHA256 string) (meta.FileRecord, error) {
	return s.complete(ctx, sessionID, parts, wantSHA256, "")
}

func (s *Service) complete(ctx context.Context, sessionID string, parts []int, wantSHA256, idemKey string) (meta.FileRecord, error) {
	want, err := checkSHA256(wantSHA256, "the checksum")
	if err != nil {
		return meta.FileRecord{}, err
	}
	u, received, err := s.liveSession(ctx, sessionID)
	if err != nil {
		return meta.FileRecord{}, err
	}
	if want == "" {
		want = u.ExpectedSHA256
	}
	chosen, err := chooseParts(received, parts)
	if err != nil {
		return meta.FileRecord{}, err
	}
	ctx = context.WithoutCancel(ctx) // a completion, once begun, is not left half done
	var chunks []meta.FileRecord
	var size int64
	partIDs := make([]string, len(chosen))
	for i, p := range chosen {
		cs, err := s.opt.Store.ChunksOf(ctx, p.PartID)
		if err != nil {
			return meta.FileRecord{}, err
		}
		chunks = append(chunks, cs...)
		size += p.SizeBytes
		partIDs[i] = p.PartID
	}
	sum := chosen[0].SHA256
	if len(chosen) > 1 {
		if sum, err = s.sessionSum(ctx, sessionID, chosen); err != nil {
			return meta.FileRecord{}, errs.Wrap(errs.KindOf(err), err, "hash the parts of upload session %s", sessionID)
		}
	}
	if want != "" && want != sum {
		return meta.FileRecord{}, errs.WithCode(errs.Invalid, errs.CodeChecksumMismatch, nil,
			"the parts' SHA-256 is %s, not the expected %s; the session stays open", sum, want)
	}
	id := uuid.NewString()
	status, reason := chunkStatus(chunks)
	rec := meta.FileRecord{File: meta.File{
		ID: id, Name: u.FileName, ContentType: u.ContentType, SizeBytes: size, Checksum: sum,
		Status: status, StatusReason: reason, ReplicationFactor: s.opt.ReplicationFactor,
		RingPosition: ring.Position(id), IdempotencyKey: idemKey, ChunkCount: len(chunks),
		// A chunked file has no copies of its own; its primary is named for
		// the upload result: the primary of its first chunk.
		PrimaryNodeID: chunks[0].PrimaryNodeID,
	}}
	dropped, err := s.opt.Store.CompleteSession(ctx, sessionID, &rec, partIDs)
	if err != nil {
		return meta.FileRecord{}, err
	}
	s.dropFold(sessionID)
	s.removeBlobs(dropped)
	s.opt.Events.Uploaded(rec.Status, rec.SizeBytes)
	s.log.Info("upload session completed", "session", sessionID, "file", id, "parts", len(chosen), "chunks", len(chunks),
		"bytes", size, "status", status, "reason", reason, "dropped_chunks", len(dropped))
	return s.withChunks(ctx, rec)
}

// sessionSum is the SHA-256 of the chosen parts end to end: the file's
// SHA-256 cannot be made of the parts' own, so what the session's fold has
// not covered is read back, verified, and hashed in order after it.
func (s *Service) sessionSum(ctx context.Context, sessionID string, chosen []meta.UploadPart) (string, error) {
	h, covered, release := s.partsHash(sessionID, chosen)
	defer release()
	var rest []meta.FileRecord
	for _, p := range chosen[covered:] {
		cs, err := s.opt.Store.ChunksOf(ctx, p.PartID)
		if err != nil {
			return "", err
		}
		rest = append(rest, cs...)
	}
	if len(rest) > 0 {
		if err := s.hashInto(ctx, h, rest); err != nil {
			return "", err
		}
	}
	s.log.Info("session checksum", "session", sessionID, "parts", len(chosen), "folded_while_receiving", covered)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// chooseParts picks the finished parts a completion names.
func chooseParts(received []meta.UploadPart, numbers []int) ([]meta.UploadPart, error) {
	if numbers == nil {
		if len(received) == 0 {
			return nil, errs.WithCode(errs.Invalid, errs.CodeMissingPart, nil, "no part has been received")
		}
		return received, nil
	}
	if len(numbers) == 0 {
		return nil, errs.WithCode(errs.Invalid, errs.CodeMissingPart, nil, "a completion names at least one part")
	}
	byNumber := make(map[int]meta.UploadPart, len(received))
	for _, p := range received {
		byNumber[p.Number] = p
	}
	out := make([]meta.UploadPart, 0, len(numbers))
	for i, n := range numbers {
		if i > 0 && n <= numbers[i-1] {
			return nil, errs.WithCode(errs.Invalid, errs.CodePartOrder, nil,
				"parts must be listed in increasing order: %d follows %d", n, numbers[i-1])
		}
		p, ok := byNumber[n]
		if !ok {
			return nil, errs.WithCode(errs.Invalid, errs.CodeMissingPart, nil, "part %d has not been received", n)
		}
		out = append(out, p)
	}
	return out, nil
}

// AbortSession ends a session and deletes every part received.
func (s *Service) AbortSession(ctx context.Context, sessionID string) error {
	if ValidateFileID(sessionID) != nil {
		return uploadNotFound(sessionID)
	}
	if _, _, err := s.opt.Store.GetSession(ctx, sessionID); err != nil {
		return err
	}
	dropped, err := s.opt.Store.DeleteSession(context.WithoutCancel(ctx), sessionID)
	if err != nil {
		return err
	}
	s.dropFold(sessionID)
	s.removeBlobs(dropped)
	s.log.Info("upload session aborted", "session", sessionID, "chunks_removed", len(dropped))
	return nil
}

// ExpireSessions removes, with their chunks, the sessions whose time is up,
// up to limit of them; the repair loop calls it. It returns how many went.
func (s *Service) ExpireSessions(ctx context.Context, limit int) (int, error) {
	ids, err := s.opt.Store.ExpiredSessions(ctx, s.opt.Now(), limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		dropped, err := s.opt.Store.DeleteSession(ctx, id)
		if err != nil {
			return n, err
		}
		s.dropFold(id)
		s.removeBlobs(dropped)
		n++
		s.log.Info("expired upload session removed", "session", id, "chunks_removed", len(dropped))
	}
	return n, nil
}

// uploadChunked stores a direct upload larger than ChunkSize: it is a
// session of one part made for it.
func (s *Service) uploadChunked(ctx context.Context, req UploadRequest, body io.Reader) (UploadResult, error) {
	sess, err := s.CreateSession(ctx, SessionSpec{FileName: req.FileName, ContentType: req.ContentType})
	if err != nil {
		return UploadResult{}, err
	}
	abort := func() {
		if err := s.AbortSession(context.WithoutCancel(ctx), sess.ID); err != nil {
			s.log.Warn("could not abort the session of a failed upload; its expiry removes it", "session", sess.ID, "err", err)
		}
	}
	p, _, err := s.putPart(ctx, sess.ID, 1, body, -1, s.opt.MaxFileSize, false)
	if err != nil {
		abort()
		return UploadResult{}, err
	}
	rec, err := s.complete(ctx, sess.ID, nil, "", req.IdempotencyKey)
	if err != nil {
		abort()
		if req.IdempotencyKey != "" && errs.Is(err, errs.Conflict) {
			return s.replay(ctx, req.IdempotencyKey, p.SHA256, p.SizeBytes)
		}
		return UploadResult{}, err
	}
	return ResultOf(rec), nil
}

// claimKey checks the Idempotency-Key of an upload that is to be stored as
// chunks before any of it goes to a node, since the completion's check would
// come only after all of it had been stored. sp holds the body's first chunk
// and a byte, rest the remainder. A key whose file exists is decided here:
// the body is hashed (and nothing stored) and answers the replay when its
// SHA-256 and size are the file's, a conflict otherwise; a first chunk that
// differs from the file's first chunk is a conflict without reading further.
// A key whose upload is running on this coordinator is a conflict. done says
// the answer is (res, err); otherwise the caller holds the key until it calls
// release. Another coordinator's upload in flight with the same key is
// caught by the completion's check, as before.
func (s *Service) claimKey(ctx context.Context, key string, sp *spooled, rest io.Reader) (release func(), res UploadResult, done bool, err error) {
	prev, err := s.opt.Store.FileByIdempotencyKey(ctx, key)
	switch {
	case err == nil:
		res, err := s.earlyReplay(ctx, prev, sp, rest)
		return nil, res, true, err
	case !errs.Is(err, errs.NotFound):
		return nil, UploadResult{}, true, err
	}
	s.keysMu.Lock()
	defer s.keysMu.Unlock()
	if _, busy := s.keys[key]; busy {
		return nil, UploadResult{}, true, errs.E(errs.Conflict, "an upload with this Idempotency-Key is still in progress")
	}
	s.keys[key] = struct{}{}
	return func() {
		s.keysMu.Lock()
		delete(s.keys, key)
		s.keysMu.Unlock()
	}, UploadResult{}, false, nil
}

// earlyReplay answers a chunked upload whose Idempotency-Key names prev
// without storing anything: the replay when the body is prev's bytes, a
// conflict when it is not. When prev was cut into chunks the size of this
// body's first one, a first chunk that differs is found before the rest is
// read; otherwise (and to confirm a match) the whole body is hashed, reading
// at most one byte more than prev holds.
func (s *Service) earlyReplay(ctx context.Context, prev meta.FileRecord, sp *spooled, rest io.Reader) (UploadResult, error) {
	switch prev.Status {
	case meta.FilePending:
		return UploadResult{}, errs.E(errs.Conflict, "an upload with this Idempotency-Key is still in progress")
	case meta.FileDeleted:
		return UploadResult{}, errs.E(errs.Conflict, "the file uploaded with this Idempotency-Key (%s) has been deleted", prev.ID)
	}
	different := errs.E(errs.Conflict, "this Idempotency-Key was used for different content (file %s)", prev.ID)
	if prev.Manifest() {
		chunks, err := s.opt.Store.ChunksOf(ctx, prev.ID)
		if err != nil {
			return UploadResult{}, err
		}
		// The body has more than a chunk: its first ChunkSize bytes are a
		// whole first chunk when the earlier file was cut the same way.
		first := sp.size - 1
		if len(chunks) > 0 && chunks[0].SizeBytes == first && sp.prefixSum(first) != chunks[0].Checksum {
			return UploadResult{}, different
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(io.MultiReader(sp.reader(), rest), prev.SizeBytes+1))
	if err != nil {
		return UploadResult{}, errs.Wrap(errs.Invalid, err, "read the upload's body")
	}
	if n != prev.SizeBytes || hex.EncodeToString(h.Sum(nil)) != prev.Checksum {
		return UploadResult{}, different
	}
	s.log.Info("upload replayed without storing its body", "file", prev.ID, "key", prev.IdempotencyKey)
	res := ResultOf(prev)
	res.Replayed = true
	return res, nil
}

// prefixSum is the SHA-256 of the first n bytes held.
func (sp *spooled) prefixSum(n int64) string {
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(sp.reader(), n)); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
