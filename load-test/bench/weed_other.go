//go:build !linux

package main

import "syscall"

// weedSysProcAttr puts a weed process in a process group of its own, so
// that a Ctrl-C at the terminal reaches only the bench, which stops it.
func weedSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
