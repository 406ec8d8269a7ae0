package deploytest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/dfs-project/dfs/internal/testenv"
)

// composeTool is one Compose command line: its program and the arguments
// before Compose's own.
type composeTool struct {
	name string
	argv []string
}

// composeTools finds the Compose implementations on this machine:
// docker-compose, which CI installs (Debian's 1.29, v1, on bookworm), and the
// v2 plugin behind `docker compose` where Docker has it. Without
// docker-compose the test skips locally and fails under CI.
func composeTools(t *testing.T) []composeTool {
	t.Helper()
	var tools []composeTool
	if p, err := exec.LookPath("docker-compose"); err == nil {
		tools = append(tools, composeTool{"docker-compose", []string{p}})
	} else if testenv.InCI() {
		t.Fatal("docker-compose is not installed: CI must validate docker-compose.yml with it (.ci/run installs Debian's docker-compose)")
	}
	if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "compose", "version").Run() == nil {
		tools = append(tools, composeTool{"docker compose", []string{p, "compose"}})
	}
	if len(tools) == 0 {
		t.Skip("skipping: docker-compose is not installed (apt-get install -y --no-install-recommends docker-compose)")
	}
	return tools
}

// publishedPort is one entry of a service's ports in `config`'s output.
type publishedPort struct{ hostIP, published, target string }

// shortPort is v1's output for a port with a host IP.
var shortPort = regexp.MustCompile(`^(?:([0-9.]+):)?([0-9]+):([0-9]+)(?:/tcp)?$`)

// configPorts reads a service's ports from `config`'s output, which writes
// them in the long syntax, except that 1.29 writes one with a host IP in the
// short one.
func configPorts(t *testing.T, ports []any) []publishedPort {
	t.Helper()
	var out []publishedPort
	for _, p := range ports {
		switch p := p.(type) {
		case string:
			m := shortPort.FindStringSubmatch(p)
			require.NotNil(t, m, "port %q", p)
			out = append(out, publishedPort{m[1], m[2], m[3]})
		case map[string]any:
			str := func(k string) string {
				if v, ok := p[k]; ok {
					return fmt.Sprint(v)
				}
				return ""
			}
			out = append(out, publishedPort{str("host_ip"), str("published"), str("target")})
		default:
			t.Fatalf("port %v of type %T", p, p)
		}
	}
	return out
}

// runComposeConfig runs `config` in the repository with exactly the given
// .env contents and no other Compose variable from this process, and returns
// its output, parsed.
func runComposeConfig(t *testing.T, tool composeTool, dotenv string, args ...string) (name string, ports map[string][]publishedPort) {
	t.Helper()
	envFile := filepath.Join(t.TempDir(), "env")
	require.NoError(t, os.WriteFile(envFile, []byte(dotenv), 0o600))
	argv := append(append(append([]string{}, tool.argv[1:]...), "--env-file", envFile), args...)
	cmd := exec.Command(tool.argv[0], append(argv, "config")...)
	cmd.Dir = repoRoot(t)
	// Only what finds the program and its configuration: a POSTGRES_PORT or
	// COMPOSE_FILE of the caller's would override the file under test.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s %s config:\n%s", tool.name, strings.Join(args, " "), stderr.String())

	var out struct {
		Name     string `yaml:"name"`
		Services map[string]struct {
			Ports []any `yaml:"ports"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(stdout.Bytes(), &out), "%s config's output", tool.name)
	ports = map[string][]publishedPort{}
	for svc, s := range out.Services {
		ports[svc] = configPorts(t, s.Ports)
	}
	return out.Name, ports
}

// TestComposeConfig has each Compose implementation on the machine validate
// and resolve the files, as a user's `up` would first, and checks what it
// made of them: with .env.example as .env, with no .env at all, and with the
// database ports switched on through .env.example's COMPOSE_FILE line.
func TestComposeConfig(t *testing.T) {
	example := readRepoFile(t, ".env.example")
	withDBPorts := regexp.MustCompile(`(?m)^# (COMPOSE_FILE=)`).ReplaceAllString(example, "$1")
	require.NotEqual(t, example, withDBPorts, ".env.example has a commented COMPOSE_FILE line")
	dotenv := loadEnvExample(t).values

	for _, tool := range composeTools(t) {
		t.Run(tool.name, func(t *testing.T) {
			for _, tc := range []struct {
				what, dotenv string
				args         []string
				dbPorts      bool
			}{
				{what: ".env.example", dotenv: example, args: []string{"-f", "docker-compose.yml"}},
				{what: "no .env", dotenv: "", args: []string{"-f", "docker-compose.yml"}},
				{what: "COMPOSE_FILE from .env.example", dotenv: withDBPorts, dbPorts: true},
			} {
				name, ports := runComposeConfig(t, tool, tc.dotenv, tc.args...)
				// v2 prints the project's name; v1's config has none to print.
				if name != "" && tc.dotenv != "" {
					require.Equal(t, dotenv["COMPOSE_PROJECT_NAME"], name, "%s: the project's name", tc.what)
				}
				require.Equal(t, []publishedPort{{"", dotenv["COORDINATOR_PORT"], "8080"}, {"", dotenv["COORDINATOR_S3_PORT"], "9000"}},
					ports["coordinator"], tc.what)
				require.Equal(t, []publishedPort{{"", dotenv["STORAGE_NODE_1_PORT"], "8080"}}, ports["storage-node-1"], tc.what)
				for db, port := range map[string]string{"postgres": "5432", "redis": "6379"} {
					if !tc.dbPorts {
						require.Empty(t, ports[db], "%s: %s publishes nothing", tc.what, db)
						continue
					}
					want := dotenv[strings.ToUpper(db)+"_PORT"]
					require.Equal(t, []publishedPort{{"127.0.0.1", want, port}}, ports[db], "%s: %s on loopback only", tc.what, db)
				}
			}
		})
	}
}
