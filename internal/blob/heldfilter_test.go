package blob

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/errs"
)

func TestHeldFilter(t *testing.T) {
	f := newHeldFilter()
	for i := range 1000 {
		require.False(t, f.mayHold(vid(i)), "an empty filter holds nothing")
	}
	f.add(vid(7))
	require.True(t, f.mayHold(vid(7)))
	strays := 0
	for i := range 1000 {
		if i != 7 && f.mayHold(vid(i)) {
			strays++
		}
	}
	require.LessOrEqual(t, strays, 1, "one bit in a million answers for at most a stray id")
}

// TestSmallWriteSeesTheFileOfItsID checks the one place the volumes layout
// trusts the filter on a write: a small copy of an id the Disk holds as a
// file must meet that file, whether the file was written since the open or
// found by it.
func TestSmallWriteSeesTheFileOfItsID(t *testing.T) {
	large := bytes.Repeat([]byte("large "), 100)
	small := []byte("small")
	o := Options{InlineMax: 64}
	ctx := context.Background()
	for _, reopen := range []bool{false, true} {
		dir := t.TempDir()
		v := openVolumes(t, dir, o)
		putV(t, v, vid(1), large)
		if reopen {
			require.NoError(t, v.Close())
			v = openVolumes(t, dir, o)
		}
		_, _, err := v.Receive(ctx, vid(1), sum(small), int64(len(small)), bytes.NewReader(small))
		require.Equal(t, errs.Conflict, errs.KindOf(err), "reopened %v: %v", reopen, err)
		_, created, err := v.Receive(ctx, vid(1), sum(large), int64(len(large)), bytes.NewReader(large))
		require.NoError(t, err)
		require.False(t, created, "reopened %v: the file is the copy", reopen)
		requireHeld(t, v, vid(1), large)
	}
}
