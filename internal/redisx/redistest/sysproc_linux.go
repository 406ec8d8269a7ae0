package redistest

import "syscall"

// sysProcAttr makes the kernel kill the server when the test binary dies
// without cleaning up (a timeout, a kill -9). The signal is tied to the thread
// that started the child; the Go runtime ends a thread only when a goroutine
// exits while locked to it, which this package never does.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
