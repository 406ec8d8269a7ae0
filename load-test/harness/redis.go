package harness

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/redisx/redisproc"
)

// redisStartTimeout bounds how long a starting redis-server may take to
// answer PING.
const redisStartTimeout = 10 * time.Second

// Redis is a private redis-server on a loopback port, without persistence,
// that the soak can kill and start again on the same address. Its methods
// are safe for concurrent use.
type Redis struct {
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// RedisAvailable reports whether redis-server is on PATH.
func RedisAvailable() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// StartRedis starts redis-server with its files under dir.
func StartRedis(ctx context.Context, dir string) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errs.Wrap(errs.NotFound, err, "redis-server is not on PATH")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errs.Wrap(errs.Other, err, "create %s", dir)
	}
	r := &Redis{bin: bin, dir: dir}
	// Another process may take the port between the probe and the bind; a
	// few attempts make that harmless.
	for attempt := 0; ; attempt++ {
		ports, err := localcluster.FreePorts("127.0.0.1", 1)
		if err != nil {
			return nil, err
		}
		r.port = ports[0]
		if err = r.start(ctx); err == nil {
			return r, nil
		}
		if attempt == 3 {
			return nil, err
		}
	}
}

// URL is the server's redis:// URL.
func (r *Redis) URL() string { return "redis://" + r.addr() + "/0" }

func (r *Redis) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

func (r *Redis) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(r.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return errs.Wrap(errs.Other, err, "open the redis log")
	}
	defer logf.Close()
	cmd := redisproc.Command(r.bin, r.port, r.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return errs.Wrap(errs.Other, err, "start redis-server")
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(redisStartTimeout)
	for redisproc.Ping(r.addr()) != nil {
		select {
		case <-done:
			return errs.E(errs.Unavailable, "redis-server on port %d exited at start (see %s)", r.port, logf.Name())
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return errs.E(errs.Unavailable, "redis-server on port %d did not answer PING (see %s)", r.port, logf.Name())
		}
	}
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
	return nil
}

// Kill ends the server with SIGKILL, losing everything it held.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return errs.E(errs.Conflict, "redis-server is not running")
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	r.cmd = nil
	return nil
}

// Restart starts a killed server again on the same port.
func (r *Redis) Restart(ctx context.Context) error {
	var err error
	// The port was ours a moment ago; a failed bind is a socket still
	// closing, which goes away by waiting.
	for deadline := time.Now().Add(redisStartTimeout); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if err = r.start(ctx); err == nil {
			return nil
		}
	}
	return err
}

// Stop ends the server if it runs.
func (r *Redis) Stop() {
	_ = r.Kill()
}
