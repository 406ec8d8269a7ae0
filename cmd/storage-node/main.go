// Command storage-node runs one dfs storage node: a blob store on local disk
// behind an internal HTTP API. Configuration comes from the environment (see
// storagenode.Config); a bad value stops it at start with a message naming
// the variable.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dfs-project/dfs/internal/daemonargs"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/logging"
	"github.com/dfs-project/dfs/internal/storagenode"
)

const help = `Configuration is by environment variables only, for example:
  SERVER_PORT              HTTP port (9001)
  STORAGE_NODE_ID          the node's id on the ring (node-1)
  STORAGE_DATA_DIRECTORY   where blobs live (./data/<node id>); locked while the node runs
  STORAGE_LAYOUT           volumes or files; unset, a directory keeps its own (volumes when new)
  COORDINATOR_URL          where to register (unset: no registration)
  CLUSTER_TOKEN            required on every /internal call when set
See the configuration tables in README.md for all of them.
`

func main() {
	// Before anything else: asking for help must not touch the data directory.
	if code, done := daemonargs.Handle("storage-node", "one dfs storage node (a blob store on local disk behind HTTP)", help,
		os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "storage-node:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := storagenode.LoadConfig(&envconf.Loader{})
	if err != nil {
		return fmt.Errorf("configuration:\n%w", err)
	}
	logger, err := logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := storagenode.New(cfg, logger, registry)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
