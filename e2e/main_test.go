//go:build linux

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dfs-project/dfs/internal/localcluster"
)

// binDir holds the coordinator and storage-node binaries, built once for the
// whole package by TestMain and shared by every cluster.
var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here starts real processes; -short runs none of them.
		os.Exit(m.Run())
	}
	switch l := os.Getenv(layoutVar); l {
	case "", "files", "volumes":
	default:
		fmt.Fprintf(os.Stderr, "e2e: %s=%q: must be files or volumes, or unset for the nodes' default\n", layoutVar, l)
		os.Exit(2)
	}
	root, err := os.MkdirTemp("", "dfs-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: create the binary directory:", err)
		os.Exit(1)
	}
	code := run(m, root)
	os.RemoveAll(root)
	os.Exit(code)
}

func run(m *testing.M, root string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	binDir = filepath.Join(root, "bin")
	if err := localcluster.BuildForTests(ctx, binDir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		return code
	}
	// Every client, fake node and helper process watcher the tests started
	// in this process must be gone once the clusters are stopped.
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: goroutines outlived the tests:", err)
		return 1
	}
	return 0
}
