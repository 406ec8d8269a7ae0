//go:build unix

package localcluster

import (
	"errors"
	"os"
	"syscall"
)

func checkPlatform() error { return nil }

// newSysProcAttr puts a child in a process group of its own: a Ctrl-C at the
// terminal then reaches only the parent, which stops the children in order
// instead of racing them.
func newSysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(a)
	return a
}

// The signals the cluster sends are named by what they do, so that the rest of
// the package does not depend on a Unix signal set.
type signal int

const (
	sigTerminate signal = iota
	sigKill
	sigPause
	sigResume
	// sigSoftStop asks HAProxy to stop accepting and exit once its
	// connections end (SIGUSR1); SIGTERM is its hard stop.
	sigSoftStop
)

var unixSignals = map[signal]syscall.Signal{
	sigTerminate: syscall.SIGTERM,
	sigKill:      syscall.SIGKILL,
	sigPause:     syscall.SIGSTOP,
	sigResume:    syscall.SIGCONT,
	sigSoftStop:  syscall.SIGUSR1,
}

// signalGroup sends s to the process group led by pid. A group that no longer
// exists gives os.ErrProcessDone.
func signalGroup(pid int, s signal) error {
	err := syscall.Kill(-pid, unixSignals[s])
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// processGone reports whether no process has the id pid.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
