package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
)

const clusterHelp = `usage: dfs cluster up [flags]

Builds and starts a local cluster in the foreground: a coordinator and
storage nodes as processes on 127.0.0.1, each with its data under -data and
its log in <data>/logs/<name>.log. It reports "local cluster is up" once
every node is on the ring, ready to store a file. Ctrl-C (or SIGTERM) stops
the coordinator, then the nodes, and exits.

The coordinator uses PostgreSQL when DATABASE_URL is set and its embedded
store (in <data>/coordinator) otherwise. -coordinators N (N > 1, which needs
DATABASE_URL, and REDIS_URL to share caches) starts coordinator,
coordinator-2, … on free ports with Debian's haproxy in front of them on
-port and -s3-port, checking each one's /health/ready; every process inherits this
shell's environment (REDIS_URL, CLUSTER_TOKEN, LOG_LEVEL, …). The local
cluster probes its nodes every second (HEALTH_CHECK_INTERVAL=1s) unless the
environment sets HEALTH_CHECK_INTERVAL.

While it runs, other terminals act on its processes by name (coordinator,
node-1, …) with ` + "`dfs cluster status|stop-node|restart-node`" + `.

flags:
`

const clusterUsage = `usage: dfs cluster <subcommand> [flags]

  up                      start a local cluster in the foreground
  status                  the running cluster's processes: name, URL, pid
  stop-node NAME [-kill]  stop one process (SIGTERM; -kill: SIGKILL, a crash)
  restart-node NAME       start one process again (stopping it first if it
                          runs) and wait until it is ready and, for a node,
                          back on the ring

The subcommands other than up act on the cluster that ` + "`dfs cluster up -data DIR`" + `
runs (default ./data); ` + "`dfs cluster <subcommand> -h`" + ` lists the flags.
`

// localProbeInterval is the local cluster's HEALTH_CHECK_INTERVAL unless the
// environment sets one: a new node is admitted after two good probes, and a
// developer should not wait the production default's 20 s for that.
const localProbeInterval = "1s"

// defaultS3Port is the local cluster's S3 port, as MinIO's and the Compose
// file's.
const defaultS3Port = 9000

func runCluster(ctx context.Context, args []string, s stdio) int {
	if len(args) > 0 {
		switch args[0] {
		case "up":
			return clusterUp(ctx, args[1:], s)
		case "status":
			return clusterStatus(ctx, args[1:], s)
		case "stop-node":
			return clusterAct(ctx, "stop-node", args[1:], s)
		case "restart-node":
			return clusterAct(ctx, "restart-node", args[1:], s)
		}
	}
	w := s.err
	code := 2
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		w, code = s.out, 0
	} else if len(args) > 0 {
		fmt.Fprintf(w, "dfs cluster: unknown subcommand %q\n\n", args[0])
	}
	io.WriteString(w, clusterUsage)
	return code
}

// clusterUp runs until ctx is cancelled or the process receives SIGINT or
// SIGTERM. Its exit code is 0 when every process stopped cleanly.
func clusterUp(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	nodes := fs.Int("nodes", localcluster.DefaultNodes, "number of storage nodes")
	coordinators := fs.Int("coordinators", 1, "number of coordinators; more than one share PostgreSQL (DATABASE_URL) and run behind HAProxy on -port and -s3-port")
	dataDir := fs.String("data", "./"+localcluster.DefaultDataDir, "directory for every process's data and logs")
	port := fs.Int("port", localcluster.DefaultCoordinatorPort, "coordinator port (0 picks a free one)")
	nodePort := fs.Int("node-port", localcluster.DefaultNodeBasePort, "port of node-1; node-i gets node-port+i-1 (0 picks free ports)")
	s3Port := fs.Int("s3-port", defaultS3Port, "the coordinator's S3 API port (0 picks a free one)")
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
	if *coordinators < 1 {
		fmt.Fprintf(s.err, "dfs cluster up: -coordinators must be at least 1, got %d\n", *coordinators)
		return 2
	}
	if *coordinators > 1 && os.Getenv("DATABASE_URL") == "" {
		fmt.Fprintf(s.err, "dfs cluster up: -coordinators %d needs DATABASE_URL: several coordinators share one PostgreSQL (the embedded store belongs to one process)\n", *coordinators)
		return 2
	}
	if *coordinators > 1 && os.Getenv("REDIS_URL") == "" && os.Getenv("REDIS_CLUSTER_ADDRS") == "" {
		fmt.Fprintln(s.err, "dfs cluster up: neither REDIS_URL nor REDIS_CLUSTER_ADDRS is set: the coordinators cannot tell each other what changed, so they read access keys from the database on every request and take leases there")
	}
	// The tee and the exit reports write from other goroutines.
	stdout, stderr := &lockedWriter{w: s.out}, &lockedWriter{w: s.err}
	if err := checkNoCluster(*dataDir); err != nil {
		fmt.Fprintf(stderr, "dfs cluster up: %v\n", err)
		return 1
	}

	if *build {
		if code := buildCluster(ctx, *binDir, stdout, stderr, isTerminal(s.out)); code != 0 {
			return code
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
		Coordinators:    *coordinators,
		CoordinatorPort: *port,
		NodeBasePort:    *nodePort,
		InheritEnv:      true,
		// The command reports everything a user needs itself.
		Logger: slog.New(slog.DiscardHandler),
		OnExit: func(name string, err error) {
			fmt.Fprintf(stderr, "%s exited unexpectedly (%v); the cluster runs on without it\n", name, exitStatus(err))
		},
	}
	if _, set := os.LookupEnv("HEALTH_CHECK_INTERVAL"); !set {
		opts.CoordinatorEnv = append(opts.CoordinatorEnv, "HEALTH_CHECK_INTERVAL="+localProbeInterval)
	}
	var s3 localS3
	if hasCoordinator {
		env, info, err := s3Setup(*dataDir, localcluster.DefaultHost, *s3Port)
		if err != nil {
			fmt.Fprintf(stderr, "dfs cluster up: %v\n", err)
			return 1
		}
		opts.CoordinatorEnv, s3 = append(opts.CoordinatorEnv, env...), info
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
	if err == nil && hasCoordinator {
		fmt.Fprintln(stdout, "waiting for the coordinator to put every node on the ring …")
		if err = c.WaitAdmitted(life); err != nil {
			_ = c.Stop()
		}
	}
	var ctl *controlServer
	if err == nil {
		if ctl, err = serveControl(c, *dataDir); err != nil {
			_ = c.Stop()
		}
	}
	interrupted := !unwatch()
	if err != nil {
		switch {
		case interrupted:
			fmt.Fprintln(stderr, "dfs cluster up: interrupted while starting; everything started was stopped")
		default:
			fmt.Fprintf(stderr, "dfs cluster up: %v\n", err)
			if hint := portHint(err, *port, *nodePort); hint != "" {
				fmt.Fprintln(stderr, hint)
			}
		}
		return 1
	}
	defer ctl.Close()
	if !interrupted {
		printCluster(stdout, c, *dataDir, s3)
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

// portHint names the flag that moves a process off a port another program
// holds, with an example made from the ports asked for.
func portHint(err error, port, nodePort int) string {
	var busy *localcluster.PortInUseError
	if !errors.As(err, &busy) {
		return ""
	}
	if busy.Process == localcluster.CoordinatorName {
		return fmt.Sprintf("stop what listens on %d, or choose another coordinator port with -port (make run ARGS=\"-port %d\")", busy.Port, otherPort(port))
	}
	return fmt.Sprintf("stop what listens on %d, or choose other node ports with -node-port, node-1's port (make run ARGS=\"-node-port %d\")", busy.Port, otherPort(nodePort))
}

// otherPort suggests a port 10000 above p, or below it near the top.
func otherPort(p int) int {
	if p+10000 <= 65535 {
		return p + 10000
	}
	return p - 10000
}

// buildCluster builds the binaries, showing progress: on a terminal one line
// that counts the packages compiled, elsewhere a line every buildReport
// packages. A warm build cache compiles nothing and says so.
func buildCluster(ctx context.Context, binDir string, stdout, stderr io.Writer, terminal bool) int {
	const buildReport = 25
	fmt.Fprintf(stdout, "building coordinator, storage-node and dfs into %s (a first build compiles a few hundred packages and takes minutes) …\n", binDir)
	start := time.Now()
	compiled := 0
	res, err := localcluster.BuildWith(ctx, localcluster.BuildOptions{BinDir: binDir, Progress: func(line string) {
		if strings.HasPrefix(line, "go: ") {
			fmt.Fprintln(stdout, "  "+line) // a module download
			return
		}
		compiled++
		switch {
		case terminal:
			fmt.Fprintf(stdout, "\r\033[K  %d packages compiled: %s", compiled, line)
		case compiled%buildReport == 0:
			fmt.Fprintf(stdout, "  %d packages compiled …\n", compiled)
		}
	}})
	if terminal && compiled > 0 {
		fmt.Fprintln(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "dfs cluster up: build failed: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "built in %s (%d packages compiled, the rest from the build cache)\n", time.Since(start).Round(100*time.Millisecond), compiled)
	for _, name := range res.Skipped {
		fmt.Fprintf(stdout, "not built: cmd/%s has no source yet\n", name)
	}
	return 0
}

// clusterStatus lists the running cluster's processes.
func clusterStatus(ctx context.Context, args []string, s stdio) int {
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	dataDir := fs.String("data", "./"+localcluster.DefaultDataDir, "the running cluster's -data directory")
	asJSON := fs.Bool("json", false, "print the processes as JSON")
	fs.Usage = func() {
		io.WriteString(fs.Output(), "usage: dfs cluster status [-data DIR] [-json]\n\nLists the processes of the cluster `dfs cluster up` runs on DIR.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args, 0, s); done {
		return code
	}
	cc, err := dialControl(*dataDir)
	if err == nil {
		var procs []processView
		if procs, err = cc.processes(ctx); err == nil {
			if *asJSON {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				_ = enc.Encode(procs)
				return 0
			}
			tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tURL\tPID\tSTATE\tLOG")
			for _, p := range procs {
				state, pid := "stopped", "-"
				if p.Running {
					state, pid = "running", strconv.Itoa(p.PID)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.URL, pid, state, p.Log)
			}
			tw.Flush()
			return 0
		}
	}
	fmt.Fprintf(s.err, "dfs cluster status: %v\n", err)
	return 1
}

// clusterAct is stop-node and restart-node.
func clusterAct(ctx context.Context, sub string, args []string, s stdio) int {
	fs := flag.NewFlagSet("cluster "+sub, flag.ContinueOnError)
	dataDir := fs.String("data", "./"+localcluster.DefaultDataDir, "the running cluster's -data directory")
	kill := false
	if sub == "stop-node" {
		fs.BoolVar(&kill, "kill", false, "SIGKILL the process, as a crash would, instead of SIGTERM")
	}
	fs.Usage = func() {
		what := "Stops one process of the running local cluster with SIGTERM (SIGKILL\nafter 10 s), or with SIGKILL at once under -kill."
		if sub == "restart-node" {
			what = "Starts one process of the running local cluster again, with the same\nport and data, stopping it first if it runs; it returns once the process is\nready and, for a storage node, back on the coordinator's ring."
		}
		fmt.Fprintf(fs.Output(), "usage: dfs cluster %s NAME [flags]\n\n%s\nNAME is coordinator or a node (node-1, …): `dfs cluster status` lists them.\n\nflags:\n", sub, what)
		fs.PrintDefaults()
	}
	// The name may come before the flags, as the usage line shows it.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if code, done := parseFlags(fs, args, 1, s); done {
		return code
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(s.err, "dfs cluster %s: unexpected argument %q\n", sub, fs.Arg(0))
		return 2
	}
	if name == "" {
		fmt.Fprintf(s.err, "dfs cluster %s: which process? give its name (coordinator, node-1, …)\n", sub)
		return 2
	}
	action := "restart"
	switch {
	case sub == "stop-node" && kill:
		action = "kill"
	case sub == "stop-node":
		action = "stop"
	}
	cc, err := dialControl(*dataDir)
	if err == nil {
		if sub == "restart-node" {
			fmt.Fprintf(s.out, "restarting %s …\n", name)
		}
		var p processView
		if p, err = cc.act(ctx, name, action); err == nil {
			switch action {
			case "restart":
				fmt.Fprintf(s.out, "%s is running again (pid %d, %s)\n", p.Name, p.PID, p.URL)
			case "kill":
				fmt.Fprintf(s.out, "%s killed\n", p.Name)
			default:
				fmt.Fprintf(s.out, "%s stopped\n", p.Name)
			}
			return 0
		}
	}
	fmt.Fprintf(s.err, "dfs cluster %s: %v\n", sub, err)
	return 1
}

func printCluster(w io.Writer, c *localcluster.Cluster, dataDir string, s3 localS3) {
	fmt.Fprintln(w, "local cluster is up:")
	if coords := c.Coordinators(); len(coords) > 1 {
		fmt.Fprintf(w, "  %-12s %s (HAProxy in front of %s)\n", localcluster.HAProxyName, c.CoordinatorURL(), strings.Join(coords, ", "))
		for _, name := range coords {
			fmt.Fprintf(w, "  %-12s %s\n", name, c.NodeURL(name))
		}
	} else if c.HasCoordinator() {
		fmt.Fprintf(w, "  %-12s %s\n", localcluster.CoordinatorName, c.CoordinatorURL())
	}
	if c.HasCoordinator() {
		u := c.CoordinatorURL()
		fmt.Fprintf(w, "  %-12s %s/console/\n", "console", u)
		fmt.Fprintf(w, "  %-12s %s/swagger-ui/\n", "swagger-ui", u)
	}
	for _, name := range c.Nodes() {
		fmt.Fprintf(w, "  %-12s %s\n", name, c.NodeURL(name))
	}
	if c.HasCoordinator() {
		s3.print(w)
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
