package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/buildinfo"
)

// runDFS runs the dispatcher in-process with stdin and returns the exit code,
// stdout and stderr.
func runDFS(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

func TestDispatcher(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStdout string
		wantStderr string
	}{
		{"no command", nil, 2, "", "usage: dfs <command>"},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"help", []string{"help"}, 0, "usage: dfs <command>", ""},
		{"-h", []string{"-h"}, 0, "usage: dfs <command>", ""},
		{"help for a command", []string{"help", "ring"}, 0, "REPLICAS <key> <n>", ""},
		{"help for an unknown command", []string{"help", "frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"help for a subcommand", []string{"help", "cluster", "up"}, 0, "-node-port", ""},
		{"ring -h", []string{"ring", "-h"}, 0, "REPLICAS <key> <n>", ""},
		{"ring -help", []string{"ring", "-help"}, 0, "REPLICAS <key> <n>", ""},
		{"ring rejects arguments", []string{"ring", "extra"}, 2, "", `unexpected argument "extra"`},
		{"ring rejects unknown flags", []string{"ring", "-x"}, 2, "", "flag provided but not defined: -x"},
		{"cluster without subcommand", []string{"cluster"}, 2, "", "usage: dfs cluster <subcommand>"},
		{"cluster unknown subcommand", []string{"cluster", "down"}, 2, "", `unknown subcommand "down"`},
		{"cluster -h", []string{"cluster", "-h"}, 0, "usage: dfs cluster <subcommand>", ""},
		{"cluster up -h", []string{"cluster", "up", "-h"}, 0, "-node-port", ""},
		{"cluster up bad flag", []string{"cluster", "up", "-nodes", "many"}, 2, "", `invalid value "many" for flag -nodes`},
		{"cluster up without nodes", []string{"cluster", "up", "-nodes", "0"}, 2, "", "-nodes must be at least 1"},
		{"cluster up stray argument", []string{"cluster", "up", "now"}, 2, "", `unexpected argument "now"`},
		{"a mistake points at the help", []string{"cluster", "up", "-nodes", "many"}, 2, "", "run `dfs cluster up -h` for help"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runDFS(t, "", tt.args...)
			require.Equal(t, tt.code, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if tt.wantStdout == "" {
				require.Empty(t, stdout)
			} else {
				require.Contains(t, stdout, tt.wantStdout)
			}
			if tt.wantStderr == "" {
				require.Empty(t, stderr)
			} else {
				require.Contains(t, stderr, tt.wantStderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, stderr := runDFS(t, "", args...)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, "dfs "+buildinfo.Version()+"\n", stdout)
			require.Empty(t, stderr)

			code, stdout, stderr = runDFS(t, "", append(args, "-json")...)
			require.Equal(t, 0, code, stderr)
			var v versionInfo
			require.NoError(t, json.Unmarshal([]byte(stdout), &v))
			require.Equal(t, versionInfo{Version: buildinfo.Version(), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}, v)
		})
	}
	code, stdout, stderr := runDFS(t, "", "version", "now")
	require.Equal(t, 2, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `dfs version: unexpected argument "now"`)
}

func TestUsageListsEveryCommand(t *testing.T) {
	_, stdout, _ := runDFS(t, "", "help")
	for name, cmd := range commands() {
		require.Contains(t, stdout, "  "+name+" ", "usage must list %s", name)
		require.Contains(t, stdout, cmd.summary)
	}
}

func TestRingAnswersAPipedScript(t *testing.T) {
	script := "VNODES 3\nADD P\nADD Q\nADD R\n\nREPLICAS x5 3\nlookup x5\nBOGUS\nREMOVE P\nREPLICAS x5 3\n"
	code, stdout, stderr := runDFS(t, script, "ring")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 4, "one answer per query and per bad line:\n%s", stdout)
	require.Equal(t, "P,R,Q", lines[0], "the contract's vector for x5")
	require.Equal(t, "P", lines[1])
	require.True(t, strings.HasPrefix(lines[2], "ERROR "), lines[2])
	require.Equal(t, "R,Q", lines[3], "without P the walk keeps its order")
}

func TestRingFailsOnAReadError(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"ring"}, stdio{in: iotest.ErrReader(iotest.ErrTimeout), out: &out, err: &errOut})
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "dfs ring:")
	require.Contains(t, errOut.String(), iotest.ErrTimeout.Error())
}
