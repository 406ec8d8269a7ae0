package blob

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/dirlock"
	"github.com/dfs-project/dfs/internal/errs"
)

func TestIdentityIsRecordedAtTheFirstOpenAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var synced []string
	restore := syncDir
	syncDir = func(d string) error { synced = append(synced, d); return restore(d) }
	t.Cleanup(func() { syncDir = restore })

	first := openDisk(t, dir)
	id := first.Identity()
	u, err := uuid.Parse(id)
	require.NoError(t, err)
	require.Equal(t, u.String(), id, "canonical lower-case form")
	b, err := os.ReadFile(filepath.Join(dir, "disk-id"))
	require.NoError(t, err)
	require.Equal(t, id+"\n", string(b))
	require.Contains(t, synced, first.Dir(), "the new name is made durable")
	receive(t, first, testID, []byte("kept"))
	require.NoError(t, first.Close())

	again := openDisk(t, dir)
	require.Equal(t, id, again.Identity(), "a restart keeps the identity")
	require.Equal(t, int64(1), again.Recovery().Blobs)
	list, err := again.Enumerate(context.Background(), "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1, "the identity file is not a blob")
	require.NoError(t, again.Close())

	require.NoError(t, os.RemoveAll(dir))
	wiped := openDisk(t, dir)
	require.NotEqual(t, id, wiped.Identity(), "a wiped directory is a new disk")
	require.Zero(t, wiped.Recovery().Blobs)
}

func TestIdentityWithoutATrailingNewlineIsAccepted(t *testing.T) {
	dir := t.TempDir()
	const id = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "disk-id"), []byte(id), 0o640))
	require.Equal(t, id, openDisk(t, dir).Identity())
}

func TestMalformedIdentityRefusesToOpen(t *testing.T) {
	cases := []struct{ name, content string }{
		{"empty", ""},
		{"a newline only", "\n"},
		{"not a UUID", "node-1\n"},
		{"upper case", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8\n"},
		{"no hyphens", "6ba7b8109dad11d180b400c04fd430c8\n"},
		{"braces", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}\n"},
		{"two lines", "6ba7b810-9dad-11d1-80b4-00c04fd430c8\n6ba7b810-9dad-11d1-80b4-00c04fd430c9\n"},
		{"trailing space", "6ba7b810-9dad-11d1-80b4-00c04fd430c8 \n"},
		{"huge", strings.Repeat("x", 10000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "disk-id")
			require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o640))
			_, err := OpenDisk(dir, Options{})
			require.Equal(t, errs.Invalid, errs.KindOf(err), "%v", err)
			require.ErrorContains(t, err, "identity file "+p+" is malformed")
			require.Less(t, len(err.Error()), 1000, "the message quotes a bounded part of the file")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			require.Equal(t, tc.content, string(b), "a refused identity is left for the operator")
		})
	}
}

func TestUnreadableIdentityRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "disk-id"), 0o750))
	_, err := OpenDisk(dir, Options{})
	require.Error(t, err)
	require.ErrorContains(t, err, "identity file")
}

func TestInterruptedIdentityWriteIsCleanedUp(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, ".tmp-disk-id-12345")
	require.NoError(t, os.WriteFile(left, []byte("half"), 0o640))
	d := openDisk(t, dir)
	require.NotEmpty(t, d.Identity())
	require.NoFileExists(t, left)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{dirlock.Name, "disk-id", layoutName}, names)
}
