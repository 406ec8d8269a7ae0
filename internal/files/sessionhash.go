package files

import (
	"context"
	"crypto/sha256"
	"encoding"
	"hash"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/meta"
)

// A session's file SHA-256 is the hash of its parts end to end, which the
// parts' own checksums cannot make. Rather than read every part back when
// the session completes, the coordinator folds each finished leading part
// (1, 2, 3, … as they finish) into a running SHA-256 in the background while
// later parts still arrive, and keeps the hash's state after each part. The
// completion then reads back only the parts the fold has not reached. The
// state is memory only: after a restart, on another coordinator, or for a
// completion that skips a part, the completion reads back what the fold
// does not cover, so no checksum ever depends on it.

// foldedPart is the running hash's state after one part.
type foldedPart struct {
	number int
	partID string
	state  []byte // sha256 digest, marshalled
}

// fold is one session's running hash.
type fold struct {
	// mu is held while a part is folded, and by a completion while it
	// uses the states: the two never read the same part at once.
	mu      sync.Mutex
	parts   []foldedPart // parts 1..len, in order
	expires time.Time
	// heard is the attempt of each part number that finished last on this
	// coordinator. The fold follows it, not the store (whose session
	// answer lists every part, a cost per part that grows with the
	// session); a part replaced through another coordinator leaves a
	// state that the completion, which matches attempts against the
	// store, does not use.
	heard map[int]string

	// Guarded by sessionFolds.mu.
	running, again, gone bool
}

// sessionFolds holds the folds of the sessions this coordinator has seen a
// part of, and the goroutines running them, which end with the Service
// (closeFolds): a fold left running at shutdown would go on reading chunks
// from nodes and the store after both were closed.
type sessionFolds struct {
	ctx  context.Context // every fold's, cancelled by closeFolds
	stop context.CancelFunc
	wg   sync.WaitGroup // the running folds

	mu     sync.Mutex
	m      map[string]*fold
	closed bool // closeFolds has run: no fold starts
}

func newSessionFolds() *sessionFolds {
	ctx, stop := context.WithCancel(context.Background())
	return &sessionFolds{ctx: ctx, stop: stop, m: map[string]*fold{}}
}

// closeFolds stops the running folds and waits for them to return; none
// starts after. What they had not folded the completion reads back, on a
// coordinator that is running.
func (s *Service) closeFolds() {
	sf := s.folds
	sf.mu.Lock()
	sf.closed = true
	sf.mu.Unlock()
	sf.stop()
	sf.wg.Wait()
}

// seedFold starts the session's fold with part 1's own hash state.
func (s *Service) seedFold(sessionID string, expires time.Time, partID string, state []byte) {
	sf := s.folds
	sf.mu.Lock()
	f := sf.m[sessionID]
	if f == nil {
		f = &fold{expires: expires, heard: map[int]string{}}
		sf.m[sessionID] = f
	}
	f.heard[1] = partID
	sf.mu.Unlock()
	if !f.mu.TryLock() {
		return // the fold is reading a part: it reads part 1 back itself
	}
	defer f.mu.Unlock()
	if len(f.parts) == 0 || f.parts[0].partID != partID {
		f.parts = []foldedPart{{number: 1, partID: partID, state: state}}
	}
}

// kickFold has the session's fold take in the parts that have finished, in
// the background; a fold already running looks again when it is done.
func (s *Service) kickFold(sessionID string, expires time.Time, number int, partID string) {
	sf := s.folds
	sf.mu.Lock()
	now := s.opt.Now()
	for id, f := range sf.m {
		if now.After(f.expires) { // a session removed by another coordinator
			f.gone = true
			delete(sf.m, id)
		}
	}
	f := sf.m[sessionID]
	if f == nil {
		f = &fold{expires: expires, heard: map[int]string{}}
		sf.m[sessionID] = f
	}
	f.heard[number] = partID
	if f.running || sf.closed {
		f.again = true
		sf.mu.Unlock()
		return
	}
	f.running = true
	// Added under sf.mu, which closeFolds takes before it waits: a fold
	// either starts before the wait or not at all.
	sf.wg.Add(1)
	sf.mu.Unlock()
	go func() {
		defer sf.wg.Done()
		s.runFold(sessionID, f)
	}()
}

func (s *Service) runFold(sessionID string, f *fold) {
	sf := s.folds
	for {
		sf.mu.Lock()
		f.again = false
		sf.mu.Unlock()
		s.foldParts(sessionID, f)
		sf.mu.Lock()
		if !f.again || f.gone || sf.closed {
			f.running = false
			sf.mu.Unlock()
			return
		}
		sf.mu.Unlock()
	}
}

// dropFold forgets a session's fold (completed, aborted or expired).
func (s *Service) dropFold(sessionID string) {
	sf := s.folds
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if f := sf.m[sessionID]; f != nil {
		f.gone = true
		delete(sf.m, sessionID)
	}
}

func (s *Service) foldOf(sessionID string) *fold {
	s.folds.mu.Lock()
	defer s.folds.mu.Unlock()
	return s.folds.m[sessionID]
}

// foldParts extends f with every part that follows its last one, until a
// part number is missing or the session is gone.
func (s *Service) foldParts(sessionID string, f *fold) {
	ctx, cancel := context.WithTimeout(s.folds.ctx, uploadTimeout)
	defer cancel()
	for {
		f.mu.Lock()
		more := s.foldNext(ctx, sessionID, f)
		f.mu.Unlock()
		if !more {
			return
		}
	}
}

// foldNext folds the next part into f, with f.mu held, and says whether it
// did. It first drops the states of parts replaced since they were folded.
func (s *Service) foldNext(ctx context.Context, sessionID string, f *fold) bool {
	s.folds.mu.Lock()
	if f.gone {
		s.folds.mu.Unlock()
		return false
	}
	for i, fp := range f.parts {
		if f.heard[fp.number] != fp.partID {
			f.parts = f.parts[:i]
			break
		}
	}
	number := len(f.parts) + 1
	partID, ok := f.heard[number]
	s.folds.mu.Unlock()
	if !ok {
		return false
	}
	h := sha256.New()
	if n := len(f.parts); n > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(f.parts[n-1].state); err != nil {
			return false
		}
	}
	chunks, err := s.opt.Store.ChunksOf(ctx, partID)
	if err != nil || len(chunks) == 0 {
		return false
	}
	if err := s.foldChunks(ctx, h, chunks); err != nil {
		s.log.Debug("a part could not be folded into its session's checksum yet; the completion reads it back", "session", sessionID, "part", number, "err", err)
		return false
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return false
	}
	f.parts = append(f.parts, foldedPart{number: number, partID: partID, state: state})
	return true
}

// foldChunks hashes a part's chunks into h in order, stopping when ctx
// ends. Unlike the completion's read-back (hashInto, which reads the next
// chunk ahead and outlives its caller's context until closed), the fold is
// background work: it reads one chunk at a time, so it holds one buffer of
// the budget the uploads receive into, not two, and it ends with the
// Service.
func (s *Service) foldChunks(ctx context.Context, h hash.Hash, chunks []meta.FileRecord) error {
	for _, c := range chunks {
		got := s.fetchChunk(ctx, c, s.chunkBufs)
		if got.err != nil {
			return got.err
		}
		h.Write(got.data)
		s.release(&got)
	}
	return nil
}

// partsHash returns a SHA-256 of the leading chosen parts the session's fold
// covers, and how many they are; with f.mu held by the caller until it is
// done with them (release), the fold waits meanwhile.
func (s *Service) partsHash(sessionID string, chosen []meta.UploadPart) (h hash.Hash, covered int, release func()) {
	h = sha256.New()
	f := s.foldOf(sessionID)
	if f == nil {
		return h, 0, func() {}
	}
	f.mu.Lock()
	for covered < len(chosen) && covered < len(f.parts) &&
		chosen[covered].PartID == f.parts[covered].partID && chosen[covered].Number == f.parts[covered].number {
		covered++
	}
	if covered > 0 {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(f.parts[covered-1].state); err != nil {
			h, covered = sha256.New(), 0
		}
	}
	return h, covered, f.mu.Unlock
}
