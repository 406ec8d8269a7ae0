//go:build unix

package files

import "syscall"

// allocChunk maps size bytes of anonymous memory for a chunk buffer. The
// buffers live outside the Go heap, so the collector neither scans them nor
// counts them as live: with them inside, the heap's goal, twice what is
// live, grew by twice the buffers, and the coordinator's memory with it.
func allocChunk(size int64) *[]byte {
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		b = make([]byte, size) // no mapping to be had: the heap will do
	}
	return &b
}

// freeChunk unmaps a buffer from allocChunk; nothing may refer to it after.
func freeChunk(b *[]byte) {
	if err := syscall.Munmap(*b); err != nil {
		// A heap buffer from allocChunk's fallback: the collector has it.
		return
	}
}
