package membership

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
)

const (
	diskA = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	diskB = "9b1d4a3e-6c2f-4e8a-b7d0-1a2b3c4d5e6f"
)

// storedNode puts node-1 at 127.0.0.1:9001 in the store with the given
// status and disk identity, having been on the ring before, and loads the
// ring from it.
func storedNode(t *testing.T, h *harness, status meta.NodeStatus, disk string) {
	t.Helper()
	h.store.put(meta.Node{ID: "node-1", Host: "127.0.0.1", Port: 9001, Status: status, RegisteredAt: epoch, LastHealthyAt: &epoch, DiskID: disk})
	require.NoError(t, h.reg.Load(context.Background()))
	h.store.takeOps()
}

func TestRegistrationComparesTheDiskIdentity(t *testing.T) {
	cases := []struct {
		name     string
		status   meta.NodeStatus // of node-1 as stored
		stored   string          // its stored disk identity
		port     int             // where it registers from
		reported string          // the identity it reports
		kind     errs.Kind       // of Register's error; errs.Other for none
		wantDisk string
		wantPort int
		events   []string
	}{
		{"the same disk is a heartbeat", meta.NodeHealthy, diskA, 9001, diskA, errs.Other, diskA, 9001, nil},
		{"an older node reports none", meta.NodeHealthy, diskA, 9001, "", errs.Other, diskA, 9001, nil},
		{"an unknown identity is adopted", meta.NodeHealthy, "", 9001, diskA, errs.Other, diskA, 9001, nil},
		{"a healthy node with a new disk", meta.NodeHealthy, diskA, 9001, diskB, errs.Other, diskB, 9001, []string{"DISK_REPLACED node-1 @1"}},
		{"an evicted node with a new disk", meta.NodeUnhealthy, diskA, 9001, diskB, errs.Other, diskB, 9001, []string{"DISK_REPLACED node-1 @1"}},
		{"an evicted node at a new address with a new disk", meta.NodeUnhealthy, diskA, 9101, diskB, errs.Other, diskB, 9101, []string{"DISK_REPLACED node-1 @1"}},
		{"a healthy node at a new address is refused, disk and all", meta.NodeHealthy, diskA, 9101, diskB, errs.Conflict, diskA, 9001, nil},
		{"a deregistered node records nothing", meta.NodeDeregistered, diskA, 9001, diskB, errs.Other, diskA, 9001, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			storedNode(t, h, tc.status, tc.stored)
			before := h.node(t, "node-1")
			onRing := h.reg.Ring().Has("node-1")

			_, err := h.reg.Register(context.Background(), Announcement{NodeID: "node-1", Host: "127.0.0.1", Port: tc.port, DiskID: tc.reported})
			if tc.kind == errs.Other {
				require.NoError(t, err)
			} else {
				require.Equal(t, tc.kind, errs.KindOf(err), "%v", err)
			}

			got := h.node(t, "node-1")
			require.Equal(t, tc.wantDisk, got.DiskID)
			require.Equal(t, tc.wantPort, got.Port)
			require.Equal(t, tc.status, got.Status, "a disk identity never changes the status")
			require.Equal(t, onRing, h.reg.Ring().Has("node-1"), "nor the ring")
			require.Equal(t, tc.events, h.events.takeEpochs())
			require.Equal(t, int64(len(tc.events)), h.store.bumps(), "only a replaced disk bumps the epoch")
			if tc.wantDisk == before.DiskID && tc.wantPort == before.Port {
				require.Equal(t, before, got, "nothing is written")
			}
			warned := h.logs.matching(slog.LevelWarn, "is back with another disk")
			if len(tc.events) > 0 {
				require.Equal(t, []string{"node node-1 is back with another disk (identity " + diskB + ", was " + diskA +
					"): the copies placed on it are gone and will be rebuilt"}, warned)
			} else {
				require.Empty(t, warned)
			}
		})
	}
}

func TestANewNodeIsCreatedWithItsDiskIdentity(t *testing.T) {
	h := newHarness(t, nil)
	n := h.registerDisk(t, "node-1", 9001, diskA)
	require.Equal(t, diskA, n.DiskID)
	require.Equal(t, diskA, h.node(t, "node-1").DiskID)
	require.Empty(t, h.events.take())
	require.Zero(t, h.store.bumps(), "a node off the ring moves no data: no epoch")
}

func TestRegistrationRejectsABadDiskIdentity(t *testing.T) {
	h := newHarness(t, nil)
	for _, bad := range []string{"-a", "a b", "a/b", string(make([]byte, 65))} {
		_, err := h.reg.Register(context.Background(), Announcement{NodeID: "node-1", Host: "h", Port: 1, DiskID: bad})
		require.Equal(t, errs.Invalid, errs.KindOf(err), "%q", bad)
		require.ErrorContains(t, err, "invalid disk id")
	}
}

func TestProbeComparesTheDiskIdentity(t *testing.T) {
	cases := []struct {
		name     string
		status   meta.NodeStatus
		stored   string
		probeErr error
		reported string
		wantDisk string
		events   []string
	}{
		{"the same disk", meta.NodeHealthy, diskA, nil, diskA, diskA, nil},
		{"an older node reports none", meta.NodeHealthy, diskA, nil, "", diskA, nil},
		{"an unknown identity is adopted", meta.NodeHealthy, "", nil, diskA, diskA, nil},
		{"a healthy node with a new disk", meta.NodeHealthy, diskA, nil, diskB, diskB, []string{"DISK_REPLACED node-1 @1"}},
		{"an evicted node with a new disk", meta.NodeUnhealthy, diskA, nil, diskB, diskB, []string{"DISK_REPLACED node-1 @1"}},
		{"a failed probe says nothing about the disk", meta.NodeHealthy, diskA, errDown, diskB, diskA, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.SuccessThreshold = 3; o.FailureThreshold = 3 })
			storedNode(t, h, tc.status, tc.stored)
			h.prober.set(url(9001), tc.probeErr)
			h.prober.setDisk(url(9001), tc.reported)
			onRing := h.reg.Ring().Has("node-1")

			h.sweep(t)
			got := h.node(t, "node-1")
			require.Equal(t, tc.wantDisk, got.DiskID)
			require.Equal(t, tc.status, got.Status)
			require.Equal(t, onRing, h.reg.Ring().Has("node-1"))
			require.Equal(t, tc.events, h.events.takeEpochs())
			require.Equal(t, int64(len(tc.events)), h.store.bumps())

			// The next probe finds the identity recorded: no second event.
			h.sweep(t)
			require.Empty(t, h.events.take())
		})
	}
}

func TestAReplacedDiskReachingTheThresholdIsReportedWithItsRecovery(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SuccessThreshold = 1 })
	storedNode(t, h, meta.NodeUnhealthy, diskA)
	h.prober.setDisk(url(9001), diskB)
	h.sweep(t)
	require.Equal(t, []string{"DISK_REPLACED node-1 @1", "RECOVERED node-1 @1"}, h.events.takeEpochs(),
		"one change, one epoch, both facts")
	require.Equal(t, []string{"bump 1", "lost node-1", "update node-1 HEALTHY"}, h.store.takeOps(),
		"the epoch first, then the lost copies, then the new identity")
	require.True(t, h.reg.Ring().Has("node-1"))
}

// A replaced disk's copies are marked lost before the node's new identity
// is written, on the registration path as on the probe path: a crash after
// the identity was written would otherwise leave nothing that says so.
func TestAReplacedDiskMarksItsCopiesLostBeforeTheNewIdentity(t *testing.T) {
	h := newHarness(t, nil)
	storedNode(t, h, meta.NodeHealthy, diskA)
	_, err := h.reg.Register(context.Background(), Announcement{NodeID: "node-1", Host: "127.0.0.1", Port: 9001, DiskID: diskB})
	require.NoError(t, err)
	require.Equal(t, []string{"bump 1", "lost node-1", "update node-1 HEALTHY"}, h.store.takeOps())
}

// TestAProbeOlderThanARegistrationDoesNotUndoIt: the node answers a probe
// with its old identity, restarts over a new disk and registers while the
// probe's answer is on its way. The registration is news; the late probe
// answer is not.
func TestAProbeOlderThanARegistrationDoesNotUndoIt(t *testing.T) {
	h := newHarness(t, nil)
	storedNode(t, h, meta.NodeHealthy, diskA)
	h.prober.setDisk(url(9001), diskA)
	h.prober.onProbe = func(string) {
		h.prober.onProbe = nil
		_, err := h.reg.Register(context.Background(), Announcement{NodeID: "node-1", Host: "127.0.0.1", Port: 9001, DiskID: diskB})
		require.NoError(t, err)
	}
	h.sweep(t)
	require.Equal(t, diskB, h.node(t, "node-1").DiskID)
	require.Equal(t, []string{"DISK_REPLACED node-1 @1"}, h.events.takeEpochs())

	// Once the node answers with the new identity, nothing more happens.
	h.prober.setDisk(url(9001), diskB)
	h.sweep(t)
	require.Empty(t, h.events.take())
	require.Equal(t, int64(1), h.store.bumps())
}
