package main

import "syscall"

// weedSysProcAttr puts a weed process in a process group of its own (a
// Ctrl-C at the terminal reaches only the bench, which stops it) and has
// the kernel kill it if the bench dies without stopping it.
func weedSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
