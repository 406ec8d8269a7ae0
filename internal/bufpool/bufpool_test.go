package bufpool

import "testing"

func TestBuffersHaveTheDocumentedSize(t *testing.T) {
	b := Get()
	if len(*b) != Size {
		t.Fatalf("buffer of %d bytes, want %d", len(*b), Size)
	}
	Put(b)
}

func TestGetAndPutDoNotAllocateOnceWarm(t *testing.T) {
	Put(Get())
	if n := testing.AllocsPerRun(100, func() { Put(Get()) }); n > 0 {
		t.Fatalf("%v allocations per Get/Put", n)
	}
}
