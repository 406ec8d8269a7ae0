package objects

import (
	"net"
	"strings"
)

// ValidBucketName applies S3's naming rules: 3 to 63 lower-case letters,
// digits, dots and hyphens, starting and ending with a letter or digit, no
// two dots in a row, not an IP address and none of the reserved prefixes
// and suffixes. Every S3 request checks its bucket's name, so this is a
// loop over the bytes rather than a regular expression.
func ValidBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 {
		return false
	}
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return false
	}
	digitsAndDots := true
	for i := 1; i < len(name)-1; i++ {
		c := name[i]
		switch {
		case c == '.':
			if name[i-1] == '.' {
				return false
			}
		case c == '-':
			digitsAndDots = false
		case alnum(c):
			if c > '9' {
				digitsAndDots = false
			}
		default:
			return false
		}
	}
	switch {
	case digitsAndDots && net.ParseIP(name) != nil,
		strings.HasPrefix(name, "xn--"), strings.HasPrefix(name, "sthree-"),
		strings.HasSuffix(name, "-s3alias"), strings.HasSuffix(name, "--ol-s3"):
		return false
	}
	return true
}
