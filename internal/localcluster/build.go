package localcluster

import (
	"bytes"
	"context"
	"io"
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
	return BuildWith(ctx, BuildOptions{BinDir: binDir})
}

// BuildModule is Build for the module at moduleRoot.
func BuildModule(ctx context.Context, moduleRoot, binDir string) (BuildResult, error) {
	return BuildWith(ctx, BuildOptions{ModuleRoot: moduleRoot, BinDir: binDir})
}

// BuildOptions say what BuildWith builds and whom it tells.
type BuildOptions struct {
	// ModuleRoot is the module to build; "" means the one containing the
	// working directory.
	ModuleRoot string
	// BinDir receives the binaries. A relative BinDir is taken from the
	// working directory, not from ModuleRoot.
	BinDir string
	// Progress, when set, receives each line `go build -v` writes as it
	// goes: a package's import path as it is compiled, and a "go:
	// downloading" line per module fetched. A warm build cache writes none.
	Progress func(line string)
}

// BuildWith runs `go build -o BinDir/` over those of ./cmd/coordinator,
// ./cmd/storage-node and ./cmd/dfs whose directory holds Go source; the
// others are reported as skipped rather than failing, because during
// development a binary may not be written yet. The three are built by one
// `go build`, so that the packages they share are compiled once.
func BuildWith(ctx context.Context, o BuildOptions) (BuildResult, error) {
	var res BuildResult
	root := o.ModuleRoot
	if root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return res, errs.Wrap(errs.Other, err, "find the working directory")
		}
		if root, err = FindModuleRoot(wd); err != nil {
			return res, err
		}
	}
	out, err := filepath.Abs(o.BinDir)
	if err != nil {
		return res, errs.Wrap(errs.Invalid, err, "bin directory %q", o.BinDir)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return res, errs.Wrap(errs.Other, err, "create bin directory")
	}
	args := []string{"build", "-o", out + string(filepath.Separator)}
	if o.Progress != nil {
		args = append(args, "-v")
	}
	for _, name := range buildOrder {
		ok, err := hasGoSource(filepath.Join(root, "cmd", name))
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
	cmd.Dir = root
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if o.Progress != nil {
		lines := &lineWriter{emit: o.Progress}
		defer lines.Flush()
		cmd.Stderr = io.MultiWriter(&output, lines)
	}
	if err := cmd.Run(); err != nil {
		return BuildResult{Skipped: res.Skipped}, errs.Wrap(errs.Other, err, "go %s:\n%s", strings.Join(args, " "), strings.TrimSpace(output.String()))
	}
	return res, nil
}

// lineWriter hands every complete line written to it to emit.
type lineWriter struct {
	emit    func(string)
	partial []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		l.emit(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

// Flush emits a last line that had no newline.
func (l *lineWriter) Flush() {
	if len(l.partial) > 0 {
		l.emit(string(l.partial))
		l.partial = nil
	}
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

// BuildForTests is what a test package's TestMain needs to run real
// processes: the daemons of the module holding the working directory built
// into binDir, and an error unless the coordinator and the storage node were
// both built.
func BuildForTests(ctx context.Context, binDir string) error {
	wd, err := os.Getwd()
	if err != nil {
		return errs.Wrap(errs.Other, err, "find the working directory")
	}
	module, err := FindModuleRoot(wd)
	if err != nil {
		return err
	}
	res, err := BuildModule(ctx, module, binDir)
	if err != nil {
		return errs.Wrap(errs.KindOf(err), err, "build the binaries")
	}
	for _, need := range []string{CoordinatorBinary, StorageNodeBinary} {
		if _, err := os.Stat(filepath.Join(binDir, need)); err != nil {
			return errs.E(errs.Other, "%s was not built (built %v, skipped %v)", need, res.Built, res.Skipped)
		}
	}
	return nil
}
