// Package envconf reads typed configuration from environment variables.
//
// A Loader collects every bad value instead of stopping at the first, so a
// daemon reports all of its configuration mistakes in one start attempt, each
// naming its variable.
package envconf

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Loader reads variables through Lookup (os.LookupEnv when nil).
type Loader struct {
	Lookup func(string) (string, bool)
	errs   []error
}

// FromMap returns a Loader over a fixed set of variables (for tests).
func FromMap(m map[string]string) *Loader {
	return &Loader{Lookup: func(k string) (string, bool) { v, ok := m[k]; return v, ok }}
}

func (l *Loader) get(name string) (string, bool) {
	lookup := l.Lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (l *Loader) fail(name, v, why string) {
	l.errs = append(l.errs, fmt.Errorf("%s=%q: %s", name, v, why))
}

// Err returns every problem found so far, or nil.
func (l *Loader) Err() error { return errors.Join(l.errs...) }

// String returns the variable or def when unset.
func (l *Loader) String(name, def string) string {
	if v, ok := l.get(name); ok {
		return v
	}
	return def
}

// Int returns the variable as an integer in [min, max], or def when unset.
func (l *Loader) Int(name string, def, min, max int) int {
	v, ok := l.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		l.fail(name, v, "not an integer")
		return def
	}
	if n < min || n > max {
		l.fail(name, v, fmt.Sprintf("must be between %d and %d", min, max))
		return def
	}
	return n
}

// Bool returns the variable as a boolean (true/false, 1/0, yes/no, on/off).
func (l *Loader) Bool(name string, def bool) bool {
	v, ok := l.get(name)
	if !ok {
		return def
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	l.fail(name, v, "not a boolean (use true or false)")
	return def
}

// Duration returns the variable as a positive Go duration ("10s", "2m").
func (l *Loader) Duration(name string, def time.Duration) time.Duration {
	return l.duration(name, def, false)
}

// DurationOrZero is Duration for a variable whose zero ("0", "0s") turns
// something off: it accepts zero as well.
func (l *Loader) DurationOrZero(name string, def time.Duration) time.Duration {
	return l.duration(name, def, true)
}

func (l *Loader) duration(name string, def time.Duration, zero bool) time.Duration {
	v, ok := l.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		l.fail(name, v, "not a duration (use Go syntax such as 10s or 2m)")
		return def
	}
	switch {
	case d < 0 && zero:
		l.fail(name, v, "must not be negative")
		return def
	case d <= 0 && !zero:
		l.fail(name, v, "must be positive")
		return def
	}
	return d
}

// Size returns the variable as a byte count. Plain digits are bytes; the units
// B, KB/KiB, MB/MiB, GB/GiB and TB/TiB are all powers of 1024.
func (l *Loader) Size(name string, def int64) int64 {
	v, ok := l.get(name)
	if !ok {
		return def
	}
	n, err := ParseSize(v)
	if err != nil {
		l.fail(name, v, err.Error())
		return def
	}
	return n
}

// Port returns the variable as a TCP port number.
func (l *Loader) Port(name string, def int) int { return l.Int(name, def, 1, 65535) }

// OneOf returns the variable lower-cased if it is one of allowed, else def.
func (l *Loader) OneOf(name, def string, allowed ...string) string {
	v, ok := l.get(name)
	if !ok {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	l.fail(name, v, "must be one of "+strings.Join(allowed, ", "))
	return def
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize parses a byte count such as "512MB", "1GiB", "4096" or "10 KB".
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a size (use bytes or a unit such as 512MB or 1GiB)")
	}
	if n > (1<<63-1)/mult {
		return 0, errors.New("size too large")
	}
	return n * mult, nil
}
