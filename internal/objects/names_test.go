package objects

import (
	"net"
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestValidBucketName checks the byte loop against the rules written as a
// regular expression and plain string tests, for any name.
func TestValidBucketName(t *testing.T) {
	rule := regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	reference := func(name string) bool {
		return rule.MatchString(name) && !strings.Contains(name, "..") && net.ParseIP(name) == nil &&
			!strings.HasPrefix(name, "xn--") && !strings.HasPrefix(name, "sthree-") &&
			!strings.HasSuffix(name, "-s3alias") && !strings.HasSuffix(name, "--ol-s3")
	}
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.StringOfN(rapid.SampledFrom([]rune("ab9.0-1xnsthree-Z_é:")), 0, 70, -1).Draw(t, "name")
		if got, want := ValidBucketName(name), reference(name); got != want {
			t.Fatalf("ValidBucketName(%q) = %v, want %v", name, got, want)
		}
	})
	for name, want := range map[string]bool{
		"photos": true, "my.bucket-1": true, "192.168.0.1": false, "1.2.3": true, "ab": false, strings.Repeat("a", 63): true,
		strings.Repeat("a", 64): false, "a..b": false, "-ab": false, "ab-": false, "Abc": false, "xn--abc": false,
		"sthree-x": false, "x-s3alias": false, "x--ol-s3": false, "a_b": false,
	} {
		if got := ValidBucketName(name); got != want {
			t.Errorf("ValidBucketName(%q) = %v, want %v", name, got, want)
		}
	}
}

func BenchmarkValidBucketName(b *testing.B) {
	for b.Loop() {
		ValidBucketName("bench-bucket.example")
	}
}
