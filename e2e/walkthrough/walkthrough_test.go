//go:build linux

// Package walkthrough runs README.md's five-minute tour word for word, as a
// newcomer would on a fresh clone: `make run` in one terminal, every other
// line of the tour in a second, and Ctrl-C at the end. The repository is
// copied as a clone would have it (tracked files only, no bin or data) and
// built on an empty build cache, so the first build's time and output are
// what a newcomer sees.
package walkthrough

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
)

// The tour's section in README.md, and the line that says the cluster is up.
const (
	tourHeading = "## A five-minute tour"
	upLine      = "local cluster is up"
	// coordinator is where `make run` puts the coordinator, and where the
	// tour's BASE points.
	coordinator = "http://localhost:8080"
)

// Bounds, not expectations: a cold build on two shared cores takes minutes.
const (
	buildAndStartLimit = 15 * time.Minute
	tourLimit          = 3 * time.Minute
	stopLimit          = 30 * time.Second
)

func TestREADMETour(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries on an empty cache and runs a cluster; skipped with -short")
	}
	for _, tool := range []string{"make", "bash", "curl", "jq", "git", "go"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the tour needs %s (.ci/run installs the missing ones)", tool)
	}
	clone := copyRepository(t)
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	require.NoError(t, err)
	blocks := tourBlocks(t, string(readme))

	// The first block is the first terminal's: `make run` alone.
	require.Equal(t, []string{"make run"}, commandLines(blocks[0]), "the tour's first block must be `make run` alone")
	before := listing(t, clone)

	env := newcomerEnv(t)
	run := startMakeRun(t, clone, env)
	run.waitFor(t, upLine, buildAndStartLimit)
	t.Logf("make run reported %q after %s", upLine, run.since().Round(time.Second))

	// No wait, no health check: the tour's next line uploads at once.
	script := "set -euo pipefail\nset -x\n" + strings.Join(blocks[1:], "\n")
	ctx, cancel := context.WithTimeout(t.Context(), tourLimit)
	defer cancel()
	tour := exec.CommandContext(ctx, "bash", "-c", script)
	tour.Dir = clone
	tour.Env = env
	var transcript bytes.Buffer
	tour.Stdout, tour.Stderr = &transcript, &transcript
	err = tour.Run()
	t.Logf("the tour's transcript:\n%s", transcript.String())
	require.NoError(t, err, "a step of the tour failed; make run's output:\n%s", run.output())

	out := transcript.String()
	// What the tour says each step shows.
	require.Len(t, regexp.MustCompile(`(?m)^same bytes$`).FindAllString(out, -1), 2, "both downloads must give the uploaded bytes back")
	primary := traced(t, out, "PRIMARY")
	served := regexp.MustCompile(`(?i)x-served-by-node:\s*(\S+)`).FindStringSubmatch(out)
	require.NotNil(t, served, "the failover read must say which node served it")
	require.NotEqual(t, primary, served[1], "the stopped primary cannot have served the read")
	require.Contains(t, out, primary+" stopped")
	require.Contains(t, out, primary+" is running again")
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		require.Regexp(t, `(?m)^`+node+`\s+HEALTHY\s+yes\s`, out, "`dfs nodes` lists %s healthy on the ring", node)
	}
	// The restarted node is back on the ring, as restart-node promised.
	requireOnRing(t, primary)

	// Ctrl-C in the first terminal stops everything.
	run.interrupt(t, stopLimit)
	require.Contains(t, run.output(), "stopped")

	// The tour left nothing in the repository beyond what .gitignore names.
	after := listing(t, clone)
	for path := range after {
		if before[path] || strings.HasPrefix(path, "bin/") || strings.HasPrefix(path, "data/") {
			continue
		}
		t.Errorf("the tour left %s in the repository", path)
	}
}

// copyRepository copies what a clone of this repository holds — its tracked
// files and any new ones not ignored — into a fresh directory.
func copyRepository(t *testing.T) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := localcluster.FindModuleRoot(wd)
	require.NoError(t, err)
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	files, err := ls.Output()
	require.NoError(t, err, "list the repository's files (is %s a git checkout?)", root)
	clone := filepath.Join(t.TempDir(), "dfs")
	for _, rel := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		require.NoError(t, err)
		dst := filepath.Join(clone, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst, data, st.Mode().Perm()))
	}
	return clone
}

// tourBlocks returns the sh code blocks of README's tour section.
func tourBlocks(t *testing.T, readme string) []string {
	i := strings.Index(readme, "\n"+tourHeading+"\n")
	require.GreaterOrEqual(t, i, 0, "README.md has no %q section", tourHeading)
	section := readme[i+len(tourHeading)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	require.GreaterOrEqual(t, len(blocks), 2, "the tour needs a block for each terminal")
	return blocks
}

// commandLines returns a block's lines without blank ones and comments.
func commandLines(block string) []string {
	var lines []string
	for line := range strings.SplitSeq(block, "\n") {
		if c, _, _ := strings.Cut(line, "#"); strings.TrimSpace(c) != "" {
			lines = append(lines, strings.TrimSpace(c))
		}
	}
	return lines
}

// newcomerEnv is a shell's environment with nothing of dfs in it and an
// empty build cache.
func newcomerEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "GOCACHE" || k == "GOFLAGS" || k == "DATABASE_URL" || k == "REDIS_URL" || k == "CLUSTER_TOKEN" || k == "MAKEFLAGS" || k == "MAKELEVEL":
		case strings.HasPrefix(k, "DFS_") || strings.HasPrefix(k, "HEALTH_"):
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GOCACHE="+filepath.Join(t.TempDir(), "gocache"))
}

// listing returns every file under dir, relative to it.
func listing(t *testing.T, dir string) map[string]bool {
	files := make(map[string]bool)
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[filepath.ToSlash(rel)] = true
		return err
	}))
	return files
}

// traced returns the value the tour's `set -x` trace shows assigned to name.
func traced(t *testing.T, transcript, name string) string {
	m := regexp.MustCompile(`(?m)^\++ ` + name + `=(\S+)$`).FindStringSubmatch(transcript)
	require.NotNil(t, m, "the transcript shows no assignment to %s", name)
	return m[1]
}

func requireOnRing(t *testing.T, node string) {
	resp, err := http.Get(coordinator + "/api/nodes/" + node)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var n struct {
		Status string `json:"status"`
		OnRing bool   `json:"onRing"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&n))
	require.Equal(t, "HEALTHY", n.Status)
	require.True(t, n.OnRing)
}

// makeRun is `make run` in the first terminal.
type makeRun struct {
	cmd   *exec.Cmd
	start time.Time
	done  chan struct{}
	mu    sync.Mutex
	out   bytes.Buffer
}

func startMakeRun(t *testing.T, dir string, env []string) *makeRun {
	r := &makeRun{start: time.Now(), done: make(chan struct{})}
	r.cmd = exec.Command("make", "run")
	r.cmd.Dir = dir
	r.cmd.Env = env
	// A process group of its own, as a terminal's foreground job has: Ctrl-C
	// reaches make and everything it started.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	require.NoError(t, r.cmd.Start())
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
		}
	}()
	go func() {
		_ = r.cmd.Wait()
		pw.Close()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-r.done
		}
	})
	return r
}

func (r *makeRun) since() time.Duration { return time.Since(r.start) }

func (r *makeRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until make run's output has a line containing want.
func (r *makeRun) waitFor(t *testing.T, want string, limit time.Duration) {
	deadline := time.After(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if strings.Contains(r.output(), want) {
			return
		}
		select {
		case <-tick.C:
		case <-r.done:
			if strings.Contains(r.output(), want) {
				return
			}
			t.Fatalf("make run exited before printing %q:\n%s", want, r.output())
		case <-deadline:
			t.Fatalf("make run did not print %q within %s:\n%s", want, limit, r.output())
		}
	}
}

// interrupt is Ctrl-C: SIGINT to the whole foreground group. make itself
// then reports the interrupt and exits with a failure status, as it does at
// a terminal; what counts is that dfs stopped every process cleanly.
func (r *makeRun) interrupt(t *testing.T, limit time.Duration) {
	require.NoError(t, syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT))
	select {
	case <-r.done:
		require.NotContains(t, r.output(), "not every process stopped cleanly")
	case <-time.After(limit):
		t.Fatalf("make run did not stop within %s of Ctrl-C:\n%s", limit, r.output())
	}
}
