package localcluster

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

// The binaries a cluster is made of, named as `go build` names them after
// their cmd directory.
const (
	CoordinatorBinary = "coordinator"
	StorageNodeBinary = "storage-node"
	CLIBinary         = "dfs"
)

// buildOrder is the set of binaries Build makes, in the order it reports them.
var buildOrder = []string{CoordinatorBinary, StorageNodeBinary, CLIBinary}

// BuildResult says which binaries Build wrote and which it left out because
// their cmd directory holds no Go source yet.
type BuildResult struct {
	Built   []string
	Skipped []string
}

// Build compiles the module's binaries into binDir. The module is the one
// containing the working directory (see FindModuleRoot).
func Build(ctx context.Context, binDir string) (BuildResult, error) {
	wd, err := os.Getwd()
	if err != nil {
		return BuildResult{}, errs.Wrap(errs.Other, err, "find the working directory")
	}
	root, err := FindModuleRoot(wd)
	if err != nil {
		return BuildResult{}, err
	}
	return BuildModule(ctx, root, binDir)
}

// BuildModule runs `go build -o binDir/` in the module at moduleRoot over
// those of ./cmd/coordinator, ./cmd/storage-node and ./cmd/dfs whose
// directory holds Go source; the others are reported as skipped rather than
// failing, because during development a binary may not be written yet. A
// relative binDir is taken from the working directory, not from moduleRoot.
func BuildModule(ctx context.Context, moduleRoot, binDir string) (BuildResult, error) {
	var res BuildResult
	out, err := filepath.Abs(binDir)
	if err != nil {
		return res, errs.Wrap(errs.Invalid, err, "bin directory %q", binDir)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return res, errs.Wrap(errs.Other, err, "create bin directory")
	}
	args := []string{"build", "-o", out + string(filepath.Separator)}
	for _, name := range buildOrder {
		ok, err := hasGoSource(filepath.Join(moduleRoot, "cmd", name))
		if err != nil {
			return res, err
		}
		if !ok {
			res.Skipped = append(res.Skipped, name)
			continue
		}
		res.Built = append(res.Built, name)
		args = append(args, "./cmd/"+name)
	}
	if len(res.Built) == 0 {
		return res, nil
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleRoot
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return BuildResult{Skipped: res.Skipped}, errs.Wrap(errs.Other, err, "go %s:\n%s", strings.Join(args, " "), strings.TrimSpace(output.String()))
	}
	return res, nil
}

// hasGoSource reports whether dir exists and holds a non-test Go file: an
// empty placeholder directory is not yet a buildable command.
func hasGoSource(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, errs.Wrap(errs.Other, err, "read %s", dir)
	}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true, nil
		}
	}
	return false, nil
}

// FindModuleRoot returns the nearest directory at or above dir that holds a
// go.mod file.
func FindModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", errs.Wrap(errs.Invalid, err, "directory %q", dir)
	}
	for d := dir; ; {
		if st, err := os.Stat(filepath.Join(d, "go.mod")); err == nil && !st.IsDir() {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errs.E(errs.NotFound, "no go.mod in %s or any directory above it", dir)
		}
		d = parent
	}
}
