package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/dfs-project/dfs/internal/localcluster"
)

const clusterHelp = `usage: dfs cluster up [flags]

Builds and starts a local cluster in the foreground: a coordinator and
storage nodes as processes on 127.0.0.1, each with its data under -data and
its log in <data>/logs/<name>.log. Ctrl-C (or SIGTERM) stops the
coordinator, then the nodes, and exits.

The coordinator uses PostgreSQL when DATABASE_URL is set and its embedded
store (in <data>/coordinator) otherwise; every process inherits this
shell's environment (REDIS_URL, CLUSTER_TOKEN, LOG_LEVEL, …).

flags:
`

func runCluster(ctx context.Context, args []string, s stdio) int {
	if len(args) > 0 && args[0] == "up" {
		return clusterUp(ctx, args[1:], s)
	}
	w := s.err
	code := 2
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		w, code = s.out, 0
	} else if len(args) > 0 {
		fmt.Fprintf(w, "dfs cluster: unknown subcommand %q\n\n", args[0])
	}
	fmt.Fprintln(w, "usage: dfs cluster up [flags]   (`dfs cluster up -h` lists the flags)")
	return code
}

// clusterUp runs until ctx is cancelled or the process receives SIGINT or
// SIGTERM. Its exit code is 0 when every process stopped cleanly.
func clusterUp(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	nodes := fs.Int("nodes", localcluster.DefaultNodes, "number of storage nodes")
	dataDir := fs.String("data", "./"+localcluster.DefaultDataDir, "directory for every process's data and logs")
	port := fs.Int("port", localcluster.DefaultCoordinatorPort, "coordinator port (0 picks a free one)")
	nodePort := fs.Int("node-port", localcluster.DefaultNodeBasePort, "port of node-1; node-i gets node-port+i-1 (0 picks free ports)")
	binDir := fs.String("bin", "./bin", "directory of the coordinator and storage-node binaries")
	build := fs.Bool("build", true, "build the binaries into -bin first, from the Go module around the working directory")
	tee := fs.Bool("tee", false, "also copy every process's log to stderr, each line prefixed with its name")
	fs.Usage = func() {
		io.WriteString(fs.Output(), clusterHelp)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, 0, s); done {
		return code
	}
	if *nodes < 1 {
		fmt.Fprintf(s.err, "dfs cluster up: -nodes must be at least 1, got %d\n", *nodes)
		return 2
	}
	// The tee and the exit reports write from other goroutines.
	stdout, stderr := &lockedWriter{w: s.out}, &lockedWriter{w: s.err}

	if *build {
		fmt.Fprintf(stdout, "building into %s …\n", *binDir)
		res, err := localcluster.Build(ctx, *binDir)
		if err != nil {
			fmt.Fprintf(stderr, "dfs cluster up: build failed: %v\n", err)
			return 1
		}
		for _, name := range res.Skipped {
			fmt.Fprintf(stdout, "not built: cmd/%s has no source yet\n", name)
		}
	}
	hasCoordinator := isFile(filepath.Join(*binDir, localcluster.CoordinatorBinary))
	if hasCoordinator {
		fmt.Fprintf(stdout, "metadata store: %s\n", storeDescription(*dataDir))
	} else {
		fmt.Fprintln(stdout, "starting storage nodes only; the coordinator is not built yet")
	}

	opts := localcluster.Options{
		BinDir:          *binDir,
		DataDir:         *dataDir,
		Nodes:           *nodes,
		CoordinatorPort: *port,
		NodeBasePort:    *nodePort,
		InheritEnv:      true,
		// The command reports everything a user needs itself.
		Logger: slog.New(slog.DiscardHandler),
		OnExit: func(name string, err error) {
			fmt.Fprintf(stderr, "%s exited unexpectedly (%v); the cluster runs on without it\n", name, exitStatus(err))
		},
	}
	if *tee {
		opts.Tee = stderr
	}

	sigCtx, stopSignals := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	// The processes must not get the signal context: its cancellation would
	// SIGTERM them all at once, while Stop ends the coordinator first. A
	// signal during startup still aborts the start.
	life, cancelLife := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelLife()
	unwatch := context.AfterFunc(sigCtx, cancelLife)
	c, err := localcluster.Start(life, opts)
	interrupted := !unwatch()
	if err != nil {
		if interrupted {
			fmt.Fprintln(stderr, "dfs cluster up: interrupted while starting; everything started was stopped")
		} else {
			fmt.Fprintf(stderr, "dfs cluster up: %v\n", err)
		}
		return 1
	}
	if !interrupted {
		printCluster(stdout, c, *dataDir)
		<-sigCtx.Done()
		fmt.Fprintln(stdout, "\nstopping: the coordinator first, then the storage nodes …")
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(stderr, "dfs cluster up: not every process stopped cleanly:\n%v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "stopped")
	return 0
}

func printCluster(w io.Writer, c *localcluster.Cluster, dataDir string) {
	fmt.Fprintln(w, "local cluster is up:")
	if c.HasCoordinator() {
		fmt.Fprintf(w, "  %-12s %s\n", localcluster.CoordinatorName, c.CoordinatorURL())
	}
	for _, name := range c.Nodes() {
		fmt.Fprintf(w, "  %-12s %s\n", name, c.NodeURL(name))
	}
	fmt.Fprintf(w, "logs: %s\n", filepath.Join(dataDir, "logs", "<name>.log"))
	fmt.Fprintln(w, "press Ctrl-C to stop")
}

// storeDescription says which metadata store the coordinator will use,
// without printing DATABASE_URL, which may hold a password.
func storeDescription(dataDir string) string {
	if os.Getenv("DATABASE_URL") != "" {
		return "PostgreSQL (DATABASE_URL)"
	}
	return "embedded, in " + filepath.Join(dataDir, localcluster.CoordinatorName)
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
