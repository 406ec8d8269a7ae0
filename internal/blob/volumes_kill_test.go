//go:build linux || darwin

package blob

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// The child process of TestVolumesKill9AtEachStep: the test binary run
// again with these variables set.
const (
	crashChildDir  = "DFS_BLOB_CRASH_CHILD_DIR"
	crashChildStep = "DFS_BLOB_CRASH_CHILD_STEP"
	// crashChildLarge, set, makes every second record of the flood one
	// that is written by a goroutine of its own (crashLoad).
	crashChildLarge = "DFS_BLOB_CRASH_CHILD_LARGE"
)

// crashLoad is the store options and the data of blob i in a crash child:
// with large, half the records of the flood after the first 60 are of
// ownWriteMin bytes or more, in volumes a few of them fill.
func crashLoad(large bool) (Options, func(i int) []byte) {
	if !large {
		return compactOpts, payload
	}
	return Options{VolumeSize: 2 << 20, InlineMax: 256 << 10}, func(i int) []byte {
		if i >= 60 && i%2 == 0 {
			return bigPayload(i)
		}
		return payload(i)
	}
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildDir); dir != "" {
		crashChild(dir, os.Getenv(crashChildStep), os.Getenv(crashChildLarge) != "")
		os.Exit(3) // the step was never reached
	}
	os.Exit(m.Run())
}

// crashChild writes and removes blobs in a store at dir, printing each
// acknowledged operation ("put i", "rm i") on stdout, then arms step and
// drives the store into it; the store's onCrash kills the process there with
// SIGKILL.
func crashChild(dir, step string, large bool) {
	backgroundCompaction = false
	opts, data := crashLoad(large)
	v, err := OpenVolumes(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	v.onCrash = func(string) {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	var mu sync.Mutex
	ack := func(op string, i int) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("%s %d\n", op, i)
	}
	ctx := context.Background()
	put := func(i int) error {
		_, _, err := v.Receive(ctx, vid(i), sum(data(i)), -1, bytes.NewReader(data(i)))
		if err == nil {
			ack("put", i)
		}
		return err
	}
	for i := range 60 {
		if err := put(i); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if i%3 == 1 {
			if err := v.Remove(ctx, vid(i)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			ack("rm", i)
		}
	}
	v.crashAt.Store(step)
	switch step {
	case crashCheckpointWritten:
		_ = v.checkpoint()
	case crashCompactWritten, crashCompactRenamed:
		_ = v.Compact(ctx)
	default:
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := 60 + w; i < 100000; i += 8 {
					if put(i) != nil {
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// TestVolumesKill9AtEachStep runs a real process that is SIGKILLed at each
// step of an append, a volume's creation, a checkpoint and a compaction, and
// checks that the directory then serves every blob the process
// acknowledged, intact, and none it acknowledged removing.
func TestVolumesKill9AtEachStep(t *testing.T) {
	for _, step := range []string{crashVolumeCreated, crashAppended, crashSynced, crashCheckpointWritten, crashCompactWritten, crashCompactRenamed} {
		t.Run(step, func(t *testing.T) { killAtStep(t, step, false) })
	}
}

// TestVolumesKill9AtEachStepLargeRecords is TestVolumesKill9AtEachStep for
// the steps of an append, with records written by goroutines of their own
// among the small ones.
func TestVolumesKill9AtEachStepLargeRecords(t *testing.T) {
	for _, step := range []string{crashVolumeCreated, crashAppended, crashSynced} {
		t.Run(step, func(t *testing.T) { killAtStep(t, step, true) })
	}
}

func killAtStep(t *testing.T, step string, large bool) {
	t.Helper()
	opts, data := crashLoad(large)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildDir+"="+dir, crashChildStep+"="+step)
	if large {
		cmd.Env = append(cmd.Env, crashChildLarge+"=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stderr: %s", &stderr)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child dies of SIGKILL at %s: %v; stderr: %s", step, err, &stderr)

	held, removed := map[int]bool{}, map[int]bool{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		op, n, ok := strings.Cut(sc.Text(), " ")
		i, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue // a line the kill cut short
		}
		if op == "rm" {
			removed[i], held[i] = true, false
		} else {
			held[i] = true
		}
	}
	require.GreaterOrEqual(t, len(held), 60)

	manualCompaction(t)
	v := openVolumes(t, dir, opts)
	for i, ok := range held {
		if ok {
			requireHeld(t, v, vid(i), data(i))
		}
	}
	for i := range removed {
		requireGone(t, v, vid(i))
	}
	putV(t, v, vid(1<<20), payload(7))
	require.NoError(t, v.Compact(context.Background()))
	require.NoError(t, v.Close())
	v = openVolumes(t, dir, opts)
	requireHeld(t, v, vid(1<<20), payload(7))
}
