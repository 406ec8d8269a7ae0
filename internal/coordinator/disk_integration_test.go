package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// registerWithDisk announces a running node with its disk identity, as its
// registration loop does at start.
func (h *harness) registerWithDisk(id string) {
	h.t.Helper()
	host, port, _ := net.SplitHostPort(h.addrs[id])
	p, _ := strconv.Atoi(port)
	body, _ := json.Marshal(map[string]any{"nodeId": id, "host": host, "port": p, "diskId": h.nodes[id].DiskID})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/api/nodes/register", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp := h.do(req)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(resp.body))
}

// TestReplacedDiskIsRebuiltAtOnce wipes a node's data directory and brings
// the node back before the failure detector could notice it was gone. The
// new disk identity, seen by a probe or by the node's registration, has
// every copy rebuilt on it: no manual rebalance, no eviction, no sweep.
func TestReplacedDiskIsRebuiltAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		for _, seenBy := range []string{"probe", "registration"} {
			t.Run(seenBy, func(t *testing.T) {
				h := newHarness(t, kind, 3, nil)
				ctx := context.Background()
				old := h.nodes["node-3"].DiskID
				stored, err := h.store().GetNode(ctx, "node-3")
				require.NoError(t, err)
				require.Equal(t, old, stored.DiskID, "the admitting probes recorded the identity")

				data := map[string][]byte{}
				for i := range 5 {
					b := payload(700+i, byte(i))
					data[h.upload("f", b).FileID] = b
				}

				h.stopNode("node-3")
				require.NoError(t, os.RemoveAll(h.dirs["node-3"]))
				h.restartNode("node-3")
				require.NotEqual(t, old, h.nodes["node-3"].DiskID)
				for id := range data {
					require.False(t, h.holds("node-3", id))
				}

				if seenBy == "probe" {
					h.sweep(1)
				} else {
					h.registerWithDisk("node-3")
				}
				h.settle()

				stored, err = h.store().GetNode(ctx, "node-3")
				require.NoError(t, err)
				require.Equal(t, h.nodes["node-3"].DiskID, stored.DiskID)
				require.Equal(t, "HEALTHY", string(stored.Status), "never evicted")
				require.Equal(t, []string{"node-1", "node-2", "node-3"}, h.app.members.Ring().Nodes())
				for id, b := range data {
					m := h.metadata(id)
					require.Equal(t, "ACTIVE", m.Status, id)
					require.ElementsMatch(t, []string{"node-1", "node-2", "node-3"}, m.copies("ACTIVE"), id)
					got, err := os.ReadFile(h.blobPath("node-3", id))
					require.NoError(t, err, "the copy on the new disk was rebuilt")
					require.Equal(t, b, got)
				}
				require.True(t, hasLog(h, "is back with another disk"))
				require.True(t, hasLog(h, "trigger=RECOVERED"), "the rebalance ran as for a recovered node")
			})
		}
	})
}
