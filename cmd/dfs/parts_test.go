package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/httpx"
)

// fakeSessions is the fake coordinator's /api/uploads: parts in memory,
// with a count of parts in flight and a part number that fails.
type fakeSessions struct {
	parts     map[string]map[int][]byte
	puts      []int // part numbers received, in order
	inFlight  int
	maxSeen   int
	failPart  int   // a PUT of this part answers 503
	chunkSize int64 // the CHUNK_SIZE the sessions' answers name (0: none)
	aborted   int   // sessions deleted
}

func (f *fakeCoordinator) routeSessions(route func(string, http.HandlerFunc)) {
	f.sessions.parts = map[string]map[int][]byte{}
	route("POST /api/uploads", func(w http.ResponseWriter, r *http.Request) {
		id := uuid.NewString()
		f.mu.Lock()
		f.sessions.parts[id] = map[int][]byte{}
		chunk := f.sessions.chunkSize
		f.mu.Unlock()
		httpx.WriteJSON(w, http.StatusCreated, client.UploadSession{UploadID: id, FileName: "f", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour),
			ChunkSize: chunk})
	})
	route("DELETE /api/uploads/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.sessions.parts, r.PathValue("id"))
		f.sessions.aborted++
		w.WriteHeader(http.StatusNoContent)
	})
	route("GET /api/uploads/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		ps, ok := f.sessions.parts[r.PathValue("id")]
		if !ok {
			httpx.WriteErrorCode(w, r, http.StatusNotFound, errs.CodeUploadNotFound, "no such session")
			return
		}
		d := client.UploadDetail{UploadID: r.PathValue("id"), Parts: []client.UploadPart{}}
		for n, b := range ps {
			sum := sha256.Sum256(b)
			d.Parts = append(d.Parts, client.UploadPart{PartNumber: n, SizeBytes: int64(len(b)), Checksum: hex.EncodeToString(sum[:])})
		}
		httpx.WriteJSON(w, http.StatusOK, d)
	})
	route("PUT /api/uploads/{id}/parts/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		f.mu.Lock()
		f.sessions.inFlight++
		f.sessions.maxSeen = max(f.sessions.maxSeen, f.sessions.inFlight)
		f.sessions.puts = append(f.sessions.puts, n)
		fail := f.sessions.failPart == n
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.sessions.inFlight--; f.mu.Unlock() }()
		data, err := io.ReadAll(r.Body)
		time.Sleep(5 * time.Millisecond) // parts overlap, so the bound on them shows
		if err != nil || fail {
			httpx.WriteErrorCode(w, r, http.StatusServiceUnavailable, errs.CodeStorageUnavailable, "no storage node accepted the chunk")
			return
		}
		f.mu.Lock()
		f.sessions.parts[r.PathValue("id")][n] = data
		f.mu.Unlock()
		httpx.WriteJSON(w, http.StatusOK, client.UploadPart{PartNumber: n, SizeBytes: int64(len(data))})
	})
	route("POST /api/uploads/{id}/complete", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ps := f.sessions.parts[r.PathValue("id")]
		var nums []int
		for n := range ps {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		var whole []byte
		for _, n := range nums {
			whole = append(whole, ps[n]...)
		}
		delete(f.sessions.parts, r.PathValue("id"))
		id := f.addLocked("big.bin", "application/octet-stream", whole)
		m := f.files[id].meta
		f.mu.Unlock()
		httpx.WriteJSON(w, http.StatusCreated, client.UploadResult{FileID: id, FileName: m.FileName, SizeBytes: m.SizeBytes,
			Checksum: m.Checksum, Status: m.Status, PrimaryNode: "node-1", Replicas: []string{}, ReplicationFactor: 3})
	})
}

func TestPutSendsALargeFileAsParallelPartsAndResumes(t *testing.T) {
	f := newFakeCoordinator(t)
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16+5) // a little over 9 MiB
	path := filepath.Join(dir, "big.bin")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	// Part 4 fails every time: the upload stops, keeping its state.
	f.sessions.failPart = 4
	code, _, stderr := dfs(t, f.srv.URL, "", "put", "-parallel", "3", "-part-size", "1MiB", path)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "dfs put -resume")
	require.FileExists(t, statePath(path))
	require.LessOrEqual(t, f.sessions.maxSeen, 3, "-parallel bounds the parts in flight")
	require.Greater(t, f.sessions.maxSeen, 1, "parts are sent in parallel")
	stored := 0
	for _, ps := range f.sessions.parts {
		stored = len(ps)
	}
	require.Positive(t, stored)

	// -resume sends only what the coordinator does not hold.
	f.mu.Lock()
	f.sessions.failPart, f.sessions.puts = 0, nil
	f.mu.Unlock()
	code, stdout, stderr := dfs(t, f.srv.URL, "", "put", "-resume", "-part-size", "1MiB", path)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stderr, "resuming upload")
	require.Len(t, f.sessions.puts, 10-stored, "parts stored before are not sent again")
	require.NoFileExists(t, statePath(path))
	id := strings.Fields(stdout)[0]
	require.Equal(t, data, f.files[id].data)

	// Without -resume a new session starts.
	f.sessions.puts = nil
	code, _, stderr = dfs(t, f.srv.URL, "", "put", "-part-size", "2MiB", path)
	require.Equal(t, exitOK, code, stderr)
	require.Len(t, f.sessions.puts, 5)

	// A small file is still one upload.
	uploads := f.uploads
	small := writeFile(t, dir, "s.txt", "small")
	code, _, stderr = dfs(t, f.srv.URL, "", "put", small)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, uploads+1, f.uploads)

	code, _, stderr = dfs(t, f.srv.URL, "", "put", "-parallel", "0", path)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "-parallel")
}

// TestPutLearnsTheCoordinatorsChunkSize: a file at or below the CHUNK_SIZE a
// session's answer names is sent as one upload (the session aborted), a
// larger one as parts.
func TestPutLearnsTheCoordinatorsChunkSize(t *testing.T) {
	f := newFakeCoordinator(t)
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16) // 9 MiB
	path := filepath.Join(dir, "mid.bin")
	require.NoError(t, os.WriteFile(path, data, 0o600))

	f.sessions.chunkSize = 16 << 20
	uploads := f.uploads
	code, stdout, stderr := dfs(t, f.srv.URL, "", "put", "-part-size", "1MiB", path)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, uploads+1, f.uploads, "one upload")
	require.Empty(t, f.sessions.puts, "no part sent")
	require.Equal(t, 1, f.sessions.aborted, "the session was aborted")
	require.Empty(t, f.sessions.parts)
	require.NoFileExists(t, statePath(path))
	require.Equal(t, data, f.files[strings.Fields(stdout)[0]].data)

	f.sessions.chunkSize = 8 << 20
	uploads = f.uploads
	code, stdout, stderr = dfs(t, f.srv.URL, "", "put", "-part-size", "1MiB", path)
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, uploads, f.uploads, "no single upload")
	require.Len(t, f.sessions.puts, 9)
	require.Equal(t, 1, f.sessions.aborted)
	require.Equal(t, data, f.files[strings.Fields(stdout)[0]].data)
}
