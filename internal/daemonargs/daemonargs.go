// Package daemonargs is the command line of the dfs daemons, which are
// configured by environment variables alone: they take no argument but a
// request for help or for their version, and answer those before anything
// else happens, so that asking never opens a store, cleans a directory or
// binds a port.
package daemonargs

import (
	"fmt"
	"io"

	"github.com/dfs-project/dfs/internal/buildinfo"
)

// Exit codes of Handle's caller.
const (
	ExitOK    = 0
	ExitUsage = 2
)

// Handle reads a daemon's arguments. With none it returns false and the
// daemon starts. Otherwise it prints, to stdout, help (name and about, then
// help's lines) or the version, or, to stderr, a usage error naming the
// argument, and returns true with the exit code.
func Handle(name, about, help string, args []string, stdout, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return ExitOK, false
	}
	bad := args[0]
	if len(args) == 1 {
		switch args[0] {
		case "-h", "-help", "--help":
			fmt.Fprintf(stdout, "%s: %s\n\n%s\nversion %s\n", name, about, help, buildinfo.Version())
			return ExitOK, true
		case "-version", "--version":
			fmt.Fprintf(stdout, "%s %s\n", name, buildinfo.Version())
			return ExitOK, true
		}
	} else if isRequest(bad) {
		bad = args[1]
	}
	fmt.Fprintf(stderr, "%s: unexpected argument %q: configuration is by environment variables only (%s -h for help)\n", name, bad, name)
	return ExitUsage, true
}

// isRequest reports whether arg asks for help or the version.
func isRequest(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "-version", "--version":
		return true
	}
	return false
}
