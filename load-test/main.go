// Command load-test is dfs's availability harness and chaos soak: workers
// upload, download and byte-compare files for a fixed time against a
// cluster while processes of that cluster are killed and restarted, then
// every acknowledged upload is read back. It exits 1 when any acknowledged
// upload is lost or corrupt, a promise was broken on the way, a process
// crashed or a planned fault could not be made, and 2 when the run could not
// be made at all. See load-test/README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/load-test/harness"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// sizeFlag is a byte size flag that takes units (64KiB, 1MiB).
type sizeFlag struct{ v *int64 }

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return fmt.Sprint(*s.v)
}

func (s sizeFlag) Set(v string) error {
	n, err := envconf.ParseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

func run(args []string) int {
	fs := flag.NewFlagSet("load-test", flag.ContinueOnError)
	var (
		opts      harness.Options
		coordEnv  harness.EnvList
		nodeEnv   harness.EnvList
		kill      = fs.String("kill", "", "process to kill -9 and restart: node-<i> or coordinator (local cluster only)")
		killAfter = fs.Duration("kill-after", 10*time.Second, "when the first kill happens, from the start of the traffic")
		downFor   = fs.Duration("down-for", 15*time.Second, "how long the killed process stays down")
		killEvery = fs.Duration("kill-every", 0, "repeat the kill this often (0: once)")
		soak      = fs.Bool("soak", false, "run the chaos soak instead of one scheduled kill (see README)")
		redis     = fs.String("redis", "auto", "start a private redis-server for the coordinator: auto (with -soak, when redis-server is on PATH), on, off")
		repair    = fs.Bool("repair", false, "after the final pass, rebalance and check every file ACTIVE with RF verified copies (default with -soak)")
		invariant = fs.Bool("invariant", false, "after the final pass, wait for the cluster to settle on its own on placement by the ring, every copy on disk and no orphan (default with -soak; local cluster only)")
		jsonOut   = fs.String("json", "", "also write the report as JSON to this file")
	)
	opts.Traffic.MinSize, opts.Traffic.MaxSize = 1<<10, 64<<10
	fs.StringVar(&opts.URL, "url", "", "target a running coordinator (no process control: faults are off)")
	fs.StringVar(&opts.BinDir, "bin", "", "directory with the coordinator and storage-node binaries (default: build them)")
	fs.StringVar(&opts.DataDir, "data", "", "cluster data directory (default: a temporary directory, removed after a clean run)")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the data directory after a clean run")
	fs.IntVar(&opts.Nodes, "nodes", 3, "storage nodes to start")
	fs.DurationVar(&opts.Duration, "duration", 60*time.Second, "how long the traffic runs")
	fs.IntVar(&opts.Traffic.Workers, "workers", 4, "concurrent clients")
	fs.Var(sizeFlag{&opts.Traffic.MinSize}, "min-size", "smallest file (bytes or with a unit: 1KiB)")
	fs.Var(sizeFlag{&opts.Traffic.MaxSize}, "max-size", "largest file")
	fs.IntVar(&opts.Traffic.ReadsPerWrite, "reads", 2, "downloads after each upload")
	fs.DurationVar(&opts.Traffic.RequestTimeout, "timeout", 30*time.Second, "bound on every request")
	fs.DurationVar(&opts.Traffic.FailurePause, "failure-pause", 100*time.Millisecond, "a worker's pause after a failed request")
	fs.Uint64Var(&opts.Traffic.Seed, "seed", 1, "seed of sizes, contents and picks")
	fs.Var(&coordEnv, "coordinator-env", "extra KEY=VALUE for the coordinator (repeatable), e.g. DATABASE_URL=postgres://…")
	fs.Var(&nodeEnv, "node-env", "extra KEY=VALUE for every storage node (repeatable)")
	fs.DurationVar(&opts.Progress, "progress", 5*time.Second, "how often to print a progress line")
	fs.DurationVar(&opts.InvariantQuiet, "quiet", 90*time.Second, "how long the cluster may take to settle on the invariant after the traffic stops")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: load-test [flags]\n\n"+
			"  go run ./load-test -kill node-2 -kill-after 10s -down-for 15s -duration 60s\n"+
			"  go run ./load-test -soak -duration 5m\n"+
			"  go run ./load-test -url http://127.0.0.1:8080 -duration 30s\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "load-test: unexpected arguments %q\n", fs.Args())
		return 2
	}
	opts.CoordinatorEnv, opts.NodeEnv = coordEnv, nodeEnv
	opts.Repair = *repair || *soak
	opts.Invariant = *invariant || *soak

	switch *redis {
	case "on":
		opts.Redis = true
	case "off":
	case "auto":
		opts.Redis = *soak && opts.URL == "" && harness.RedisAvailable()
	default:
		fmt.Fprintf(os.Stderr, "load-test: -redis must be auto, on or off\n")
		return 2
	}
	switch {
	case opts.URL != "" && (*kill != "" || *soak):
		fmt.Fprintln(os.Stderr, "load-test: -url targets a cluster the harness does not control; -kill and -soak need a local cluster")
		return 2
	case *soak && *kill != "":
		fmt.Fprintln(os.Stderr, "load-test: choose -soak or -kill, not both")
		return 2
	case *soak:
		opts.Plan = harness.SoakPlan{Duration: opts.Duration}
	case *kill != "" && !validTarget(*kill, opts.Nodes):
		fmt.Fprintf(os.Stderr, "load-test: -kill %q: want coordinator or node-1 … node-%d\n", *kill, opts.Nodes)
		return 2
	case *kill != "":
		opts.Plan = harness.KillSchedule{Target: *kill, After: *killAfter, DownFor: *downFor, Every: *killEvery}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := harness.Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "load-test: %v\n", err)
		return 2
	}
	rep.WriteText(os.Stdout)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "load-test: write %s: %v\n", *jsonOut, err)
			return 2
		}
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// validTarget reports whether name is a process of a local cluster of nodes
// storage nodes.
func validTarget(name string, nodes int) bool {
	if name == localcluster.CoordinatorName {
		return true
	}
	for i := 1; i <= nodes; i++ {
		if name == localcluster.NodeName(i) {
			return true
		}
	}
	return false
}
