package remote_test

import (
	"context"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/blob/blobtest"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/nodeclient/remote"
	"github.com/dfs-project/dfs/internal/storagenode"
)

const token = "conformance-token"

// TestNodeConformance runs the blob store suite against a real storage node:
// the node's handler over a disk store in a fresh directory, served on a
// loopback port and reached through the node client. Three subtests ask for
// what a write over HTTP cannot express; they are excluded, with the reason
// in the test log, and every other subtest runs. (One more thing cannot be said over HTTP,
// the empty id, whose path would name the listing: the adapter refuses it
// itself, and every other bad id of InvalidIDs is refused by the node.)
func TestNodeConformance(t *testing.T) {
	const unreadBody = "the node client sends a body under 1 MiB without waiting for the node's go-ahead " +
		"(Expect: 100-continue would cost a round trip per small write), so the body of a write that " +
		"changes nothing is read even though the node answers without it"
	excluded := []blobtest.Exclude{
		{Test: "SameChecksumIsNoop", Reason: unreadBody},
		{Test: "FullStoreConfirmsWithoutReading", Reason: unreadBody},
		{Test: "DeclaredSizeIsEnforced", Reason: "over HTTP the declared size is the Content-Length, and the " +
			"client's transport refuses to send a body of another length, so the node never sees one " +
			"(a body cut short reaches it: BrokenBodyPublishesNothing)"},
	}
	blobtest.Run(t, func(t *testing.T, opts blob.Options) blobtest.Subject {
		dir := t.TempDir()
		disk, err := blob.OpenDisk(dir, opts)
		require.NoError(t, err)
		cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{
			"STORAGE_DATA_DIRECTORY": dir,
			"CLUSTER_TOKEN":          token,
		}))
		require.NoError(t, err)
		node, err := storagenode.NewWithStore(cfg, disk, slog.New(slog.DiscardHandler), nil)
		require.NoError(t, err)
		srv := httptest.NewServer(node.Handler())
		t.Cleanup(srv.Close)
		t.Cleanup(func() { _ = node.Close() })

		s, err := remote.Open(context.Background(), nodeclient.New(nodeclient.Options{Token: token}), srv.URL)
		require.NoError(t, err)
		return blobtest.Subject{
			Store:   closingNode{Store: s, node: node},
			Corrupt: func(t *testing.T, id string) { corrupt(t, dir, id) },
			// A node checks what it sends: a corrupt blob is refused.
			ChecksReads: true,
		}
	}, excluded...)
}

// closingNode closes the node's own store when the suite closes the store
// under test, so that the suite sees what a running node answers once its
// store is closed.
type closingNode struct {
	*remote.Store
	node *storagenode.Server
}

func (c closingNode) Close() error { return c.node.Close() }

// corrupt corrupts the file named id under dir, wherever the layout keeps it.
func corrupt(t *testing.T, dir, id string) {
	t.Helper()
	var path string
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == id && e.Type().IsRegular() {
			path = p
		}
		return err
	}))
	require.NotEmpty(t, path, "blob %s on disk", id)
	blobtest.CorruptFile(t, path)
}
