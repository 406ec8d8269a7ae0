//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package dirlock_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/dirlock"
	"github.com/dfs-project/dfs/internal/errs"
)

func TestSecondLockOnOneDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	first, err := dirlock.Acquire(dir, "storage node")
	require.NoError(t, err)
	t.Cleanup(func() { first.Close() })

	// flock locks belong to an open file description, so a second open in
	// the same process conflicts just as another process would.
	second, err := dirlock.Acquire(dir, "storage node")
	require.Nil(t, second)
	require.ErrorIs(t, err, dirlock.ErrHeld)
	require.Equal(t, errs.Conflict, errs.KindOf(err))
	require.ErrorContains(t, err, "data directory "+dir+" is in use")
	require.ErrorContains(t, err, fmt.Sprintf("another storage node (pid %d) holds its lock", os.Getpid()))

	b, err := os.ReadFile(filepath.Join(dir, dirlock.Name))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\n", os.Getpid()), string(b), "a refused attempt leaves the holder's record alone")
}

func TestClosedLockCanBeTakenAgain(t *testing.T) {
	dir := t.TempDir()
	first, err := dirlock.Acquire(dir, "coordinator")
	require.NoError(t, err)
	require.NoError(t, first.Close())
	require.NoError(t, first.Close(), "closing twice is harmless")

	second, err := dirlock.Acquire(dir, "coordinator")
	require.NoError(t, err)
	require.NoError(t, second.Close())
}

func TestAcquireCreatesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	l, err := dirlock.Acquire(dir, "coordinator")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, dirlock.Name, entries[0].Name())
}

func TestUnusableDirectoryIsNotReportedAsHeld(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o640))
	_, err := dirlock.Acquire(file, "coordinator")
	require.Error(t, err)
	require.NotErrorIs(t, err, dirlock.ErrHeld)
}
