// Package bufpool lends the copy buffers that transfers stream through, so
// that a small transfer does not allocate (and zero) a large buffer and a
// large one costs one buffer whatever its size.
package bufpool

import "sync"

// Size is a buffer's length: large enough that copying gigabytes costs few
// system calls, small enough that many concurrent transfers stay cheap.
const Size = 256 << 10

var pool = sync.Pool{New: func() any { b := make([]byte, Size); return &b }}

// Get lends a buffer of Size bytes; give it back with Put.
func Get() *[]byte { return pool.Get().(*[]byte) }

// Put returns a buffer from Get.
func Put(b *[]byte) { pool.Put(b) }
