package harness

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{errs.Wrap(errs.Unavailable, &client.APIError{Status: 503, Code: "STORAGE_UNAVAILABLE"}, ""), "503 STORAGE_UNAVAILABLE"},
		{errs.Wrap(errs.Other, &client.APIError{Status: 502}, ""), "502"},
		{errs.Wrap(errs.Unavailable, &client.ConnError{URL: "http://x", Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}, ""), "no answer: connection refused"},
		{errs.Wrap(errs.Unavailable, &client.ConnError{URL: "http://x", Err: syscall.ECONNRESET}, ""), "no answer: connection reset"},
		{errs.Wrap(errs.Other, context.DeadlineExceeded, "upload"), "timeout"},
		{errs.E(errs.Corrupt, "byte 3 differs"), "corrupt"},
		{errs.E(errs.Unavailable, "the download broke off after 3 of 9 bytes"), "transfer broke off"},
		{fmt.Errorf("something\nelse"), "other: something"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			require.Equal(t, tt.want, Classify(tt.err))
		})
	}
}

func TestRecorderSnapshot(t *testing.T) {
	r := NewRecorder()
	start := time.Now()
	r.OK(KindDownload, start, 100, "node-1")
	r.OK(KindDownload, start, 50, "node-2")
	r.OK(KindUpload, start, 10, "")
	r.Fail(KindUpload, start, errs.E(errs.Corrupt, "x"))
	r.Violate(KindDownload, "id-1", "wrong bytes")

	snap := r.Snapshot()
	require.Len(t, snap.Kinds, 2)
	up, down := snap.Kinds[0], snap.Kinds[1]
	require.Equal(t, KindUpload, up.Kind, "uploads are listed first")
	require.EqualValues(t, 2, up.Requests)
	require.EqualValues(t, 1, up.Failures)
	require.Equal(t, map[string]uint64{"corrupt": 1}, up.Classes)
	require.EqualValues(t, 150, down.Bytes)
	require.Equal(t, map[string]uint64{"node-1": 1, "node-2": 1}, down.ServedBy)
	require.Len(t, snap.Failures, 1)
	require.Equal(t, []Violation{{Kind: KindDownload, At: snap.Violations[0].At, FileID: "id-1", What: "wrong bytes"}}, snap.Violations)
}
