// Command coordinator runs the dfs coordinator: the REST API, the ring, the
// metadata store, the failure detector, the reconciler and the repair loop.
// Configuration comes from the environment (see README.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dfs-project/dfs/internal/coordinator"
	"github.com/dfs-project/dfs/internal/daemonargs"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/logging"
	"github.com/dfs-project/dfs/internal/redisx"
)

const help = `Configuration is by environment variables only, for example:
  SERVER_PORT      HTTP port (8080)
  DATA_DIRECTORY   the embedded metadata store and the upload spool (./data/coordinator);
                   locked while the coordinator runs
  DATABASE_URL     a postgres:// URL (unset: the embedded SQLite store)
  REDIS_URL        a redis:// URL (unset: no Redis)
  REDIS_CLUSTER_ADDRS
                   instead of REDIS_URL: Redis Cluster nodes, host:port,host:port,...
  CLUSTER_TOKEN    bearer token for node <-> coordinator calls
See the configuration tables in README.md for all of them.
`

func main() {
	// Before anything else: asking for help must not open the store.
	if code, done := daemonargs.Handle("coordinator", "the dfs coordinator (REST API, ring, metadata, repair)", help,
		os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	cfg, err := coordinator.LoadConfig(&envconf.Loader{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "coordinator: bad configuration:\n%v\n", err)
		os.Exit(2)
	}
	log, err := logging.New(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintf(os.Stderr, "coordinator: %v\n", err)
		os.Exit(2)
	}
	// go-redis would otherwise print a line per failed dial while Redis is away.
	redisx.RouteDriverLogs(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	app, err := coordinator.New(ctx, cfg, log, reg)
	if err != nil {
		log.Error("coordinator failed to start", "err", err)
		os.Exit(1)
	}
	if err := app.Run(ctx); err != nil {
		log.Error("coordinator stopped with an error", "err", err)
		os.Exit(1)
	}
}
