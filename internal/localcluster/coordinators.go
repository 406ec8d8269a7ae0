package localcluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/haproxy"
)

// HAProxyName is the name of the HAProxy in front of several coordinators.
const HAProxyName = "haproxy"

// CoordinatorNameOf is the name of coordinator i (from 1): CoordinatorName
// for the first, coordinator-<i> after it.
func CoordinatorNameOf(i int) string {
	if i == 1 {
		return CoordinatorName
	}
	return "coordinator-" + strconv.Itoa(i)
}

// frontCheckInterval is how often HAProxy probes each coordinator here.
const frontCheckInterval = 500 * time.Millisecond

// coordinatorSetting is the value of key among the coordinators' extra
// settings, or with InheritEnv the environment's when they do not set it.
func (o Options) coordinatorSetting(key string) string {
	v, found := "", false
	for _, kv := range o.CoordinatorEnv {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			v, found = val, true
		}
	}
	if !found && o.InheritEnv {
		v = os.Getenv(key)
	}
	return v
}

// startCoordinators starts the coordinator, or several and the HAProxy in
// front of them, and waits until they are ready.
func (c *Cluster) startCoordinators(ctx context.Context) error {
	n := c.opts.Coordinators
	if n == 1 {
		c.mu.Lock()
		c.procs[CoordinatorName] = c.newCoordinator(CoordinatorName, c.coordPort, 0, c.opts.CoordinatorPort == 0)
		c.coordinators = []string{CoordinatorName}
		c.mu.Unlock()
		return c.startAndWait(ctx, CoordinatorName)
	}
	bin, err := haproxy.Binary()
	if err != nil {
		return errs.Wrap(errs.KindOf(err), err, "localcluster: %d coordinators run behind HAProxy", n)
	}
	s3Front := 0
	if v := c.opts.coordinatorSetting("S3_PORT"); v != "" && v != "0" {
		if s3Front, err = strconv.Atoi(v); err != nil {
			return errs.E(errs.Invalid, "localcluster: S3_PORT %q is not a port", v)
		}
	}
	free, err := FreePorts(c.opts.Host, 2*n)
	if err != nil {
		return err
	}
	rest := haproxy.Frontend{Name: "rest", Bind: net.JoinHostPort(c.opts.Host, strconv.Itoa(c.coordPort))}
	s3 := haproxy.Frontend{Name: "s3", Bind: net.JoinHostPort(c.opts.Host, strconv.Itoa(s3Front))}
	c.mu.Lock()
	c.front = true
	for i := 1; i <= n; i++ {
		name := CoordinatorNameOf(i)
		s3Port := 0
		if s3Front != 0 {
			s3Port = free[n+i-1]
		}
		c.procs[name] = c.newCoordinator(name, free[i-1], s3Port, false)
		c.coordinators = append(c.coordinators, name)
	}
	c.mu.Unlock()
	// One at a time: the first applies the store's migrations.
	for _, name := range c.coordinators {
		if err := c.startAndWait(ctx, name); err != nil {
			return err
		}
		p := c.procs[name]
		restAddr := net.JoinHostPort(p.host, strconv.Itoa(p.port))
		rest.Servers = append(rest.Servers, haproxy.Server{Name: name, Addr: restAddr, CheckAddr: restAddr})
		if s3Front != 0 {
			s3Addr := net.JoinHostPort(p.host, strconv.Itoa(free[n+len(s3.Servers)])) // its S3_PORT
			s3.Servers = append(s3.Servers, haproxy.Server{Name: name, Addr: s3Addr, CheckAddr: restAddr})
		}
	}
	cfg := haproxy.Config{CheckInterval: frontCheckInterval, Frontends: []haproxy.Frontend{rest}}
	if s3Front != 0 {
		cfg.Frontends = append(cfg.Frontends, s3)
	}
	dir := filepath.Join(c.opts.DataDir, HAProxyName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errs.Wrap(errs.Other, err, "localcluster: create %s", dir)
	}
	cfgPath := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(haproxy.Render(cfg)), 0o644); err != nil {
		return errs.Wrap(errs.Other, err, "localcluster: write the HAProxy configuration")
	}
	c.mu.Lock()
	c.procs[HAProxyName] = &process{
		name: HAProxyName, binary: bin, args: []string{"-db", "-f", cfgPath}, stop: sigSoftStop,
		host: c.opts.Host, port: c.coordPort, dataDir: dir, logPath: c.logPath(HAProxyName),
		env: c.baseEnv(),
	}
	c.mu.Unlock()
	// Ready once HAProxy answers /health/ready through a coordinator.
	return c.startAndWait(ctx, HAProxyName)
}
