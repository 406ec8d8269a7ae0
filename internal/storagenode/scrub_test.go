package storagenode_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

func (n *node) scrub(t *testing.T) wire.ScrubStatus {
	t.Helper()
	resp, body := n.request(t, http.MethodGet, wire.PathScrub, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return decode[wire.ScrubStatus](t, body)
}

func TestScrubDefaults(t *testing.T) {
	n := startNode(t, nil)
	s := n.scrub(t)
	require.Equal(t, (7 * 24 * time.Hour).Seconds(), s.PeriodSeconds)
	require.Equal(t, int64(32<<20), s.BandwidthBytesPerSecond)
	require.Equal(t, n.Config.NodeID, s.NodeID)
	require.Eventually(t, func() bool { return n.scrub(t).PeriodStart != nil }, 10*time.Second, 20*time.Millisecond,
		"the scrubber starting its first period")
}

// TestScrubSettingsTakeEffect: SCRUB_BANDWIDTH=4KiB lets the scrubber read a
// 64 KiB blob no faster than 4 KiB a second, so with SCRUB_PERIOD=1s its
// pass cannot keep up and says so. The bound on the bytes read is the token
// bucket's own (rate × elapsed + one burst), which a slow machine can only
// stay further below.
func TestScrubSettingsTakeEffect(t *testing.T) {
	began := time.Now()
	n := startNode(t, map[string]string{"SCRUB_PERIOD": "1s", "SCRUB_BANDWIDTH": "4KiB", "CLUSTER_TOKEN": "tok"})
	resp, body := n.put(t, "blob-1", bytes.Repeat([]byte{7}, 64<<10))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)

	var s wire.ScrubStatus
	require.Eventually(t, func() bool {
		s = n.scrub(t)
		return s.Behind && s.ThrottledBytes >= 8<<10
	}, 20*time.Second, 20*time.Millisecond, "the scrubber reading the blob and falling behind")
	elapsed := time.Since(began)
	require.Equal(t, 1.0, s.PeriodSeconds)
	require.Equal(t, int64(4<<10), s.BandwidthBytesPerSecond)
	require.True(t, s.Running)
	require.LessOrEqual(t, float64(s.ThrottledBytes), 4096*elapsed.Seconds()+4096, "read faster than SCRUB_BANDWIDTH")

	resp, body = n.request(t, http.MethodGet, wire.PathMetrics, nil, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "\ndfs_node_scrub_behind 1\n")
	require.Contains(t, string(body), "\ndfs_node_scrub_running 1\n")
}

func TestScrubStatusNeedsTheClusterToken(t *testing.T) {
	n := startNode(t, map[string]string{"CLUSTER_TOKEN": "tok"})
	resp, body := n.request(t, http.MethodGet, wire.PathScrub, nil, map[string]string{"Authorization": ""})
	requireError(t, resp, body, http.StatusUnauthorized, "UNAUTHORIZED")
}

// TestScrubFindsCorruptionInAVolume: the scrubber works over the volumes
// layout through the blob store's interface, and a byte flipped in a
// volume file's record is found.
func TestScrubFindsCorruptionInAVolume(t *testing.T) {
	n := startNode(t, map[string]string{"STORAGE_LAYOUT": "volumes", "SCRUB_PERIOD": "1s"})
	data := bytes.Repeat([]byte("scrub me "), 500)
	id := "0badc0de-0000-4000-8000-000000000001"
	resp, body := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	vol := filepath.Join(n.DataDir, "volumes", "00000001.vol")
	b, err := os.ReadFile(vol)
	require.NoError(t, err)
	at := bytes.Index(b, []byte(id))
	require.Positive(t, at, "the record names its id")
	at += len(id) + 4 + len(data)/2 // past the header CRC, into the data
	b[at] ^= 0xff
	require.NoError(t, os.WriteFile(vol, b, 0o640))
	require.Eventually(t, func() bool { return n.scrub(t).CorruptionsFoundTotal >= 1 }, 20*time.Second, 20*time.Millisecond,
		"the scrubber finding the flipped byte")
}
