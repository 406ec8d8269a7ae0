//go:build linux

package harness

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/testenv"
	"github.com/stretchr/testify/require"
)

// soakDuration is the CI soak's length; `make chaos DURATION=…` runs longer.
const soakDuration = 60 * time.Second

// logWriter passes each write to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestChaosSoak runs the chaos soak for a minute on real processes: random
// node kills, a join, a coordinator kill, a Redis kill and a leave under
// load; then every acknowledged file must read back byte-identical, the
// cluster must settle on its own on the invariant of package clustercheck
// (placement by the ring, every copy on disk, no orphan) and, after one
// repair pass, every file be ACTIVE with RF verified copies.
func TestChaosSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a 60-second soak on real processes; skipped with -short")
	}
	redis := RedisAvailable()
	if !redis && testenv.InCI() {
		t.Fatal("redis-server is not on PATH; the soak restarts a private Redis")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	_, err := localcluster.Build(ctx, bin)
	require.NoError(t, err)

	dataDir := filepath.Join(root, "cluster")
	rep, err := Run(ctx, Options{
		BinDir:    bin,
		DataDir:   dataDir,
		Redis:     redis,
		Duration:  soakDuration,
		Traffic:   TrafficOptions{Workers: 4},
		Plan:      SoakPlan{Duration: soakDuration},
		Repair:    true,
		Invariant: true,
		Log:       logWriter{t},
		Progress:  10 * time.Second,
	})
	require.NoError(t, err)
	var text bytes.Buffer
	rep.WriteText(&text)
	t.Log(text.String())
	if !rep.OK() {
		logTails(t, filepath.Join(dataDir, "logs"))
	}

	require.Positive(t, rep.Acked, "the soak stored files")
	require.Empty(t, rep.Violations, "no promise broken during the soak")
	require.Empty(t, rep.Exits, "no process ended unasked")
	require.Equal(t, rep.Final.Checked, rep.Final.Intact, "every acknowledged file reads back byte-identical: %v", rep.Final.Bad)
	require.NotNil(t, rep.Invariant)
	require.True(t, rep.Invariant.OK, "the cluster settled by itself on the invariant: %s %s %v",
		rep.Invariant.Summary, rep.Invariant.Error, rep.Invariant.Violations)
	require.NotNil(t, rep.Repair)
	require.True(t, rep.Repair.OK(), "after one repair pass every file is ACTIVE with RF verified copies: %v", rep.Repair.Bad)

	// The soak proves something only if its faults happened.
	done := map[string]bool{}
	for _, e := range rep.Events {
		require.Empty(t, e.Err, "%s %s failed", e.Action, e.Target)
		done[e.Action+" "+e.Target] = true
		if e.Action == "kill" && strings.HasPrefix(e.Target, "node-") {
			done["kill a node"] = true
		}
	}
	want := []string{"kill a node", "join node-4", "kill coordinator", "restart coordinator"}
	if redis {
		want = append(want, "kill redis", "restart redis")
	}
	for _, w := range want {
		require.True(t, done[w], "the soak did %q; events: %+v", w, rep.Events)
	}
	left := false
	for _, e := range rep.Events {
		left = left || (e.Action == "leave" && strings.HasPrefix(e.Target, "node-"))
	}
	require.True(t, left, "a node left; events: %+v", rep.Events)
}

// logTails logs the end of every process log, for a failed soak.
func logTails(t *testing.T, dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("last lines of %s:\n%s", e.Name(), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}
