package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/load-test/harness"
)

// benchCluster is one local cluster and what it needs cleaned up.
type benchCluster struct {
	*localcluster.Cluster
	api     *client.Client
	dropDB  func()
	dataDir string
	// pprofAddr is the coordinator's PPROF_ADDR with -pprof, else empty.
	pprofAddr string
	// keepData leaves the data for the removal of the bench's directory at
	// exit. On ext4 without a journal (this project's CI machines) a new
	// inode is not taken from those freed in the last minute or more, and
	// allocation scans past each of them: deleting thousands of small files
	// between phases would slow the next phase's file creation, an artefact
	// of the bench rather than of dfs.
	keepData bool
}

// startCluster starts a coordinator and nodes storage nodes under a new
// directory of b.root with the bench's settings plus extra coordinator
// settings. With b.databaseURL it gives the coordinator a new, empty
// PostgreSQL database, dropped by stop.
func (b *bench) startCluster(ctx context.Context, name string, nodes int, extra ...string) (*benchCluster, error) {
	return b.startClusterWith(ctx, name, nodes, nil, extra...)
}

// startClusterWith is startCluster with nodeExtra added to every storage
// node's settings (before -node-env, which wins).
func (b *bench) startClusterWith(ctx context.Context, name string, nodes int, nodeExtra []string, extra ...string) (*benchCluster, error) {
	dir := filepath.Join(b.root, name)
	// Room for the largest file the bench sends (a 4 GiB -rss-size).
	env := append([]string{
		"MAX_FILE_SIZE=" + strconv.FormatInt(max(2<<30, b.rssSize, b.largeSize), 10),
		"LOG_LEVEL=" + b.logLevel,
		// A fast detector only shortens the wait for a joining node; no
		// node fails during the bench.
		"HEALTH_CHECK_INTERVAL=1s",
	}, extra...)
	env = append(env, b.coordEnv...)
	bc := &benchCluster{dataDir: dir, dropDB: func() {}}
	if b.pprof {
		ports, err := localcluster.FreePorts("127.0.0.1", 1)
		if err != nil {
			return nil, err
		}
		bc.pprofAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		env = append(env, "PPROF_ADDR="+bc.pprofAddr)
	}
	if b.databaseURL != "" {
		dbURL, drop, err := freshDatabase(ctx, b.databaseURL)
		if err != nil {
			return nil, err
		}
		bc.dropDB = drop
		env = append(env, "DATABASE_URL="+dbURL)
	}
	c, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: b.binDir, DataDir: dir, Nodes: nodes,
		CoordinatorEnv: env, NodeEnv: append(append([]string{"LOG_LEVEL=" + b.logLevel}, nodeExtra...), b.nodeEnv...),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnExit: func(name string, err error) { b.logf("%s exited unexpectedly: %v", name, err) },
	})
	if err != nil {
		bc.dropDB()
		return nil, err
	}
	bc.Cluster = c
	if bc.api, err = harness.NewClient(c.CoordinatorURL(), b.clients); err != nil {
		bc.stop()
		return nil, err
	}
	if err := waitOnRing(ctx, bc.api, c.Nodes(), time.Minute); err != nil {
		bc.stop()
		return nil, err
	}
	return bc, nil
}

// stop stops every process and drops the database. The data of a cluster of
// many small files stays until the bench ends (see keepData).
func (bc *benchCluster) stop() {
	if bc.Cluster != nil {
		_ = bc.Cluster.Stop()
	}
	bc.dropDB()
	if !bc.keepData {
		_ = os.RemoveAll(bc.dataDir)
	}
}

// waitOnRing waits until every named node is HEALTHY on the ring.
func waitOnRing(ctx context.Context, api *client.Client, names []string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		nodes, err := api.Nodes(ctx)
		if err == nil {
			on := map[string]bool{}
			for _, n := range nodes {
				on[n.NodeID] = n.OnRing && n.Status == client.NodeHealthy
			}
			all := true
			for _, n := range names {
				all = all && on[n]
			}
			if all {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes %v not all healthy on the ring within %s (last error: %v)", names, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freshDatabase creates an empty database next to the one base names and
// returns its URL and a function that drops it.
func freshDatabase(ctx context.Context, base string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "dfs_bench_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

// procStatus reads a field of /proc/<pid>/status in KiB (VmHWM, VmRSS).
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusField(f, field)
}

func parseStatusField(r io.Reader, field string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// resetPeakRSS resets VmHWM to the current RSS (Linux 4.0 and later), so
// that the peak of one phase is not the peak of an earlier one.
func resetPeakRSS(pid int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
}

// metric returns the value of one sample of a Prometheus text exposition,
// such as `dfs_rebalance_runs_total{trigger="JOINED"}`; 0 when absent.
func metric(ctx context.Context, base, sample string) (float64, error) {
	v, err := metrics(ctx, base, sample)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// metrics is metric for several samples, read from one fetch.
func metrics(ctx context.Context, base string, samples ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	v := make([]float64, len(samples))
	for i, sample := range samples {
		if v[i], err = parseMetric(bytes.NewReader(body), sample); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func parseMetric(r io.Reader, sample string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, sc.Err()
}

// blobIDs returns the ids of the blobs a storage node's data directory
// holds, in either layout (blob.LocateCopies).
func blobIDs(dir string) (map[string]bool, error) {
	locs, err := blob.LocateCopies(dir)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]bool, len(locs))
	for id := range locs {
		ids[id] = true
	}
	return ids, nil
}
