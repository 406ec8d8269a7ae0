package harness

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the harness dies
// without stopping it, so that no server outlives a killed run.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
