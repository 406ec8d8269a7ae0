package deploytest

import (
	"bytes"
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/api"
	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/coordinator"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/storagenode"
)

// The two daemons, by binary name (the name of their directory under cmd/).
const (
	coordinatorBin = "coordinator"
	storageNodeBin = "storage-node"
	probeBin       = "healthprobe"
)

// repoRoot is the directory holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, err := os.Stat(filepath.Join(moduleRoot, "go.mod"))
	require.NoError(t, err, "no go.mod above the working directory")
	return moduleRoot
}

// readRepoFile returns a file of the repository as a string.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	require.NoError(t, err)
	return string(b)
}

// loadConfig runs a binary's own configuration loader over env.
func loadConfig(binary string, env map[string]string) error {
	l := envconf.FromMap(env)
	switch binary {
	case coordinatorBin:
		_, err := coordinator.LoadConfig(l)
		return err
	case storageNodeBin:
		_, err := storagenode.LoadConfig(l)
		return err
	}
	return errors.New("no binary named " + binary)
}

// configOf returns the configuration a binary builds from env, for comparing
// two environments' effects.
func configOf(t *testing.T, binary string, env map[string]string) any {
	t.Helper()
	l := envconf.FromMap(env)
	var (
		cfg any
		err error
	)
	switch binary {
	case coordinatorBin:
		cfg, err = coordinator.LoadConfig(l)
	case storageNodeBin:
		cfg, err = storagenode.LoadConfig(l)
	default:
		t.Fatalf("no binary named %s", binary)
	}
	require.NoError(t, err, "%s with %v", binary, env)
	return cfg
}

// readVars returns every environment variable a daemon reads: the names its
// LoadConfig looks up, recorded as it runs, and any name its main package
// passes to os.Getenv or os.LookupEnv directly.
func readVars(t *testing.T, binary string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	l := &envconf.Loader{Lookup: func(name string) (string, bool) {
		seen[name] = true
		return "", false
	}}
	switch binary {
	case coordinatorBin:
		_, err := coordinator.LoadConfig(l)
		require.NoError(t, err)
	case storageNodeBin:
		_, err := storagenode.LoadConfig(l)
		require.NoError(t, err)
	default:
		t.Fatalf("no binary named %s", binary)
	}
	for _, name := range getenvCalls(t, filepath.Join(repoRoot(t), "cmd", binary)) {
		seen[name] = true
	}
	return seen
}

// getenvCalls lists the string literals passed to os.Getenv or os.LookupEnv
// in the non-test Go files of dir.
func getenvCalls(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "os" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				name, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				names = append(names, name)
			}
			return true
		})
	}
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestReadVars shows the variable lists are each binary's own: a deployment
// file that sets a coordinator variable on a node must not pass.
func TestReadVars(t *testing.T) {
	coord, node := readVars(t, coordinatorBin), readVars(t, storageNodeBin)
	for _, name := range []string{"SERVER_PORT", "DATA_DIRECTORY", "DATABASE_URL", "REDIS_URL", "DRAIN_TIMEOUT", "CLUSTER_TOKEN", "LOG_LEVEL"} {
		require.True(t, coord[name], "the coordinator reads %s", name)
	}
	for _, name := range []string{"SERVER_PORT", "STORAGE_NODE_ID", "STORAGE_DATA_DIRECTORY", "STORAGE_ADVERTISED_HOST", "COORDINATOR_URL", "CLUSTER_TOKEN"} {
		require.True(t, node[name], "the storage node reads %s", name)
	}
	require.False(t, node["DATABASE_URL"], "the storage node has no database")
	require.False(t, coord["STORAGE_NODE_ID"], "the coordinator has no node id")
}

// stubHealth is a coordinator whose metadata store is up.
type stubHealth struct{}

var _ api.Health = stubHealth{}

func (stubHealth) Cluster(context.Context) api.HealthReport { return api.HealthReport{} }
func (stubHealth) Ready(context.Context) error              { return nil }

// handlers are the two daemons' real HTTP handlers, built once: the
// coordinator's over a healthy stub, a storage node over an in-memory store.
var handlers = sync.OnceValues(func() (map[string]chi.Router, error) {
	coord, ok := api.New(api.Options{Health: stubHealth{}}).(chi.Router)
	if !ok {
		return nil, errors.New("the coordinator's handler is not a chi router")
	}
	cfg, err := storagenode.LoadConfig(envconf.FromMap(nil))
	if err != nil {
		return nil, err
	}
	srv, err := storagenode.NewWithStore(cfg, blob.NewMemory(blob.Options{}), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return nil, err
	}
	node, ok := srv.Handler().(chi.Router)
	if !ok {
		return nil, errors.New("the storage node's handler is not a chi router")
	}
	return map[string]chi.Router{coordinatorBin: coord, storageNodeBin: node}, nil
})

// handler returns a daemon's handler.
func handler(t *testing.T, binary string) chi.Router {
	t.Helper()
	hs, err := handlers()
	require.NoError(t, err)
	h, ok := hs[binary]
	require.True(t, ok, "no binary named %s", binary)
	return h
}

// routePattern is the route of binary that serves method and path, or "".
func routePattern(t *testing.T, binary, method, path string) string {
	t.Helper()
	return handler(t, binary).Find(chi.NewRouteContext(), method, path)
}

// requireRoute fails unless binary serves method on path.
func requireRoute(t *testing.T, binary, method, path, where string) {
	t.Helper()
	require.NotEmpty(t, routePattern(t, binary, method, path), "%s: %s does not serve %s %s", where, binary, method, path)
}

// TestRouteCheck shows the route check can fail.
func TestRouteCheck(t *testing.T) {
	requireRoute(t, coordinatorBin, "GET", "/health/ready", "test")
	requireRoute(t, storageNodeBin, "GET", "/health/live", "test")
	require.Empty(t, routePattern(t, coordinatorBin, "GET", "/actuator/health"))
	require.Empty(t, routePattern(t, storageNodeBin, "DELETE", "/health/ready"))
	require.Equal(t, "/api/nodes/{nodeId}", routePattern(t, coordinatorBin, "DELETE", "/api/nodes/storage-node-0"))
}

// buildProbe builds cmd/healthprobe once per test binary and returns its path.
var buildProbe = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "deploytest-probe-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, probeBin)
	var stderr bytes.Buffer
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+probeBin)
	cmd.Dir = moduleRoot
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", errors.New("go build ./cmd/healthprobe: " + err.Error() + ": " + stderr.String())
	}
	return out, nil
})

// moduleRoot is set by TestMain: sync.OnceValues cannot take a *testing.T.
var moduleRoot string

func TestMain(m *testing.M) {
	dir, err := os.Getwd()
	if err == nil {
		for moduleRoot = dir; ; moduleRoot = filepath.Dir(moduleRoot) {
			if _, err := os.Stat(filepath.Join(moduleRoot, "go.mod")); err == nil || filepath.Dir(moduleRoot) == moduleRoot {
				break
			}
		}
	}
	code := m.Run()
	if path, err := buildProbe(); err == nil && path != "" {
		os.RemoveAll(filepath.Dir(path))
	}
	os.Exit(code)
}

// runProbe runs the built healthprobe with args and exactly env, returning
// its exit code and output.
func runProbe(t *testing.T, args []string, env map[string]string) (int, string) {
	t.Helper()
	probe, err := buildProbe()
	require.NoError(t, err)
	cmd := exec.Command(probe, args...)
	for _, k := range sortedKeys(env) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	require.NoError(t, err)
	return 0, out.String()
}
