//go:build linux

// Package s3e2e drives the S3 API of a real cluster (a coordinator and
// storage nodes as processes) with the clients people use: aws-sdk-go-v2
// and minio-go from Go, and Debian's awscli, s3cmd, rclone and restic.
package s3e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
)

var binDir string

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "dfs-s3e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3e2e:", err)
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
		fmt.Fprintln(os.Stderr, "s3e2e:", err)
		return 1
	}
	return m.Run()
}
