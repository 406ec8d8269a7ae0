package deploytest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dockerfiles are the images, by the daemon each runs.
var dockerfiles = map[string]string{
	coordinatorBin: "deploy/docker/coordinator.Dockerfile",
	storageNodeBin: "deploy/docker/storage-node.Dockerfile",
}

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, …
	args string
}

// stage is one FROM … section.
type stage struct {
	from         string
	instructions []instruction
}

// dockerfile is a parsed Dockerfile: enough of the syntax for the checks
// below (no heredocs, no ARG substitution).
type dockerfile struct {
	path   string
	stages []stage
}

func parseDockerfile(t *testing.T, rel string) dockerfile {
	t.Helper()
	df := dockerfile{path: rel}
	sc := bufio.NewScanner(strings.NewReader(readRepoFile(t, rel)))
	var cur strings.Builder
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		require.NotContains(t, in.args, "<<", "%s: heredocs are beyond this parser", rel)
		if in.cmd == "FROM" {
			df.stages = append(df.stages, stage{from: in.args})
			continue
		}
		require.NotEmpty(t, df.stages, "%s: %s before FROM", rel, in.cmd)
		df.stages[len(df.stages)-1].instructions = append(df.stages[len(df.stages)-1].instructions, in)
	}
	require.NoError(t, sc.Err())
	require.Zero(t, cur.Len(), "%s ends in a continuation", rel)
	require.GreaterOrEqual(t, len(df.stages), 2, "%s: a multi-stage build", rel)
	return df
}

// final is the stage the image is made of.
func (d dockerfile) final() stage { return d.stages[len(d.stages)-1] }

// all returns the arguments of every instruction cmd in s.
func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.instructions {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// env returns the stage's ENV settings (KEY=VALUE form only).
func (s stage) env(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, args := range s.all("ENV") {
		for _, field := range shellWords(t, args) {
			k, v, ok := strings.Cut(field, "=")
			require.True(t, ok, "ENV %s: use the KEY=VALUE form", args)
			env[k] = v
		}
	}
	return env
}

// shellWords splits s like a POSIX shell would for the simple cases used in
// Dockerfiles and hooks: blanks separate, quotes group and are removed.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	require.Zero(t, quote, "unbalanced quote in %q", s)
	if in {
		words = append(words, cur.String())
	}
	return words
}

// execForm decodes a JSON-array (exec form) instruction argument.
func execForm(t *testing.T, where, args string) []string {
	t.Helper()
	var argv []string
	require.NoError(t, json.Unmarshal([]byte(args), &argv), "%s: %q is not exec form; distroless has no shell", where, args)
	require.NotEmpty(t, argv, where)
	return argv
}

// goBuild is one `go build` command of a RUN instruction.
type goBuild struct {
	env      map[string]string // assignments before `go`
	flags    []string
	packages []string
	output   string
}

// goBuilds finds every `go build` in the RUN instructions of s.
func (s stage) goBuilds(t *testing.T) []goBuild {
	t.Helper()
	var builds []goBuild
	for _, run := range s.all("RUN") {
		for _, command := range strings.Split(run, "&&") {
			words := shellWords(t, command)
			// Skip RUN's own options (--mount=…).
			for len(words) > 0 && strings.HasPrefix(words[0], "--") {
				words = words[1:]
			}
			b := goBuild{env: map[string]string{}}
			for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
				k, v, _ := strings.Cut(words[0], "=")
				b.env[k] = v
				words = words[1:]
			}
			if len(words) < 2 || words[0] != "go" || words[1] != "build" {
				continue
			}
			for i := 2; i < len(words); i++ {
				w := words[i]
				switch {
				case w == "-o":
					i++
					b.output = words[i]
				case strings.HasPrefix(w, "-"):
					b.flags = append(b.flags, w)
				default:
					b.packages = append(b.packages, w)
				}
			}
			builds = append(builds, b)
		}
	}
	return builds
}

// goList resolves package patterns to import paths in the module.
func goList(t *testing.T, patterns ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, patterns...)...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v", patterns)
	pkgs := strings.Fields(string(out))
	slices.Sort(pkgs)
	return pkgs
}

// makeBuildPackages returns the package patterns of the Makefile's build
// target: what `make build` compiles.
func makeBuildPackages(t *testing.T) []string {
	t.Helper()
	mk := readRepoFile(t, "Makefile")
	_, recipe, ok := strings.Cut(mk, "\nbuild:")
	require.True(t, ok, "the Makefile has a build target")
	for _, line := range strings.Split(recipe, "\n")[1:] {
		if !strings.HasPrefix(line, "\t") {
			break
		}
		words := strings.Fields(line)
		if i := slices.Index(words, "build"); i > 0 && strings.Contains(words[i-1], "GO") {
			var pkgs []string
			for _, w := range words[i+1:] {
				if strings.HasPrefix(w, "./") {
					pkgs = append(pkgs, w)
				}
			}
			return pkgs
		}
	}
	t.Fatal("no go build line in the Makefile's build recipe")
	return nil
}

// TestDockerfilesBuildWhatMakeBuilds: together the images compile exactly the
// commands `make build` compiles, statically and reproducibly, and each image
// ships what it compiled.
func TestDockerfilesBuildWhatMakeBuilds(t *testing.T) {
	var built []string
	for binary, rel := range dockerfiles {
		df := parseDockerfile(t, rel)
		builds := df.stages[0].goBuilds(t)
		require.Len(t, builds, 1, "%s: one go build in the builder stage", rel)
		b := builds[0]
		require.Equal(t, "0", b.env["CGO_ENABLED"], "%s: CGO_ENABLED=0 makes the binary static, as distroless/static needs", rel)
		require.Contains(t, b.flags, "-trimpath", rel)
		require.Contains(t, b.flags, "-ldflags=-s -w", rel)
		require.NotEmpty(t, b.output, "%s: go build -o", rel)

		pkgs := goList(t, b.packages...)
		built = append(built, pkgs...)
		var names []string
		for _, p := range pkgs {
			names = append(names, path.Base(p))
		}
		require.Contains(t, names, binary, "%s builds its daemon", rel)
		require.Contains(t, names, probeBin, "%s builds the health probe", rel)

		// Every built binary reaches the final image, in /usr/local/bin.
		var shipped []string
		for _, copyArgs := range df.final().all("COPY") {
			words := strings.Fields(copyArgs)
			if !slices.Contains(words, "--from=build") || words[len(words)-1] != "/usr/local/bin/" {
				continue
			}
			for _, src := range words[:len(words)-1] {
				if !strings.HasPrefix(src, "--") {
					require.Equal(t, path.Clean(b.output), path.Dir(src), "%s copies %s from the build output", rel, src)
					shipped = append(shipped, path.Base(src))
				}
			}
		}
		slices.Sort(names)
		slices.Sort(shipped)
		require.Equal(t, names, shipped, "%s ships every binary it builds", rel)

		entry := execForm(t, rel+" ENTRYPOINT", lastOf(t, df.final().all("ENTRYPOINT"), rel))
		require.Equal(t, "/usr/local/bin/"+binary, entry[0], "%s runs its daemon", rel)
	}
	slices.Sort(built)
	require.Equal(t, goList(t, makeBuildPackages(t)...), slices.Compact(built),
		"the images together build the packages `make build` builds")
}

func lastOf(t *testing.T, list []string, where string) string {
	t.Helper()
	require.NotEmpty(t, list, where)
	return list[len(list)-1]
}

// TestDockerfileImages checks what the runtime stage promises: a distroless
// or scratch base, a numeric non-root user, the daemon's port exposed, its
// data directory a volume, only variables the daemon reads, a Go builder of
// the module's Go version.
func TestDockerfileImages(t *testing.T) {
	goMod := readRepoFile(t, "go.mod")
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(goMod)
	require.NotNil(t, m, "go.mod names a Go version")
	dataDirVar := map[string]string{coordinatorBin: "DATA_DIRECTORY", storageNodeBin: "STORAGE_DATA_DIRECTORY"}

	for binary, rel := range dockerfiles {
		t.Run(binary, func(t *testing.T) {
			df := parseDockerfile(t, rel)
			require.Equal(t, "golang:"+m[1]+" AS build", df.stages[0].from, "%s: the builder matches go.mod", rel)
			final := df.final()
			require.Regexp(t, `^(gcr\.io/distroless/static-debian\d+:nonroot|scratch)$`, final.from, rel)

			user := lastOf(t, final.all("USER"), rel+" USER")
			uid, gid, _ := strings.Cut(user, ":")
			n, err := strconv.Atoi(uid)
			require.NoError(t, err, "%s: USER must be numeric for Kubernetes' runAsNonRoot", rel)
			require.NotZero(t, n, "%s: not root", rel)
			_, err = strconv.Atoi(gid)
			require.NoError(t, err, "%s: numeric group", rel)

			env := final.env(t)
			vars := readVars(t, binary)
			for k := range env {
				require.True(t, vars[k], "%s sets %s, which %s does not read", rel, k, binary)
			}
			require.NoError(t, loadConfig(binary, env), "%s: the image's own environment", rel)
			require.Equal(t, []string{env["SERVER_PORT"]}, final.all("EXPOSE"), "%s exposes SERVER_PORT", rel)
			require.Equal(t, []string{`["` + env[dataDirVar[binary]] + `"]`}, final.all("VOLUME"),
				"%s: %s is the volume", rel, dataDirVar[binary])
			// The volume's mount point exists and belongs to the user, or a
			// fresh named volume would be root's and unwritable.
			var owned bool
			for _, c := range final.all("COPY") {
				if strings.Contains(c, "--chown="+user) && strings.HasSuffix(c, " "+env[dataDirVar[binary]]) {
					owned = true
				}
			}
			require.True(t, owned, "%s: COPY --chown=%s … %s", rel, user, env[dataDirVar[binary]])
		})
	}
}

// TestDockerHealthchecks runs each image's HEALTHCHECK command, with the
// built probe, against the daemon's real handler listening on the port the
// image's SERVER_PORT would name.
func TestDockerHealthchecks(t *testing.T) {
	for binary, rel := range dockerfiles {
		t.Run(binary, func(t *testing.T) {
			df := parseDockerfile(t, rel)
			hc := lastOf(t, df.final().all("HEALTHCHECK"), rel+" HEALTHCHECK")
			_, cmd, ok := strings.Cut(hc, "CMD ")
			require.True(t, ok, "%s: HEALTHCHECK … CMD", rel)
			argv := execForm(t, rel+" HEALTHCHECK", cmd)
			require.Equal(t, "/usr/local/bin/"+probeBin, argv[0], rel)

			srv := httptest.NewServer(handler(t, binary))
			t.Cleanup(srv.Close)
			u, err := url.Parse(srv.URL)
			require.NoError(t, err)
			env := df.final().env(t)
			env["SERVER_PORT"] = u.Port()
			code, out := runProbe(t, argv[1:], env)
			require.Equal(t, 0, code, "%s: the health check fails against %s: %s", rel, binary, out)
			require.Contains(t, out, "/health/ready: 200", "%s checks readiness", rel)
		})
	}
}

// TestDockerignore: nothing the images compile or embed is left out of the
// build context, and no local state or secret goes in.
func TestDockerignore(t *testing.T) {
	root := repoRoot(t)
	var patterns []string
	for _, line := range strings.Split(readRepoFile(t, ".dockerignore"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		require.False(t, strings.HasPrefix(line, "!") || strings.Contains(line, "**"),
			".dockerignore: %q is beyond this test's matcher; extend it", line)
		patterns = append(patterns, strings.Trim(line, "/"))
	}
	ignored := func(rel string) string {
		parts := strings.Split(filepath.ToSlash(rel), "/")
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			for _, p := range patterns {
				if ok, _ := path.Match(p, prefix); ok {
					return p
				}
			}
		}
		return ""
	}
	for _, rel := range []string{".git", "bin", "data", ".env"} {
		require.NotEmpty(t, ignored(rel), ".dockerignore leaves out %s", rel)
	}

	// Every file of every module package the images build, embedded files
	// included, must reach the build.
	var pkgs []string
	for _, rel := range dockerfiles {
		pkgs = append(pkgs, parseDockerfile(t, rel).stages[0].goBuilds(t)[0].packages...)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}{{end}}`}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	files := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		dir, err := filepath.Rel(root, fields[0])
		require.NoError(t, err)
		for _, f := range fields[1:] {
			files = append(files, filepath.Join(dir, f))
		}
	}
	require.Greater(t, len(files), 20, "the build reads the module's packages")
	for _, f := range files {
		_, err := os.Stat(filepath.Join(root, f))
		require.NoError(t, err)
		require.Empty(t, ignored(f), ".dockerignore leaves out %s, which the images build", f)
	}
}

// TestProbeHandlerFailure shows the health-check test can fail: a daemon
// that is not ready makes the probe exit non-zero.
func TestProbeHandlerFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	code, out := runProbe(t, []string{srv.URL + "/health/ready"}, nil)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, fmt.Sprint(http.StatusServiceUnavailable))
}
