package ring

import (
	"strconv"
	"testing"
)

func benchRing() (*Ring, []string) {
	nodes := make([]string, 100)
	for i := range nodes {
		nodes[i] = "storage-node-" + strconv.Itoa(i)
	}
	keys := make([]string, 1024)
	for i := range keys {
		// The shape of a fileId: a 36-character UUID string.
		keys[i] = "3f2b8c1e-9a4d-4e6f-b7c2-" + strconv.FormatInt(100000000000+int64(i)*7919, 10)
	}
	return New(100, nodes...), keys
}

func BenchmarkPosition(b *testing.B) {
	_, keys := benchRing()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Position(keys[i&1023])
	}
}

func BenchmarkLookup(b *testing.B) {
	r, keys := benchRing()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Lookup(keys[i&1023])
	}
}

func BenchmarkPreference3(b *testing.B) {
	r, keys := benchRing()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Preference(keys[i&1023], 3)
	}
}

func BenchmarkAppendPreference3(b *testing.B) {
	r, keys := benchRing()
	dst := make([]string, 0, 3)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dst = r.AppendPreference(dst[:0], keys[i&1023], 3)
	}
}

func BenchmarkNew100x100(b *testing.B) {
	r, _ := benchRing()
	nodes := r.Nodes()
	b.ReportAllocs()
	for b.Loop() {
		New(100, nodes...)
	}
}

func BenchmarkWithOneNode(b *testing.B) {
	r, _ := benchRing()
	b.ReportAllocs()
	for b.Loop() {
		r.With("newcomer")
	}
}

func BenchmarkWithoutOneNode(b *testing.B) {
	r, _ := benchRing()
	b.ReportAllocs()
	for b.Loop() {
		r.Without("storage-node-42")
	}
}

func BenchmarkRangesIncluding3(b *testing.B) {
	r, _ := benchRing()
	b.ReportAllocs()
	for b.Loop() {
		r.RangesIncluding("storage-node-42", 3)
	}
}
