//go:build unix && !linux

package localcluster

import "syscall"

// setParentDeathSignal does nothing: only Linux lets a child ask to die with
// its parent, so elsewhere an orderly Stop is the only cleanup.
func setParentDeathSignal(*syscall.SysProcAttr) {}
