package sigv4

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestFoldingFastPath checks the law the header fast path relies on: a
// value needsFolding lets through is its own canonical form.
func TestFoldingFastPath(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.StringOf(rapid.SampledFrom([]rune{'a', 'Z', '0', ' ', '\t', '\r', '\n', '\u00a0', '\u0085', '\u2003', 'é', ';', '='})).Draw(t, "v")
		if !needsFolding(v) && strings.Join(strings.Fields(v), " ") != v {
			t.Fatalf("%q is not canonical, but would be signed as it came", v)
		}
	})
	for _, v := range []string{" a", "a ", "a  b", "a\tb", "a\u00a0b"} {
		if !needsFolding(v) {
			t.Errorf("%q needs folding", v)
		}
	}
}
