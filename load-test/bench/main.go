// Command bench is dfs's cluster benchmark (`make bench-cluster`): it starts
// local clusters of real processes and measures 4 KiB upload and download
// rates with their latencies, one large upload and download, the peak memory
// of every process while a 1 GiB file streams through, and the rebalance a
// fourth node's join sets off — and, in the same run, the machine's own
// baselines for the same work (loopback HTTP, fsync'd small writes, a large
// fsync'd write), printing each dfs figure beside its baseline as a ratio.
//
// Every figure is measured over several runs (median, min–max). The table
// goes to stdout, the same figures as JSON to -json (bench/results.json).
// The embedded metadata store is used unless DATABASE_URL names a
// PostgreSQL server, in which case every cluster gets a new database there,
// dropped afterwards. Every process and temporary directory is removed at the
// end, on an error and on Ctrl-C too.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/load-test/harness"
)

// The phases, in the order they run.
var allPhases = []string{"baseline", "small", "small-volumes", "seaweedfs", "s3", "cached", "large", "rss", "rss-cli", "rebalance"}

type bench struct {
	root        string // temporary directory for clusters and baselines
	binDir      string
	jsonPath    string
	databaseURL string
	logLevel    string
	perf        bool
	pprof       bool
	// coordEnv and nodeEnv are extra KEY=VALUE settings (-coordinator-env,
	// -node-env), for measuring one setting against another.
	coordEnv, nodeEnv harness.EnvList

	runs         int
	clients      int
	warm, window time.Duration
	largeSize    int64
	rssSize      int64
	rebFiles     int
	rebSize      int64
	rebBandwidth int64 // REBALANCE_BANDWIDTH of the rebalance phase's second half (0: none)
	joinClients  int
	res          *Results
	peer         *peerState // SeaweedFS with WEED=path and the seaweedfs phase (seaweed.go)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func main() {
	os.Exit(run(os.Args[1:]))
}

// sizeValue is a flag of bytes with units (256MiB).
type sizeValue struct{ v *int64 }

func (s sizeValue) String() string {
	if s.v == nil {
		return ""
	}
	return strconv.FormatInt(*s.v, 10)
}

func (s sizeValue) Set(v string) error {
	n, err := envconf.ParseSize(v)
	if err != nil {
		return err
	}
	if n <= 0 {
		return errors.New("must be positive")
	}
	*s.v = n
	return nil
}

func run(args []string) int {
	b := &bench{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var only string
	quick := fs.Bool("quick", false, "a short run: 1 run, 3s windows, 64 MiB and 256 MiB files, 1,000 files to rebalance (explicit flags still win)")
	keep := fs.Bool("keep", false, "keep the temporary directory (cluster logs) instead of removing it")
	fs.StringVar(&only, "only", strings.Join(allPhases, ","), "phases to run, comma-separated: "+strings.Join(allPhases, ", "))
	fs.StringVar(&b.jsonPath, "json", filepath.Join("bench", "results.json"), "where to write the JSON results")
	fs.StringVar(&b.binDir, "bin", "", "directory with the coordinator and storage-node binaries (default: build them)")
	fs.StringVar(&b.logLevel, "log-level", "warn", "LOG_LEVEL of every process (the product default is info: one line per request)")
	fs.BoolVar(&b.perf, "perf", false, "profile the coordinator's CPU with perf during the first 4 KiB upload run")
	fs.BoolVar(&b.pprof, "pprof", false, "fetch the coordinator's Go CPU and allocation profiles (PPROF_ADDR) over the first 4 KiB upload and download runs of each layout (coordinator-upload4k[-volumes].cpu.pprof, …), into profiles/ beside the JSON")
	fs.Var(&b.coordEnv, "coordinator-env", "extra KEY=VALUE for every coordinator (repeatable), e.g. LOCAL_CACHE_ENTRIES=0")
	fs.Var(&b.nodeEnv, "node-env", "extra KEY=VALUE for every storage node (repeatable), e.g. STORAGE_SYNC_MODE=file")
	fs.IntVar(&b.runs, "runs", 3, "runs of every measurement")
	fs.IntVar(&b.clients, "clients", 32, "concurrent clients for the 4 KiB rates and the rebalance's uploads")
	fs.DurationVar(&b.window, "window", 10*time.Second, "measured time of each rate run")
	fs.DurationVar(&b.warm, "warm", time.Second, "unmeasured warm-up before each rate run")
	b.largeSize, b.rssSize, b.rebFiles, b.rebSize = 256<<20, 1<<30, 5000, 16<<10
	fs.Var(sizeValue{&b.largeSize}, "large-size", "size of the large upload and download")
	fs.Var(sizeValue{&b.rssSize}, "rss-size", "size of the upload during which peak memory is measured")
	fs.IntVar(&b.rebFiles, "rebalance-files", 5000, "files in the cluster when the 4th node joins")
	fs.Var(sizeValue{&b.rebSize}, "rebalance-size", "size of each of those files")
	fs.Var(sizeValue{&b.rebBandwidth}, "rebalance-bandwidth", "also measure the join with REBALANCE_BANDWIDTH set to this (bytes/s, e.g. 2MiB; default: only without a limit)")
	fs.IntVar(&b.joinClients, "join-clients", 4, "clients downloading the cluster's files while the 4th node joins (their latency is measured)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench [flags]   (DATABASE_URL=postgres://… to use PostgreSQL)\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		defaults := map[string]func(){
			"runs":            func() { b.runs = 1 },
			"window":          func() { b.window = 3 * time.Second },
			"warm":            func() { b.warm = 500 * time.Millisecond },
			"large-size":      func() { b.largeSize = 64 << 20 },
			"rss-size":        func() { b.rssSize = 256 << 20 },
			"rebalance-files": func() { b.rebFiles = 1000 },
		}
		for name, apply := range defaults {
			if !set[name] {
				apply()
			}
		}
	}
	phases := map[string]bool{}
	for _, p := range strings.Split(only, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(allPhases, p) {
			fmt.Fprintf(os.Stderr, "bench: unknown phase %q (phases: %s)\n", p, strings.Join(allPhases, ", "))
			return 2
		}
		phases[p] = true
	}
	if b.runs < 1 || b.clients < 1 || b.window <= 0 || b.rebFiles < 1 || b.joinClients < 1 {
		fmt.Fprintln(os.Stderr, "bench: -runs, -clients, -window, -rebalance-files and -join-clients must be positive")
		return 2
	}
	b.databaseURL = os.Getenv("DATABASE_URL")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.MkdirTemp("", "dfs-bench-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	b.root = root
	defer func() {
		if *keep {
			b.logf("kept %s", root)
			return
		}
		_ = os.RemoveAll(root)
	}()

	b.res = &Results{
		Started: time.Now().Format(time.RFC3339),
		Machine: machine(),
		Figures: map[string]Figure{},
		Config: map[string]string{
			"runs":          strconv.Itoa(b.runs),
			"clients":       strconv.Itoa(b.clients),
			"rate window":   fmt.Sprintf("%s measured after %s warm-up", b.window, b.warm),
			"metadata":      "embedded (SQLite)",
			"LOG_LEVEL":     b.logLevel,
			"phases":        only,
			"units":         "MB = 10^6 bytes; rates are completed requests per second inside the window",
			"cluster":       "coordinator + 3 storage nodes on loopback, RF=3, every copy fsync'd; load generator and baselines in this process",
			"rebalance":     fmt.Sprintf("%d files of %s, then node-4 joins (REPAIR_INTERVAL=1h) while %d clients download them", b.rebFiles, sizeText(b.rebSize), b.joinClients),
			"large and rss": fmt.Sprintf("%s upload/download; peak RSS (VmHWM, reset before) during a %s upload", sizeText(b.largeSize), sizeText(b.rssSize)),
			"rss-cli":       fmt.Sprintf("a %s file on disk sent by the dfs binary (`dfs put`, its defaults: session parts); peak RSS of the coordinator and of dfs", sizeText(b.rssSize)),
		},
	}
	if b.databaseURL != "" {
		b.res.Config["metadata"] = "PostgreSQL (DATABASE_URL; a new database per cluster)"
	}
	b.res.Config["layouts"] = "phase small: STORAGE_LAYOUT=files; phase small-volumes: STORAGE_LAYOUT=volumes"
	if os.Getenv("WEED") == "" {
		b.res.Notes = append(b.res.Notes, "SeaweedFS not measured: no weed binary given (WEED=path); the figures stand beside this machine's own ceilings")
	} else if !phases["seaweedfs"] {
		b.res.Notes = append(b.res.Notes, "SeaweedFS not measured: WEED is set but the seaweedfs phase is not run")
	}
	if b.binDir == "" {
		b.binDir = filepath.Join(root, "bin")
		b.logf("building the binaries into %s", b.binDir)
		if _, err := localcluster.Build(ctx, b.binDir); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
	}

	status := 0
	step := func(name string, fn func(context.Context) error) {
		if ctx.Err() != nil {
			return
		}
		if err := fn(ctx); err != nil {
			b.res.fail("%s: %v", name, err)
			b.logf("%s failed: %v", name, err)
			status = 1
		}
	}
	if phases["seaweedfs"] {
		// Started before dfs's phases, whose runs alternate with the peer's.
		stopPeer := func() {}
		defer func() { stopPeer() }()
		step("seaweedfs", func(ctx context.Context) error {
			var err error
			stopPeer, err = b.startPeer(ctx)
			return err
		})
	}
	if phases["baseline"] {
		step("baseline", b.baselines)
	}
	if phases["small"] {
		step("small", b.small)
	}
	if phases["small-volumes"] {
		step("small-volumes", b.smallVolumes)
	}
	if phases["seaweedfs"] {
		step("seaweedfs", b.seaweedfs)
	}
	if phases["s3"] {
		step("s3", b.s3Small)
	}
	if phases["cached"] {
		step("cached", b.cached)
	}
	if phases["large"] || phases["rss"] || phases["rss-cli"] {
		step("large", func(ctx context.Context) error {
			return b.large(ctx, largePhases{large: phases["large"], rss: phases["rss"], cli: phases["rss-cli"]})
		})
	}
	if phases["seaweedfs"] {
		step("seaweedfs", b.peerFigures)
	}
	if phases["rebalance"] {
		step("rebalance", b.rebalance)
	}
	if ctx.Err() != nil {
		b.res.fail("interrupted")
		status = 1
	}
	b.addRows()
	b.res.writeTable(os.Stdout)
	if err := b.res.writeJSON(b.jsonPath); err != nil {
		fmt.Fprintf(os.Stderr, "bench: write %s: %v\n", b.jsonPath, err)
		return 2
	}
	b.logf("wrote %s", b.jsonPath)
	if len(b.res.Failures) > 0 {
		status = 1
	}
	return status
}

// cpuRows adds the CPU rows of phases: each process's cores, then its CPU
// per operation.
func (r *Results) cpuRows(phases ...string) {
	for _, phase := range phases {
		for _, who := range cpuWho {
			r.row(dfsCPU+phase+"."+who, "", 0, "")
		}
		for _, who := range cpuWho {
			r.row(dfsCPU+phase+"."+who+usPerOp, "", 0, "")
		}
	}
}

// addRows pairs each dfs figure with its baseline.
func (b *bench) addRows() {
	r := b.res
	r.row(dfsUpload, baseHTTPPost, 0, "")
	r.row(dfsUpload, baseFsync, 3, "RF=3 ceiling")
	r.row(dfsUploadP+"50", baseHTTPPostP+"50", 0, "")
	r.row(dfsUploadP+"99", baseHTTPPostP+"99", 0, "")
	r.cpuRows("upload4k", "download4k")
	r.row(dfsDownload, baseHTTPGet, 0, "")
	r.row(dfsDownloadP+"50", baseHTTPGetP+"50", 0, "")
	r.row(dfsDownloadP+"99", baseHTTPGetP+"99", 0, "")
	sfx, _ := layoutSuffix("volumes")
	r.row(layoutKey(dfsUpload, sfx), baseHTTPPost, 0, "")
	r.row(layoutKey(dfsUpload, sfx), baseFsync, 3, "RF=3 ceiling of the files layout")
	r.row(layoutKey(dfsUploadP, sfx)+"50", baseHTTPPostP+"50", 0, "")
	r.row(layoutKey(dfsUploadP, sfx)+"99", baseHTTPPostP+"99", 0, "")
	r.row(layoutKey(dfsDownload, sfx), baseHTTPGet, 0, "")
	r.row(layoutKey(dfsDownloadP, sfx)+"50", baseHTTPGetP+"50", 0, "")
	r.row(layoutKey(dfsDownloadP, sfx)+"99", baseHTTPGetP+"99", 0, "")
	r.cpuRows("upload4k"+sfx, "download4k"+sfx)
	r.row(dfsCached, baseHTTPGet, 0, "")
	r.row(dfsCachedP+"50", baseHTTPGetP+"50", 0, "")
	r.row(dfsCachedP+"99", baseHTTPGetP+"99", 0, "")
	r.cpuRows("download4k-cached")
	r.row(dfsBigUp, baseHTTPBigPut, 0, "")
	r.row(dfsBigUp, baseDisk, 3, "RF=3 ceiling")
	r.row(dfsBigDown, baseHTTPBigGet, 0, "")
	r.row(dfsRSSCoord, "", 0, "target < 64 MiB")
	r.row(dfsRSSNode, "", 0, "")
	r.row(dfsRSSUpload, baseDisk, 3, "RF=3 ceiling")
	r.row(dfsCLICoord, "", 0, "target < 64 MiB")
	r.row(dfsCLISelf, "", 0, "")
	r.row(dfsCLIUpload, baseDisk, 3, "RF=3 ceiling")
	r.row(dfsRebFiles, "", 0, "")
	r.row(dfsRebMBps, baseDisk, 0, "")
	r.row(dfsRebMoved, dfsRebPredict, 0, "")
	r.row(dfsRebWall, "", 0, "")
	r.row(dfsReb+rebClientP+"50", "", 0, "")
	r.row(dfsReb+rebClientP+"99", "", 0, "")
	r.row(dfsRebPaced+rebFiles, "", 0, "")
	r.row(dfsRebPaced+rebMBps, "", 0, "")
	r.row(dfsRebPaced+rebWall, "", 0, "")
	r.row(dfsRebPaced+rebClientP+"50", dfsReb+rebClientP+"50", 0, "")
	r.row(dfsRebPaced+rebClientP+"99", dfsReb+rebClientP+"99", 0, "")
	b.s3Rows()
	b.peerRows()
}

// machine describes this machine from /proc.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		if kib, err := parseStatusField(f, "MemTotal"); err == nil {
			m.MemoryMiB = kib / 1024
		}
		f.Close()
	}
	return m
}
