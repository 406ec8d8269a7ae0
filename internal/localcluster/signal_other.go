//go:build !unix

package localcluster

import (
	"syscall"

	"github.com/dfs-project/dfs/internal/errs"
)

// A local cluster pauses, resumes and stops processes with Unix signals; on
// other systems the package compiles (so cmd/dfs does) but cannot run one.

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

func checkPlatform() error { return errs.E(errs.Invalid, "local clusters need a Unix system") }

func newSysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, signal) error { return checkPlatform() }

func processGone(int) bool { return false }

func awaitStopState(int, bool) error { return checkPlatform() }
