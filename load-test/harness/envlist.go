package harness

import (
	"errors"
	"strings"
)

// EnvList is a repeatable command-line flag of KEY=VALUE settings for the
// processes of a cluster (-coordinator-env, -node-env).
type EnvList []string

func (l *EnvList) String() string { return strings.Join(*l, " ") }

// Set adds one setting; a value without a key before "=" is refused.
func (l *EnvList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return errors.New("want KEY=VALUE")
	}
	*l = append(*l, v)
	return nil
}
