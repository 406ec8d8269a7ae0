//go:build !unix

package files

func allocChunk(size int64) *[]byte {
	b := make([]byte, size)
	return &b
}

func freeChunk(*[]byte) {}
