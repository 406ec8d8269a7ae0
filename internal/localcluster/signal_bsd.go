//go:build unix && !linux

package localcluster

import "syscall"

// setParentDeathSignal does nothing: only Linux lets a child ask to die with
// its parent, so elsewhere an orderly Stop is the only cleanup.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// awaitStopState returns at once: without /proc there is no portable way to
// watch another process stop, so a pause takes effect shortly after
// PauseNode returns.
func awaitStopState(int, bool) error { return nil }
