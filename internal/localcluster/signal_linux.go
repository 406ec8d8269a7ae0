package localcluster

import "syscall"

// setParentDeathSignal makes the kernel kill a child whose parent dies
// without stopping it (a test binary killed by its timeout, a kill -9), so
// that no storage node is left holding a port. The signal is tied to the
// thread that started the child; the Go runtime ends a thread only when a
// goroutine exits while locked to it, which this package never does.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
