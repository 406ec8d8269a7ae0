package localcluster

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/stretchr/testify/require"
)

func TestPrefixWriterKeepsLinesWhole(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		flush  bool
		want   string
	}{
		{"one line", []string{"hello\n"}, false, "[n] hello\n"},
		{"line split across writes", []string{"hel", "lo\nwor", "ld\n"}, false, "[n] hello\n[n] world\n"},
		{"partial line held back", []string{"a\nb"}, false, "[n] a\n"},
		{"flush ends the last line", []string{"a\nb"}, true, "[n] a\n[n] b\n"},
		{"flush with nothing pending", []string{"a\n"}, true, "[n] a\n"},
		{"empty lines kept", []string{"\n\n"}, false, "[n] \n[n] \n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := newPrefixWriter(&out, &sync.Mutex{}, "[n] ")
			for _, s := range tt.writes {
				n, err := w.Write([]byte(s))
				require.NoError(t, err)
				require.Equal(t, len(s), n)
			}
			if tt.flush {
				w.Flush()
			}
			require.Equal(t, tt.want, out.String())
		})
	}
}

func TestTailLines(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.log")
	require.NoError(t, os.WriteFile(short, []byte("a\nb\nc\n"), 0o644))
	require.Equal(t, "b\nc", tailLines(short, 2))
	require.Equal(t, "a\nb\nc", tailLines(short, 10))

	// A log longer than the window: the cut first line is dropped and the
	// last lines survive.
	var long strings.Builder
	for i := range 2000 {
		long.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	path := filepath.Join(dir, "long.log")
	require.NoError(t, os.WriteFile(path, []byte(long.String()), 0o644))
	require.Equal(t, "line 1997\nline 1998\nline 1999", tailLines(path, 3))

	require.Contains(t, tailLines(filepath.Join(dir, "missing.log"), 3), "no log")
}

func TestFindModuleRoot(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644))
	deep := filepath.Join(root, "a", "b")
	require.NoError(t, os.MkdirAll(deep, 0o755))

	got, err := FindModuleRoot(deep)
	require.NoError(t, err)
	require.Equal(t, root, got)

	_, err = FindModuleRoot(filepath.Dir(root))
	require.Error(t, err)
	require.Equal(t, errs.NotFound, errs.KindOf(err))
}

// TestBuildModuleSkipsCommandsWithoutSource builds a throwaway module in which
// one command has source, one has only an empty directory and one is missing.
func TestBuildModuleSkipsCommandsWithoutSource(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("cmd/dfs/main.go", "package main\n\nfunc main() {}\n")
	write("cmd/storage-node/main_test.go", "package main\n")
	bin := filepath.Join(t.TempDir(), "bin")

	res, err := BuildModule(context.Background(), root, bin)
	require.NoError(t, err)
	require.Equal(t, []string{CLIBinary}, res.Built)
	require.Equal(t, []string{CoordinatorBinary, StorageNodeBinary}, res.Skipped)
	require.NoError(t, checkBinary(bin, CLIBinary))

	write("cmd/coordinator/main.go", "package main\n\nfunc main() { undefined() }\n")
	_, err = BuildModule(context.Background(), root, bin)
	require.ErrorContains(t, err, "undefined", "a compile error must be reported with the compiler's output")
}

func TestStartRejectsBadOptions(t *testing.T) {
	bin := t.TempDir()
	tests := []struct {
		name string
		opts Options
		kind errs.Kind
	}{
		{"no bin dir", Options{}, errs.Invalid},
		{"negative node count", Options{BinDir: bin, Nodes: -1}, errs.Invalid},
		{"coordinator port out of range", Options{BinDir: bin, CoordinatorPort: 70000}, errs.Invalid},
		{"node ports run past 65535", Options{BinDir: bin, NodeBasePort: 65535, Nodes: 2}, errs.Invalid},
		{"no storage-node binary", Options{BinDir: bin}, errs.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.DataDir = t.TempDir()
			_, err := Start(context.Background(), tt.opts)
			require.Error(t, err)
			require.Equal(t, tt.kind, errs.KindOf(err), "error: %v", err)
		})
	}
}

func TestReservePorts(t *testing.T) {
	ports, err := reservePorts(Options{Host: DefaultHost, Nodes: 3}, true)
	require.NoError(t, err)
	require.Len(t, ports, 4)
	seen := map[int]bool{}
	for _, p := range ports {
		require.NotZero(t, p)
		require.False(t, seen[p], "port %d picked twice", p)
		seen[p] = true
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	_, err = reservePorts(Options{Host: DefaultHost, Nodes: 1, NodeBasePort: busyPort}, true)
	require.Equal(t, errs.Conflict, errs.KindOf(err), "error: %v", err)
	_, err = reservePorts(Options{Host: DefaultHost, Nodes: 1, CoordinatorPort: busyPort}, true)
	require.Equal(t, errs.Conflict, errs.KindOf(err), "error: %v", err)
	// Without a coordinator binary nothing will listen on its port, so a busy
	// one is no obstacle.
	ports, err = reservePorts(Options{Host: DefaultHost, Nodes: 1, CoordinatorPort: busyPort}, false)
	require.NoError(t, err)
	require.Equal(t, busyPort, ports[0])
}

// fakeAdmitter is a cluster whose coordinator is srv, with env as its
// CoordinatorEnv, for the admission poll alone.
func fakeAdmitter(t *testing.T, srv *httptest.Server, env ...string) *Cluster {
	t.Helper()
	host, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return &Cluster{
		opts:      Options{Host: host, CoordinatorEnv: env, ReadyTimeout: time.Hour, DataDir: t.TempDir()},
		log:       slog.New(slog.DiscardHandler),
		coordPort: p,
		probe:     srv.Client(),
		procs:     map[string]*process{CoordinatorName: {name: CoordinatorName}},
		nodes:     []string{"node-1"},
	}
}

// TestAdmissionPollUsesTheRootKey: with API_AUTH=keys the coordinator's
// REST API needs the root key, so the poll sends the one the coordinator
// starts with, and a refusal ends the wait at once with the reason instead
// of a timeout.
func TestAdmissionPollUsesTheRootKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, s, ok := r.BasicAuth(); !ok || k != "root-key" || s != "root-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"status":401,"error":"UNAUTHORIZED","message":"the access key or secret is wrong"}`)
			return
		}
		_, _ = io.WriteString(w, `[{"nodeId":"node-1","status":"HEALTHY","onRing":true}]`)
	}))
	t.Cleanup(srv.Close)
	// The test's own deadline stands for "at once": a poll that retried
	// would run into it and fail with a deadline error instead.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	require.NoError(t, fakeAdmitter(t, srv, "ROOT_ACCESS_KEY=root-key", "ROOT_SECRET_KEY=root-secret").WaitAdmitted(ctx))

	err := fakeAdmitter(t, srv, "ROOT_ACCESS_KEY=root-key", "ROOT_SECRET_KEY=wrong").WaitAdmitted(ctx)
	require.Equal(t, errs.Unauthorized, errs.KindOf(err), "%v", err)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "401 UNAUTHORIZED: the access key or secret is wrong")
	require.ErrorContains(t, err, "with ROOT_ACCESS_KEY from the coordinator's environment")

	err = fakeAdmitter(t, srv).WaitAdmitted(ctx)
	require.Equal(t, errs.Unauthorized, errs.KindOf(err), "%v", err)
	require.ErrorContains(t, err, "the coordinator's environment sets no ROOT_ACCESS_KEY and ROOT_SECRET_KEY")
}

// TestAdmissionPollStopsAtAForbiddenAnswer: a 403, the coordinator's own or
// a proxy's page, ends the wait at once with what it said.
func TestAdmissionPollStopsAtAForbiddenAnswer(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"coordinator", `{"status":403,"error":"FORBIDDEN","message":"the policy of root-key does not allow it"}`,
			"403 FORBIDDEN: the policy of root-key does not allow it"},
		{"proxy", "<html>Forbidden by the front</html>\nmore", "403 Forbidden: <html>Forbidden by the front</html>)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := fakeAdmitter(t, srv, "ROOT_ACCESS_KEY=root-key", "ROOT_SECRET_KEY=root-secret").WaitAdmitted(ctx)
			require.Equal(t, errs.Forbidden, errs.KindOf(err), "%v", err)
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
