package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// TestVolumesNodeKilledDuringSmallUploads SIGKILLs a storage node in the
// volumes layout three times during a flood of 4 KiB uploads, restarting it
// each time, and then checks that every acknowledged file reads back
// byte-exact from every copy its metadata lists as active: a copy a node
// acknowledged survived its kills.
func TestVolumesNodeKilledDuringSmallUploads(t *testing.T) {
	c := startCluster(t, options{nodeEnv: []string{"STORAGE_LAYOUT=volumes", "STORAGE_VOLUME_SIZE=4MiB"}})
	victim := c.lc.Nodes()[1]
	var (
		mu    sync.Mutex
		acked []stored
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitAcked := func(n int) {
		eventually(t, settleTimeout, fmt.Sprintf("%d uploads acknowledged", n), func() (bool, string) {
			got := count()
			return got >= n, fmt.Sprintf("%d acknowledged", got)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				data := randomBytes(4 << 10)
				name := fmt.Sprintf("flood-%d-%d.bin", w, i)
				res, err := c.upload(name, data)
				if err != nil {
					continue // refused while the victim was down: nothing promised
				}
				mu.Lock()
				acked = append(acked, stored{name: name, data: data, res: res})
				mu.Unlock()
			}
		})
	}
	for round := range 3 {
		waitAcked(count() + 60)
		require.NoError(t, c.lc.KillNode(victim), "round %d", round)
		waitAcked(count() + 20)
		startCtx, done := callCtx()
		require.NoError(t, c.lc.StartNode(startCtx, victim), "round %d", round)
		done()
	}
	waitAcked(count() + 30)
	cancel()
	wg.Wait()
	c.waitOnRing(victim)

	onVictim := 0
	for _, f := range acked {
		md := c.metadata(f.res.FileID)
		copies := activeCopies(md)
		require.NotEmpty(t, copies, "%s", f.name)
		for _, node := range copies {
			resp, body := c.internal(http.MethodGet, node, wire.BlobPath(f.res.FileID))
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s on %s: %s", f.name, node, body)
			require.True(t, bytes.Equal(f.data, body), "%s on %s is byte-exact", f.name, node)
			if node == victim {
				onVictim++
			}
		}
	}
	require.Positive(t, onVictim, "the killed node holds acknowledged copies")
	t.Logf("%d acknowledged files checked, %d copies on the killed node", len(acked), onVictim)
}
