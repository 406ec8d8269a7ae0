package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/dfs-project/dfs/internal/buildinfo"
)

const versionHelp = `usage: dfs version [-json]
       dfs --version

Prints the version of this dfs: a module version, the VCS revision it was
built from ("-dirty" when the checkout had uncommitted changes) or "devel",
as the coordinator's and the storage node's --version do. With -json:
{"version", "go", "os", "arch"}.
`

// versionInfo is the -json answer of `dfs version`.
type versionInfo struct {
	Version string `json:"version"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func runVersion(_ context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the version as a JSON object")
	fs.Usage = func() {
		io.WriteString(fs.Output(), versionHelp)
		io.WriteString(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, 0, s); done {
		return code
	}
	if !*asJSON {
		fmt.Fprintln(s.out, "dfs", buildinfo.Version())
		return exitOK
	}
	writeJSON(s.out, versionInfo{Version: buildinfo.Version(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH})
	return exitOK
}
