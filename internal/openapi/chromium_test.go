//go:build linux

package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/openapi"
	"github.com/dfs-project/dfs/internal/openapi/openapitest"
	"github.com/dfs-project/dfs/internal/testenv"
)

// chromium finds Debian's chromium; without it the test skips locally and
// fails under CI, which installs it (.ci/run).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testenv.InCI() {
		t.Fatal("chromium is not installed: CI must run the Swagger UI test (.ci/run installs Debian's chromium)")
	}
	t.Skip("skipping: chromium is not installed (apt-get install -y chromium)")
	return ""
}

// requestLog records the paths the browser asked the server for.
type requestLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.paths = append(l.paths, r.URL.Path)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.paths)
}

// netLog is the part of Chromium's network log the test reads.
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

// loadPage loads path from origin in headless Chromium and returns the DOM
// once the page's scripts have run, and the URLs of every request the page
// started. Every host name but 127.0.0.1 resolves to nothing, so a page that
// needed the internet could not render.
func loadPage(t *testing.T, bin, origin, path string) (dom string, requested []string) {
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
		"--virtual-time-budget=10000", "--dump-dom", origin+path)
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

func TestSwaggerUIRendersInHeadlessChromium(t *testing.T) {
	bin := chromium(t)
	var log requestLog
	srv := httptest.NewServer(log.wrap(openapi.Handler()))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), "the test server must be on loopback: %s", srv.URL)

	doc, err := openapitest.Document()
	require.NoError(t, err)
	// A deep link opens the upload, so its answers and their examples are
	// rendered too; the other operations stay listed.
	upload := doc.Paths.Find("/api/files").Post
	dom, requested := loadPage(t, bin, srv.URL, openapi.UIPath+"#/"+upload.Tags[0]+"/"+upload.OperationID)
	// Swagger UI breaks paths with zero-width spaces so they can wrap.
	text := strings.ReplaceAll(html.UnescapeString(dom), "\u200b", "")

	has := func(want, what string) {
		t.Helper()
		if !strings.Contains(text, want) {
			// The end of the DOM holds Swagger UI's own error, if it had one.
			t.Fatalf("%s: the rendered page lacks %q; the end of its DOM:\n%s", what, want, text[max(0, len(text)-3000):])
		}
	}
	has(doc.Info.Title, "the document's title is not rendered")
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			has(`data-path="`+path+`"`, method+" "+path+" is not listed")
			has(`class="opblock-summary-description">`+op.Summary+"<", "the summary of "+method+" "+path+" is not listed")
		}
	}
	has("/api/files/{fileId}/verify", "the verify operation is not listed")
	has("Re-hash every copy of a file", "the verify operation's summary is not listed")

	// Each answer shows its own example, not one made up from the schema
	// (which once put {"status": 599, "error": "FILE_NOT_FOUND"} under every
	// error): the upload's first 201 example, and error examples with their
	// own status and code.
	active := upload.Responses.Status(http.StatusCreated).Value.Content.Get("application/json").Examples["active"].Value.Value.(map[string]any)
	for _, tc := range []struct {
		status int
		want   []string
	}{
		{http.StatusCreated, []string{`"fileId": "` + active["fileId"].(string) + `"`, `"status": "ACTIVE"`}},
		{http.StatusBadRequest, []string{`"status": 400`, `"error": "INVALID_REQUEST"`}},
		{http.StatusRequestEntityTooLarge, []string{`"status": 413`, `"error": "FILE_TOO_LARGE"`}},
		{http.StatusServiceUnavailable, []string{`"status": 503`, `"error": "NO_HEALTHY_NODES"`}},
	} {
		row := responseRow(t, dom, tc.status)
		for _, want := range tc.want {
			require.Contains(t, row, want, "the upload's %d answer does not show its example", tc.status)
		}
	}

	// Everything the page asked for came from the binary: no request it
	// started left the test server, and the server saw the assets.
	require.GreaterOrEqual(t, len(requested), 5, "the network log shows too few of the page's requests: %v", requested)
	for _, u := range requested {
		require.True(t, strings.HasPrefix(u, srv.URL+"/"), "the page requested %s, outside the coordinator", u)
	}
	seen := log.seen()
	for _, want := range []string{"/swagger-ui/", "/swagger-ui/swagger-ui-bundle.js", "/swagger-ui/swagger-ui-standalone-preset.js",
		"/swagger-ui/init.js", "/swagger-ui/swagger-ui.css", "/openapi.json"} {
		require.Contains(t, seen, want, "the browser never asked for %s; it asked for %v", want, seen)
	}
}

// responseRow returns the text of the row of Swagger UI's response table for
// status, tags stripped and white space collapsed, as a reader sees it.
func responseRow(t *testing.T, dom string, status int) string {
	t.Helper()
	start := strings.Index(dom, `data-code="`+strconv.Itoa(status)+`"`)
	require.GreaterOrEqual(t, start, 0, "no response row for %d is rendered", status)
	row := dom[start:]
	if end := strings.Index(row[1:], `<tr class="response`); end >= 0 {
		row = row[:end+1]
	}
	row = html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(row, ""))
	return strings.Join(strings.Fields(strings.ReplaceAll(row, "\u200b", "")), " ")
}
