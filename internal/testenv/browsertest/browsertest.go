//go:build linux

// Package browsertest loads pages served by the binary in Debian's headless
// Chromium, for the tests of the pages the coordinator serves (Swagger UI,
// the console). A page is loaded with every host name but 127.0.0.1
// resolving to nothing, so a page that needed the internet could not
// render; the DOM is read once the page's scripts have run, and Chromium's
// network log tells which requests the page started.
package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/testenv"
)

// Chromium finds Debian's chromium; without it the test skips locally and
// fails under CI, which installs it (.ci/run).
func Chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatal("chromium is not installed: CI must run the browser tests (.ci/run installs Debian's chromium)")
	}
	t.Skip("skipping: chromium is not installed (apt-get install -y chromium)")
	return ""
}

// netLog is the part of Chromium's network log the tests read.
type netLog struct {
	Constants struct {
		LogEventTypes map[string]int `json:"logEventTypes"`
	} `json:"constants"`
	Events []struct {
		Type   int `json:"type"`
		Params struct {
			URL       string `json:"url"`
			Initiator string `json:"initiator"`
		} `json:"params"`
	} `json:"events"`
}

// requestsBy lists the URLs of the requests the page at origin started, from
// Chromium's network log. The browser's own background requests have no
// initiator origin and are left out.
func requestsBy(t *testing.T, logFile, origin string) []string {
	t.Helper()
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	var l netLog
	if err := json.Unmarshal(raw, &l); err != nil {
		// A log cut short lacks its closing brackets.
		trimmed := strings.TrimRight(strings.TrimSpace(string(raw)), ",")
		require.NoError(t, json.Unmarshal([]byte(trimmed+"]}"), &l), "read chromium's network log")
	}
	start, ok := l.Constants.LogEventTypes["URL_REQUEST_START_JOB"]
	require.True(t, ok, "chromium's network log names no URL_REQUEST_START_JOB event")
	var urls []string
	for _, e := range l.Events {
		if e.Type == start && e.Params.Initiator == origin {
			urls = append(urls, e.Params.URL)
		}
	}
	return urls
}

// Load loads path from origin in headless Chromium and returns the DOM once
// the page's scripts have run for budget of virtual time, and the URLs of
// every request the page started.
func Load(t *testing.T, bin, origin, path string, budget time.Duration) (dom string, requested []string) {
	t.Helper()
	dir := t.TempDir()
	netLogFile := filepath.Join(dir, "net-log.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--log-net-log="+netLogFile,
		"--virtual-time-budget="+strconv.FormatInt(budget.Milliseconds(), 10), "--dump-dom", origin+path)
	// Chromium writes caches and crash reports under HOME: keep them in the
	// test's temporary directory.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	// Chromium starts helper processes; its own process group lets the test
	// end all of them, also when the page hangs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Helpers that outlived the browser; ESRCH means there are none.
		if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			t.Logf("end chromium's helpers: %v", kerr)
		}
	}
	require.NoError(t, err, "chromium failed; its log:\n%s", stderr.String())
	return stdout.String(), requestsBy(t, netLogFile, origin)
}
