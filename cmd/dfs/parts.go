package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

// A file above the coordinator's CHUNK_SIZE is sent as an upload session's
// parts (the coordinator stores it as chunks anyway); one at or below it as
// one upload, so that it stays one blob. The CLI learns CHUNK_SIZE from the
// session's answer: a file at or below minChunkSize, the smallest CHUNK_SIZE,
// is one upload without asking; one above maxChunkSize, the largest, is
// parts without a second thought; one in between opens a session and, when
// it fits in the answer's chunkSize, aborts it and is sent whole.
const (
	minChunkSize = 1 << 20
	maxChunkSize = 64 << 20
)

// errFitsOneChunk tells putParts' caller to send the file as one upload.
var errFitsOneChunk = errors.New("the file fits in one chunk")

// uploadState is what -resume needs to continue an interrupted upload,
// kept in FILE.dfs-upload beside the file while the upload runs.
type uploadState struct {
	UploadID string    `json:"uploadId"`
	Server   string    `json:"server"`
	Size     int64     `json:"size"`
	ModTime  time.Time `json:"modTime"`
	PartSize int64     `json:"partSize"`
}

func statePath(path string) string { return path + ".dfs-upload" }

// loadState reads the state of an earlier upload of f, if it is still the
// same file sent to the same coordinator.
func loadState(path string, st os.FileInfo, server string) (uploadState, bool) {
	b, err := os.ReadFile(statePath(path))
	if err != nil {
		return uploadState{}, false
	}
	var s uploadState
	if json.Unmarshal(b, &s) != nil || s.Size != st.Size() || !s.ModTime.Equal(st.ModTime()) || s.Server != server || s.PartSize <= 0 {
		return uploadState{}, false
	}
	return s, true
}

func saveState(path string, s uploadState) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := statePath(path) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(path))
}

// putParts uploads the regular file f as the parts of an upload session,
// parallel at a time; with resume it continues the session recorded beside
// the file, sending only the parts the coordinator lacks or holds with
// other bytes.
func (cc *clientCmd) putParts(ctx context.Context, path, name string, f *os.File, st os.FileInfo, ctype string, parallel int, partSize int64, resume bool, p *progress) (client.UploadResult, error) {
	if ctype == "" {
		ctype = mime.TypeByExtension(filepath.Ext(name))
	}
	state, ok := uploadState{}, false
	if resume {
		state, ok = loadState(path, st, cc.c.BaseURL())
	}
	have := map[int]string{}
	if ok {
		d, err := cc.c.GetUpload(ctx, state.UploadID)
		switch {
		case err == nil:
			for _, part := range d.Parts {
				have[part.PartNumber] = part.Checksum
			}
			partSize = state.PartSize
			fmt.Fprintf(cc.s.err, "dfs put: %s: resuming upload %s (%d parts already stored)\n", path, state.UploadID, len(have))
		case errs.Is(err, errs.NotFound):
			ok = false // expired or completed: start again
		default:
			return client.UploadResult{}, err
		}
	}
	if !ok {
		sess, err := cc.c.CreateUpload(ctx, name, ctype, "")
		if err != nil {
			return client.UploadResult{}, err
		}
		if st.Size() <= maxChunkSize && st.Size() <= sess.ChunkSize {
			if err := cc.c.AbortUpload(ctx, sess.UploadID); err != nil {
				// Harmless: the repair loop removes it at UPLOAD_SESSION_TTL.
				fmt.Fprintf(cc.s.err, "dfs put: %s: could not abort the unneeded upload session %s: %v\n", path, sess.UploadID, err)
			}
			return client.UploadResult{}, errFitsOneChunk
		}
		state = uploadState{UploadID: sess.UploadID, Server: cc.c.BaseURL(), Size: st.Size(), ModTime: st.ModTime(), PartSize: partSize}
		if err := saveState(path, state); err != nil {
			return client.UploadResult{}, errs.Wrap(errs.Invalid, err, "record the upload for -resume")
		}
	}
	parts := int((st.Size() + partSize - 1) / partSize)
	if parts > 10000 {
		return client.UploadResult{}, errs.E(errs.Invalid, "%s needs %d parts of %d bytes; at most 10000: use a larger -part-size", path, parts, partSize)
	}
	next := make(chan int)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(parallel, parts) {
		wg.Go(func() {
			for n := range next {
				if err := cc.sendPart(ctx, f, state.UploadID, n, partSize, st.Size(), have[n], p); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
	for n := 1; n <= parts; n++ {
		select {
		case next <- n:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return client.UploadResult{}, fmt.Errorf("%w (the parts stored so far are kept: `dfs put -resume %s` sends the rest)", firstErr, path)
	}
	res, err := cc.c.CompleteUpload(ctx, state.UploadID)
	if err != nil {
		return client.UploadResult{}, err
	}
	if err := os.Remove(statePath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(cc.s.err, "dfs put: could not remove %s: %v\n", statePath(path), err)
	}
	return res, nil
}

// sendPart sends part n of f unless the coordinator holds it already with
// the same bytes (stored, its SHA-256).
func (cc *clientCmd) sendPart(ctx context.Context, f *os.File, id string, n int, partSize, size int64, stored string, p *progress) error {
	off := int64(n-1) * partSize
	length := min(partSize, size-off)
	if stored != "" {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, off, length)); err != nil {
			return errs.Wrap(errs.Invalid, err, "read part %d", n)
		}
		if hex.EncodeToString(h.Sum(nil)) == stored {
			p.add(int(length))
			return nil
		}
	}
	var last error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return last
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		counted := &partCounter{r: io.NewSectionReader(f, off, length), p: p}
		_, err := cc.c.PutPartWith(ctx, id, n, counted, length, client.PartOptions{SkipMD5: true})
		if err == nil {
			return nil
		}
		p.n.Add(-counted.n) // the retry sends the part again
		last = fmt.Errorf("part %d: %w", n, err)
		if ctx.Err() != nil || errs.Is(err, errs.Invalid) || errs.Is(err, errs.NotFound) {
			return last
		}
	}
	return last
}

// partCounter counts one attempt's bytes on the progress, so that a failed
// attempt's can be taken back.
type partCounter struct {
	r io.Reader
	p *progress
	n int64
}

func (c *partCounter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	c.p.add(n)
	return n, err
}
