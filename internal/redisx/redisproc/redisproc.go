// Package redisproc is what the programs that run a private redis-server
// share: the tests' servers (redistest) and the soak's (load-test/harness).
// A private server listens on loopback only and keeps nothing on disk, so a
// SIGKILL loses what it held, as the faults these servers stand for do.
package redisproc

import (
	"bufio"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// Command is bin (a redis-server) on 127.0.0.1:port in the foreground, with
// its working files in dir and neither snapshots nor an append-only file.
func Command(bin string, port int, dir string) *exec.Cmd {
	return exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
}

// ClusterCommand is Command for a node of a Redis Cluster whose cluster bus
// listens on busPort. The node keeps its cluster state in dir/nodes.conf,
// which outlives a SIGKILL: restarted, it comes back as the same node with
// the same slots, and without their keys. The other nodes count it failed
// once it has not answered for nodeTimeout, and keep serving their own slots
// meanwhile (cluster-require-full-coverage no), so that one dead shard costs
// only the keys it holds.
func ClusterCommand(bin string, port, busPort int, dir string, nodeTimeout time.Duration) *exec.Cmd {
	cmd := Command(bin, port, dir)
	cmd.Args = append(cmd.Args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(busPort), "--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		"--cluster-require-full-coverage", "no")
	return cmd
}

// Ping speaks just enough RESP to tell a ready server at addr from anything
// else: nil only when it answers PING with +PONG within a second.
func Ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "redis at %s", addr)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return errs.Wrap(errs.Unavailable, err, "redis at %s", addr)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "redis at %s", addr)
	}
	if strings.TrimSpace(line) != "+PONG" {
		return errs.E(errs.Unavailable, "redis at %s: PING answered %q", addr, strings.TrimSpace(line))
	}
	return nil
}
