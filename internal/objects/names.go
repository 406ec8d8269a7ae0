package objects

import (
	"net"
	"regexp"
	"strings"
)

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ValidBucketName applies S3's naming rules: 3 to 63 lower-case letters,
// digits, dots and hyphens, starting and ending with a letter or digit, no
// two dots in a row, not an IP address and none of the reserved prefixes
// and suffixes.
func ValidBucketName(name string) bool {
	switch {
	case !bucketName.MatchString(name), strings.Contains(name, ".."), net.ParseIP(name) != nil,
		strings.HasPrefix(name, "xn--"), strings.HasPrefix(name, "sthree-"),
		strings.HasSuffix(name, "-s3alias"), strings.HasSuffix(name, "--ol-s3"):
		return false
	}
	return true
}
