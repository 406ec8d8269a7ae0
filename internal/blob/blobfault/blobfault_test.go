package blobfault_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/blob/blobtest"
	"github.com/dfs-project/dfs/internal/errs"
)

// inlineMax keeps a 1 KiB blob in a volume and a 4 KiB one in a file of its
// own in the volumes layout.
const inlineMax = 2 << 10

func open(t *testing.T, layout blob.Layout, dir string) blob.Store {
	t.Helper()
	opts := blob.Options{InlineMax: inlineMax, VolumeSize: 1 << 20}
	var (
		s   blob.Store
		err error
	)
	if layout == blob.LayoutVolumes {
		s, err = blob.OpenVolumes(dir, opts)
	} else {
		s, err = blob.OpenDisk(dir, opts)
	}
	require.NoError(t, err)
	return s
}

func put(t *testing.T, s blob.Store, data []byte) string {
	t.Helper()
	id := uuid.NewString()
	_, _, err := s.Receive(context.Background(), id, blobtest.Checksum(data), int64(len(data)), bytes.NewReader(data))
	require.NoError(t, err)
	return id
}

// TestFaultsInBothLayouts gives copies of both kinds (a record in a volume,
// a file of its own) the faults the helpers make, beside a running store
// and across a restart, and checks that the store itself sees each one.
func TestFaultsInBothLayouts(t *testing.T) {
	for _, layout := range []blob.Layout{blob.LayoutFiles, blob.LayoutVolumes} {
		for _, size := range []int{1 << 10, 4 << 10} {
			t.Run(fmt.Sprintf("%s/%d", layout, size), func(t *testing.T) {
				testFaults(t, layout, size)
			})
		}
	}
}

func testFaults(t *testing.T, layout blob.Layout, size int) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, layout, dir)
	var ids []string
	var data [][]byte
	for i := range 4 {
		b := blobtest.RandomBytes(uint64(i+size), size)
		ids, data = append(ids, put(t, s, b)), append(data, b)
	}
	loc := blobfault.Locate(t, dir, ids[0])
	require.Equal(t, layout == blob.LayoutVolumes && size <= inlineMax, loc.Sidecar == "", "a record has no sidecar: %+v", loc)
	for i, id := range ids {
		got, ok := blobfault.Read(t, dir, id)
		require.True(t, ok)
		require.Equal(t, data[i], got, "the bytes on disk are the blob's")
		require.True(t, blobfault.Holds(t, dir, id))
	}
	_, held := blobfault.Read(t, dir, uuid.NewString())
	require.False(t, held, "an unknown id has no copy")

	// Bit rot beside the running store: its rehash sees the copy no longer
	// matching its checksum, and a good copy received over it replaces it.
	blobfault.FlipByte(t, dir, ids[0])
	got, ok := blobfault.Read(t, dir, ids[0])
	require.True(t, ok, "a corrupt copy is a copy still")
	require.Len(t, got, size)
	require.NotEqual(t, data[0], got)
	c, err := s.(blob.Rehasher).Rehash(ctx, ids[0])
	require.NoError(t, err)
	require.False(t, c.Intact(), "%+v", c)
	_, _, err = s.Receive(ctx, ids[0], blobtest.Checksum(data[0]), int64(size), bytes.NewReader(data[0]))
	require.NoError(t, err)
	got, _ = blobfault.Read(t, dir, ids[0])
	require.Equal(t, data[0], got, "the copy found is the replacement")

	// A byte at a chosen offset, the last one here.
	blobfault.FlipByteAt(t, dir, ids[0], int64(size-1))
	got, _ = blobfault.Read(t, dir, ids[0])
	want := bytes.Clone(data[0])
	want[size-1] ^= 0xff
	require.Equal(t, want, got, "only the byte asked is flipped")
	_, _, err = s.Receive(ctx, ids[0], blobtest.Checksum(data[0]), int64(size), bytes.NewReader(data[0]))
	require.NoError(t, err)

	// A removed blob has no copy, even though its old record is still in a
	// volume.
	require.NoError(t, s.(blob.Remover).Remove(ctx, ids[3]))
	require.False(t, blobfault.Holds(t, dir, ids[3]))
	all, err := blob.LocateCopies(dir)
	require.NoError(t, err)
	listed, err := s.Enumerate(ctx, "", 100)
	require.NoError(t, err)
	require.Len(t, all, len(listed), "%v", all)
	for _, info := range listed {
		require.Equal(t, blobfault.Locate(t, dir, info.ID), all[info.ID], "the listing finds what the store lists")
	}

	// Bit rot and a lost copy on the stopped node.
	blobfault.FlipByte(t, dir, ids[1])
	require.NoError(t, s.Close())
	blobfault.Destroy(t, dir, ids[2])
	s = open(t, layout, dir)
	defer s.Close()
	_, err = s.Stat(ctx, ids[2])
	require.Equal(t, errs.NotFound, errs.KindOf(err), "the destroyed copy is gone after a restart: %v", err)
	require.False(t, blobfault.Holds(t, dir, ids[2]))
	if c, err := s.(blob.Rehasher).Rehash(ctx, ids[1]); err == nil {
		require.False(t, c.Intact(), "%+v", c)
	} else {
		// A record scanned at start that fails its checksum is set aside.
		require.Equal(t, errs.NotFound, errs.KindOf(err), "%v", err)
	}
	got, ok = blobfault.Read(t, dir, ids[0])
	require.True(t, ok)
	require.Equal(t, data[0], got)
}
