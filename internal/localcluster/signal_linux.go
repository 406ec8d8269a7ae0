package localcluster

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// setParentDeathSignal makes the kernel kill a child whose parent dies
// without stopping it (a test binary killed by its timeout, a kill -9), so
// that no storage node is left holding a port. The signal is tied to the
// thread that started the child; the Go runtime ends a thread only when a
// goroutine exits while locked to it, which this package never does.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// awaitStopState waits until the kernel shows pid stopped (or no longer
// stopped). Signals are delivered asynchronously; waiting here lets
// PauseNode and ResumeNode return once the fact holds, so that a fault test
// can act on it at once.
func awaitStopState(pid int, stopped bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return errs.Wrap(errs.Conflict, err, "process %d is gone", pid)
		}
		// The state follows the command name, which is in parentheses
		// and may itself contain them.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return errs.E(errs.Other, "unexpected /proc/%d/stat: %q", pid, b)
		}
		state := b[i+2]
		if (state == 'T') == stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return errs.E(errs.Unavailable, "process %d is still in state %c", pid, state)
		}
		time.Sleep(time.Millisecond)
	}
}
