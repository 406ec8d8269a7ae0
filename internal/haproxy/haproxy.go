// Package haproxy runs HAProxy (Debian's package) in front of several
// coordinators: it writes a configuration with one frontend per listener
// (REST, S3), each balancing over every coordinator that answers its
// readiness probe, and runs haproxy on it as a child process.
package haproxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
)

// Server is one coordinator behind a frontend: the address its traffic goes
// to, and the REST address whose readiness probe decides whether it gets any.
type Server struct {
	Name      string
	Addr      string // host:port of this listener
	CheckAddr string // host:port of the coordinator's REST listener
}

// Frontend is one listening address and the servers behind it.
type Frontend struct {
	Name    string // letters, digits, '-' and '_'
	Bind    string // host:port
	Servers []Server
}

// Config is what Render writes.
type Config struct {
	Frontends []Frontend
	// CheckInterval is how often each server is probed (default 1s); two
	// failed probes take it out, two good ones put it back.
	CheckInterval time.Duration
}

// ReadyPath is the coordinator's readiness probe.
const ReadyPath = "/health/ready"

// Render returns the haproxy configuration of c.
//
// A request is retried on another coordinator (three times at most) when
// the connection to the first failed or it closed without an answer, which
// is what a killed coordinator does; HAProxy replays only requests it holds
// whole (idempotent methods, a body that fitted its buffer). Timeouts are
// long on the data side: a large upload or download streams for minutes.
func Render(c Config) string {
	inter := c.CheckInterval
	if inter <= 0 {
		inter = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by dfs; every coordinator that answers %s gets traffic.
global
	maxconn 4096

defaults
	mode http
	timeout connect 2s
	timeout client 10m
	timeout server 10m
	timeout http-request 30s
	timeout queue 10s
	retries 3
	option redispatch 1
	retry-on conn-failure empty-response
	default-server inter %dms fall 2 rise 2
`, ReadyPath, inter.Milliseconds())
	for _, f := range c.Frontends {
		fmt.Fprintf(&b, "\nfrontend %s\n\tbind %s\n\tdefault_backend %s_coordinators\n", f.Name, f.Bind, f.Name)
		fmt.Fprintf(&b, "\nbackend %s_coordinators\n\tbalance roundrobin\n\toption httpchk GET %s\n\thttp-check expect status 200\n", f.Name, ReadyPath)
		for _, s := range f.Servers {
			host, port, _ := net.SplitHostPort(s.CheckAddr)
			fmt.Fprintf(&b, "\tserver %s %s check addr %s port %s\n", s.Name, s.Addr, host, port)
		}
	}
	return b.String()
}

// Process is a running haproxy.
type Process struct {
	cmd     *exec.Cmd
	done    chan struct{}
	Config  string // the configuration file
	LogPath string
}

// Binary finds haproxy on PATH or in /usr/sbin, where Debian puts it.
func Binary() (string, error) {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy", nil
	}
	return "", errs.E(errs.Unavailable, "haproxy is not installed (Debian: apt-get install haproxy)")
}

// Start writes c's configuration to dir/haproxy.cfg, starts haproxy on it
// (its output in dir/haproxy.log) and waits until every frontend accepts
// connections. The process ends with ctx, or by Stop.
func Start(ctx context.Context, dir string, c Config) (*Process, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errs.Wrap(errs.Other, err, "haproxy: create %s", dir)
	}
	p := &Process{Config: filepath.Join(dir, "haproxy.cfg"), LogPath: filepath.Join(dir, "haproxy.log"), done: make(chan struct{})}
	if err := os.WriteFile(p.Config, []byte(Render(c)), 0o644); err != nil {
		return nil, errs.Wrap(errs.Other, err, "haproxy: write its configuration")
	}
	check, err := exec.CommandContext(ctx, bin, "-c", "-f", p.Config).CombinedOutput()
	if err != nil {
		return nil, errs.E(errs.Invalid, "haproxy refuses the configuration %s: %v\n%s", p.Config, err, check)
	}
	logf, err := os.Create(p.LogPath)
	if err != nil {
		return nil, errs.Wrap(errs.Other, err, "haproxy: create its log")
	}
	// -db: stay in the foreground, so that this process owns it.
	p.cmd = exec.CommandContext(ctx, bin, "-db", "-f", p.Config)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, errs.Wrap(errs.Other, err, "haproxy: start")
	}
	go func() { _ = p.cmd.Wait(); logf.Close(); close(p.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, f := range c.Frontends {
		for {
			conn, err := net.DialTimeout("tcp", f.Bind, 200*time.Millisecond)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-p.done:
				log, _ := os.ReadFile(p.LogPath)
				return nil, errs.E(errs.Other, "haproxy exited at start:\n%s", log)
			default:
			}
			if time.Now().After(deadline) {
				p.Stop()
				return nil, errs.E(errs.Unavailable, "haproxy does not accept connections on %s after 10s", f.Bind)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return p, nil
}

// Stop ends haproxy and waits for it.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
