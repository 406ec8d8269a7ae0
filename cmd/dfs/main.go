// Command dfs is the user's tool for dfs: it runs a local cluster for
// development (`dfs cluster up`, in cluster.go and clusterctl.go) and answers
// placement questions offline (`dfs ring`, here). Client commands for the
// coordinator's REST API live beside these, one file per group of commands
// that act on the same thing: files.go (put, get, ls, info, rm, verify),
// nodes.go (nodes and its drain and rejoin, health, rebalance), placement.go
// (nodes set and nodes ring: zones, weights and the ring), status.go
// (durability) and version.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/dfs-project/dfs/internal/ringsim"
)

// stdio is the streams a command reads and writes; tests pass buffers.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one subcommand. run gets the arguments after the command's name
// and returns the process's exit code: 0 success, 1 failure, 2 bad usage.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, s stdio) int
}

// commands is the table the dispatcher reads; a new subcommand is one entry
// here and a run function in the file of its group (see the package comment).
func commands() map[string]command {
	return map[string]command{
		"ring":    {summary: "answer placement queries read from stdin (see `dfs ring -h`)", run: runRing},
		"cluster": {summary: "run a local cluster of real processes (`dfs cluster up`) and act on it: status, stop-node, restart-node", run: runCluster},

		"put":       {summary: "upload files: `dfs put FILE…`, or by name: `dfs put FILE BUCKET/KEY`, `dfs put -r DIR BUCKET/PREFIX`", run: runPut},
		"get":       {summary: "download a file: `dfs get ID|BUCKET/KEY [-o PATH]`", run: runGet},
		"ls":        {summary: "list stored files, newest first; `dfs ls BUCKET[/PREFIX]` lists keys, `-buckets` the buckets", run: runLs},
		"mb":        {summary: "create a bucket: `dfs mb BUCKET`", run: runMb},
		"info":      {summary: "show a file's metadata and where its copies are", run: runInfo},
		"rm":        {summary: "delete a file and all its copies: `dfs rm ID|BUCKET/KEY`", run: runRm},
		"verify":    {summary: "re-hash every copy of a file, rebuilding bad ones", run: runVerify},
		"nodes":     {summary: "list the storage nodes (status, zone, weight, keyspace share); set a zone and weight, show the ring, drain, rejoin", run: runNodes},
		"health":    {summary: "show the cluster's health (exit status 0 only when UP)", run: runHealth},
		"status":    {summary: "show how safe the data is now: files by healthy copies, failure headroom, per-node risk", run: runStatus},
		"rebalance": {summary: "reconcile every file's copies with the ring now", run: runRebalance},
		"keys":      {summary: "manage access keys: `dfs keys create NAME`, `dfs keys ls`, `dfs keys rm ACCESS_KEY`", run: runKeys},
		"version":   {summary: "print the version of this dfs (also `dfs --version`)", run: runVersion},
	}
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}

func run(ctx context.Context, args []string, s stdio) int {
	if len(args) == 0 {
		usage(s.err)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 {
			usage(s.out)
			return 0
		}
		cmd, ok := commands()[args[1]]
		if !ok {
			fmt.Fprintf(s.err, "dfs help: unknown command %q\n\n", args[1])
			usage(s.err)
			return 2
		}
		// `dfs help nodes drain` is `dfs nodes drain -h`.
		return cmd.run(ctx, append(slices.Clone(args[2:]), "-h"), s)
	case "-version", "--version":
		return runVersion(ctx, args[1:], s)
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(s.err, "dfs: unknown command %q\n\n", name)
		usage(s.err)
		return 2
	}
	return cmd.run(ctx, args[1:], s)
}

func usage(w io.Writer) {
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("usage: dfs <command> [flags] [arguments]\n\ncommands:\n")
	for _, name := range names {
		fmt.Fprintf(&b, "  %-10s %s\n", name, cmds[name].summary)
	}
	b.WriteString("\n`dfs help <command>` or `dfs <command> -h` describes one command.\n")
	io.WriteString(w, b.String())
}

// parseFlags parses a command's flags. When it returns done, the command
// should exit with code at once: 0 after -h, 2 after a bad flag or, if
// maxArgs >= 0, more than maxArgs arguments.
func parseFlags(fs *flag.FlagSet, args []string, maxArgs int, s stdio) (code int, done bool) {
	if code, done := parseOnce(fs, args, s); done {
		return code, true
	}
	if maxArgs >= 0 && fs.NArg() > maxArgs {
		return badUsage(s, fs.Name(), "unexpected argument %q", fs.Arg(maxArgs)), true
	}
	return 0, false
}

// parseOnce runs fs.Parse with asked-for help on stdout, where it can be
// paged or searched, and a mistake on stderr, named in one line with a
// pointer to the help rather than the whole of it.
func parseOnce(fs *flag.FlagSet, args []string, s stdio) (code int, done bool) {
	// The flag package prints its own report of both; the command's are
	// printed here instead.
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(s.out)
		fs.Usage()
		return 0, true
	default:
		return badUsage(s, fs.Name(), "%v", err), true
	}
}

// badUsage reports a wrong command line of the command name on stderr and
// returns the exit code for it.
func badUsage(s stdio, name, format string, args ...any) int {
	fmt.Fprintf(s.err, "dfs %s: %s\nrun `dfs %s -h` for help\n", name, fmt.Sprintf(format, args...), name)
	return 2
}

const ringHelp = `usage: dfs ring < script

Reads one command per line (case-insensitive; blank lines ignored) and
answers every query with one line, placing keys exactly as the coordinator
does. A bad line answers "ERROR <reason>" and the run goes on.

  VNODES <v>            points per node (default 100); re-places the nodes
  ADD <node> [zone=<z>] [weight=<w>]
                        add a node, in zone z (default: none, a zone of its
                        own) with weight w (a decimal > 0, default 1: the
                        node gets max(1, floor(v×w+0.5)) points)
  SET <node> [zone=<z>] [weight=<w>]
                        change what it names of a present node
  REMOVE <node>         remove a node
  LOOKUP <key>          the key's primary, or NONE on an empty ring
  REPLICAS <key> <n>    the key's preference list, comma-separated, or NONE
  SPREAD <count> <n>    how often each node appears in the preference lists
                        of key-0 … key-<count-1>: "A=12 B=9 C=9", or NONE
`

func runRing(_ context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("ring", flag.ContinueOnError)
	fs.Usage = func() { io.WriteString(fs.Output(), ringHelp) }
	if code, done := parseFlags(fs, args, 0, s); done {
		return code
	}
	if err := ringsim.Run(s.in, s.out); err != nil {
		fmt.Fprintf(s.err, "dfs ring: %v\n", err)
		return 1
	}
	return 0
}
