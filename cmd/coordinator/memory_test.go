package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
)

// rssLimit is what the coordinator's peak resident set may reach while a
// gibibyte streams through it: bytes are spooled to disk and streamed to and
// from the nodes, never held, so the figure must not grow with file size.
const rssLimit = 96 << 20

// TestGibibyteStreamsThroughInFlatMemory uploads and downloads 1 GiB through a
// real coordinator process and reads its peak RSS (VmHWM) from outside.
func TestGibibyteStreamsThroughInFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1 GiB through real processes")
	}
	root, err := localcluster.FindModuleRoot(".")
	require.NoError(t, err)
	bin := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = localcluster.BuildModule(ctx, root, bin)
	require.NoError(t, err)
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: bin, DataDir: t.TempDir(), Nodes: 3,
		CoordinatorEnv: []string{"MAX_FILE_SIZE=2GiB", "HEALTH_CHECK_INTERVAL=200ms", "HEALTH_PROBE_TIMEOUT=100ms"},
		NodeEnv:        []string{"REGISTRATION_INTERVAL=200ms"},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()
	base := c.CoordinatorURL()
	require.Eventually(t, func() bool { return onRing(base) == 3 }, 30*time.Second, 100*time.Millisecond)

	const size = 1 << 30
	seed := uint64(42)
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", "big.bin")
		if err == nil {
			_, err = io.Copy(part, io.LimitReader(newStream(seed), size))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/files", pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var up struct {
		FileID, Status, Checksum string
		SizeBytes                int64
	}
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&up))
	resp.Body.Close()
	require.Equal(t, "ACTIVE", up.Status)
	require.Equal(t, int64(size), up.SizeBytes)
	want := sha256.New()
	_, err = io.Copy(want, io.LimitReader(newStream(seed), size))
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(want.Sum(nil)), up.Checksum)

	resp, err = http.Get(base + "/api/files/" + up.FileID)
	require.NoError(t, err)
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, int64(size), n)
	require.Equal(t, up.Checksum, hex.EncodeToString(got.Sum(nil)))

	hwm := vmHWM(t, c.PID(localcluster.CoordinatorName))
	t.Logf("coordinator peak RSS (VmHWM) after a 1 GiB upload and download: %.1f MiB", float64(hwm)/(1<<20))
	require.Less(t, hwm, int64(rssLimit), "the coordinator's memory grew with the file")
	// The spool holds nothing once the upload is done.
	entries, err := os.ReadDir(filepath.Join(c.DataDir(localcluster.CoordinatorName), "spool"))
	require.NoError(t, err)
	require.Empty(t, entries)
}

func onRing(base string) int {
	resp, err := http.Get(base + "/api/nodes/ring")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var r struct {
		PhysicalNodes int `json:"physicalNodes"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil {
		return 0
	}
	return r.PhysicalNodes
}

// vmHWM reads a process's peak resident set size in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	require.NotZero(t, pid)
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/status")
	return 0
}

// stream is a fast deterministic byte source.
type stream struct{ r *rand.ChaCha8 }

func newStream(seed uint64) *stream {
	var s [32]byte
	s[0] = byte(seed)
	return &stream{r: rand.NewChaCha8(s)}
}

func (s *stream) Read(p []byte) (int, error) { return s.r.Read(p) }
