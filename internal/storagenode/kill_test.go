package storagenode_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/testenv"
)

// startBinary runs the storage-node binary over dir in the given layout
// and waits until it is ready.
func startBinary(t *testing.T, dir, layout string) (*exec.Cmd, string) {
	t.Helper()
	port := freePort(t)
	var stderr testenv.SyncBuffer
	cmd := exec.Command(binary(t))
	cmd.Env = []string{"SERVER_HOST=127.0.0.1", "SERVER_PORT=" + strconv.Itoa(port), "STORAGE_DATA_DIRECTORY=" + dir,
		"STORAGE_LAYOUT=" + layout, "STORAGE_VOLUME_SIZE=4MiB", "LOG_LEVEL=warn"}
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitReady(t, base, &stderr)
	return cmd, base
}

// TestKill9DuringUploads SIGKILLs a real node three times while 16 clients
// upload 4 KiB blobs, in each layout, and checks after each restart that
// every acknowledged blob reads back byte-exact.
func TestKill9DuringUploads(t *testing.T) {
	for _, layout := range []string{"volumes", "files"} {
		t.Run(layout, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			acked := map[string][]byte{}
			var mu sync.Mutex
			for round := range 3 {
				cmd, base := startBinary(t, dir, layout)
				for id, data := range acked {
					requireBlob(t, base, id, data)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				count := 0
				enough := make(chan struct{})
				for range 16 {
					wg.Go(func() {
						for ctx.Err() == nil {
							data := make([]byte, 4096)
							_, _ = rand.Read(data)
							id := uuid.NewString()
							if putBlob(ctx, base, id, data) != nil {
								continue
							}
							mu.Lock()
							acked[id] = data
							count++
							if count == 150 {
								close(enough)
							}
							mu.Unlock()
						}
					})
				}
				select {
				case <-enough:
				case <-time.After(60 * time.Second):
					t.Fatalf("round %d: too few uploads acknowledged", round)
				}
				require.NoError(t, cmd.Process.Kill()) // SIGKILL, uploads in flight
				_ = cmd.Wait()
				cancel()
				wg.Wait()
			}
			_, base := startBinary(t, dir, layout)
			mu.Lock()
			defer mu.Unlock()
			require.GreaterOrEqual(t, len(acked), 450)
			for id, data := range acked {
				requireBlob(t, base, id, data)
			}
		})
	}
}

func putBlob(ctx context.Context, base, id string, data []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/internal/blobs/"+id, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("X-Checksum-Sha256", checksum(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func requireBlob(t *testing.T, base, id string, data []byte) {
	t.Helper()
	resp, err := http.Get(base + "/internal/blobs/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "acknowledged blob %s", id)
	require.True(t, bytes.Equal(data, got), "acknowledged blob %s reads back byte-exact", id)
}
