// Package buildinfo names the build a binary came from, so that every dfs
// binary answers --version the same way.
package buildinfo

import (
	"runtime/debug"
)

// Version is the main module's version when the binary was built from a
// module download ("go install ...@v1.2.3"), else the VCS revision it was
// built from (with "-dirty" when the checkout had uncommitted changes), else
// "devel".
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return fromInfo(info)
}

func fromInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
