package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/ring"
)

func spoolFiles(t *testing.T, s *Service) []string {
	t.Helper()
	left, err := filepath.Glob(filepath.Join(s.opt.SpoolDir, "*"))
	require.NoError(t, err)
	return left
}

// uploadHeld starts an upload whose node writes wait at nodes.gate and
// returns once all its copy writes (one per node: the tests use three nodes
// and RF=3) have started, with the channel its result arrives on.
func uploadHeld(t *testing.T, s *Service, nodes *gateNodes, body []byte) chan UploadResult {
	t.Helper()
	done := make(chan UploadResult, 1)
	go func() {
		res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(body)})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for range 3 {
		<-nodes.started
	}
	return done
}

func storedBytes(t *testing.T, nodes *gateNodes, node, id string) []byte {
	t.Helper()
	rc, _, err := nodes.stores[node].Fetch(context.Background(), id)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

func TestSmallUploadsStayInMemoryLargeOnesSpoolToDisk(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := newService(t, nodes, ids, func(o *Options) { o.MemorySpoolMax, o.MemorySpoolLimit = 64, 1<<10 })
	nodes.gate = make(chan struct{})

	small := bytes.Repeat([]byte("s"), 64) // exactly the memory maximum
	done := uploadHeld(t, s, nodes, small)
	require.Empty(t, spoolFiles(t, s), "a body of MemorySpoolMax bytes needs no spool file")
	require.EqualValues(t, 64, s.mem.used.Load())
	for range 3 {
		nodes.gate <- struct{}{}
	}
	res := <-done
	require.Zero(t, s.mem.used.Load(), "the buffer goes back when the upload ends")
	for _, n := range ids {
		require.Equal(t, small, storedBytes(t, nodes, n, res.FileID))
	}

	large := bytes.Repeat([]byte("L"), 65) // one byte more
	done = uploadHeld(t, s, nodes, large)
	require.Len(t, spoolFiles(t, s), 1, "a larger body continues into a spool file")
	require.Zero(t, s.mem.used.Load(), "the memory it read first is given back once written to the file")
	close(nodes.gate)
	res = <-done
	require.Empty(t, spoolFiles(t, s))
	for _, n := range ids {
		require.Equal(t, large, storedBytes(t, nodes, n, res.FileID))
	}
	require.Equal(t, sha(large), res.Checksum)
}

func TestMemorySpoolBudgetSendsTheRestToDisk(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, _ := newService(t, nodes, ids, func(o *Options) { o.MemorySpoolMax, o.MemorySpoolLimit = 64, 64 })
	nodes.gate = make(chan struct{})
	first := uploadHeld(t, s, nodes, []byte("first"))
	require.Empty(t, spoolFiles(t, s))
	second := uploadHeld(t, s, nodes, []byte("second"))
	require.Len(t, spoolFiles(t, s), 1, "with the budget spent, a small body goes to disk")
	close(nodes.gate)
	a, b := <-first, <-second
	require.Equal(t, sha([]byte("first")), a.Checksum)
	require.Equal(t, sha([]byte("second")), b.Checksum)
	require.Zero(t, s.mem.used.Load())
	require.Empty(t, spoolFiles(t, s))
}

func TestMemorySpoolRefusesOversizedAndBrokenBodies(t *testing.T) {
	ids := []string{"A"}
	s, _ := newService(t, newGateNodes(ids...), ids, func(o *Options) {
		o.MaxFileSize, o.MemorySpoolMax, o.MemorySpoolLimit = 10, 64, 1<<10
	})
	_, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(make([]byte, 11))})
	require.True(t, errs.Is(err, errs.TooLarge), "got %v", err)
	_, err = s.Upload(context.Background(), UploadRequest{FileName: "f", Body: io.MultiReader(strings.NewReader("abc"), failingReader{})})
	require.True(t, errs.Is(err, errs.Invalid), "got %v", err)
	// A body that breaks off early is refused, not stored as a shorter file.
	_, err = s.Upload(context.Background(), UploadRequest{FileName: "f", Body: io.MultiReader(strings.NewReader("abc"), failingReader{io.ErrUnexpectedEOF})})
	require.True(t, errs.Is(err, errs.Invalid), "got %v", err)
	require.Zero(t, s.mem.used.Load(), "refused bodies give their buffers back")
	require.Empty(t, spoolFiles(t, s))
	res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: bytes.NewReader(make([]byte, 10))})
	require.NoError(t, err, "exactly the limit is allowed")
	require.EqualValues(t, 10, res.SizeBytes)
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	return 0, errors.New("connection reset")
}

// TestPrimaryIsFirstInRingOrderWhateverFinishesFirst: copies are written at
// once, and the primary is the first node of the preference list that took
// one, not the quickest.
func TestPrimaryIsFirstInRingOrderWhateverFinishesFirst(t *testing.T) {
	ids := []string{"A", "B", "C"}
	nodes := newGateNodes(ids...)
	s, st := newService(t, nodes, ids, nil)
	rg := ring.New(100, ids...)
	slowFirst := 0
	for i := 0; i < 200 && (i < 30 || slowFirst == 0); i++ {
		hold := make(chan struct{})
		nodes.hold = map[string]chan struct{}{"A": hold}
		done := make(chan UploadResult, 1)
		go func() {
			res, err := s.Upload(context.Background(), UploadRequest{FileName: "f", Body: strings.NewReader("x")})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		for range 3 {
			<-nodes.started
		}
		// B's and C's writes finish while A's is still held.
		require.Eventually(t, func() bool { return nodes.inFlight.Load() == 1 }, 5e9, 1e6)
		close(hold)
		res := <-done
		want := rg.Preference(res.FileID, 3)
		require.Equal(t, want[0], res.PrimaryNode, "file %s, preference %v", res.FileID, want)
		rec, err := st.GetFile(context.Background(), res.FileID)
		require.NoError(t, err)
		require.Equal(t, want[0], rec.PrimaryNodeID)
		require.ElementsMatch(t, want[1:], res.Replicas)
		if want[0] == "A" {
			slowFirst++
		}
	}
	require.Positive(t, slowFirst, "some upload had the held node first in its preference list")
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
