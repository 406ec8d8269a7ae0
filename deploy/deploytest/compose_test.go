package deploytest

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The override that publishes the bundled PostgreSQL and Redis to the host.
const dbPortsFile = "docker-compose.db-ports.yml"

// composeFile is the part of the Compose specification docker-compose.yml uses.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image         string            `yaml:"image"`
	ContainerName string            `yaml:"container_name"`
	Profiles      []string          `yaml:"profiles"`
	Environment   map[string]string `yaml:"environment"`
	Ports         []string          `yaml:"ports"`
	Volumes       []string          `yaml:"volumes"`
	Build         *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Networks map[string]struct {
		Aliases []string `yaml:"aliases"`
	} `yaml:"networks"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	return loadComposeFile(t, "docker-compose.yml")
}

func loadComposeFile(t *testing.T, rel string) composeFile {
	t.Helper()
	var c composeFile
	require.NoError(t, yaml.Unmarshal([]byte(readRepoFile(t, rel)), &c), "%s parses", rel)
	require.NotEmpty(t, c.Services, rel)
	return c
}

// topLevelKeys are a Compose file's top-level keys, x- extensions left out.
func topLevelKeys(t *testing.T, rel string) []string {
	t.Helper()
	var top map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(readRepoFile(t, rel)), &top), "%s parses", rel)
	var keys []string
	for _, k := range sortedKeys(top) {
		if !strings.HasPrefix(k, "x-") {
			keys = append(keys, k)
		}
	}
	return keys
}

// interpolate expands Compose's ${VAR}, ${VAR:-default}, ${VAR-default} and
// $VAR from env, and $$ to $, recording every variable named. Other forms
// fail the test: they are beyond this expander, not wrong.
func interpolate(t *testing.T, s string, env map[string]string, named map[string]bool) string {
	t.Helper()
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			out.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		switch {
		case strings.HasPrefix(rest, "$"):
			out.WriteByte('$')
			i++
		case strings.HasPrefix(rest, "{"):
			end := strings.IndexByte(rest, '}')
			require.Positive(t, end, "unclosed ${ in %q", s)
			expr := rest[1:end]
			// ${VAR:-def} defaults when VAR is unset or empty, ${VAR-def}
			// only when it is unset.
			name, def, hasDef, colon := expr, "", false, false
			if j := strings.IndexAny(expr, ":-?+"); j >= 0 {
				name = expr[:j]
				op := expr[j:]
				switch {
				case strings.HasPrefix(op, ":-"):
					def, hasDef, colon = op[2:], true, true
				case strings.HasPrefix(op, "-"):
					def, hasDef = op[1:], true
				default:
					t.Fatalf("${%s}: only ${VAR}, ${VAR:-default} and ${VAR-default} are understood here", expr)
				}
			}
			named[name] = true
			v, ok := env[name]
			if hasDef && (!ok || (colon && v == "")) {
				v = def
			}
			out.WriteString(v)
			i += end + 1
		default:
			m := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`).FindString(rest)
			require.NotEmpty(t, m, "a lone $ in %q", s)
			named[m] = true
			out.WriteString(env[m])
			i += len(m)
		}
	}
	return out.String()
}

// daemonOf names the daemon a compose service runs, from its Dockerfile, or
// "" for a service that is not ours.
func daemonOf(t *testing.T, svc composeService) string {
	t.Helper()
	if svc.Build == nil {
		return ""
	}
	for binary, rel := range dockerfiles {
		if path.Clean(svc.Build.Dockerfile) == rel {
			require.Equal(t, ".", svc.Build.Context, "the Dockerfiles build from the repository root")
			return binary
		}
	}
	t.Fatalf("build with unknown Dockerfile %s", svc.Build.Dockerfile)
	return ""
}

// composeEnv returns a dfs service's environment as its container sees it
// after `cp .env.example .env`: the image's ENV, overridden by the service's
// interpolated environment.
func composeEnv(t *testing.T, binary string, svc composeService, dotenv map[string]string) map[string]string {
	t.Helper()
	env := parseDockerfile(t, dockerfiles[binary]).final().env(t)
	for k, v := range svc.Environment {
		env[k] = interpolate(t, v, dotenv, map[string]bool{})
	}
	return env
}

// TestComposeServices: the topology the README and the demo rely on.
func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	want := []string{"coordinator", "coordinator-2", "coordinator-3", "haproxy", "postgres", "redis",
		"storage-node-1", "storage-node-2", "storage-node-3", "storage-node-4"}
	require.Equal(t, want, sortedKeys(c.Services))
	require.Empty(t, c.Services["coordinator"].Profiles, "the first coordinator starts by default")
	for _, name := range []string{"coordinator-2", "coordinator-3"} {
		require.Equal(t, []string{"ha"}, c.Services[name].Profiles, "%s starts with --profile ha", name)
		require.Equal(t, coordinatorBin, daemonOf(t, c.Services[name]), name)
		require.Equal(t, c.Services["coordinator"].Environment, c.Services[name].Environment,
			"%s runs as the first coordinator does, over the same store", name)
	}

	require.Equal(t, "postgres:16-alpine", c.Services["postgres"].Image)
	require.Equal(t, "redis:7-alpine", c.Services["redis"].Image)
	require.Contains(t, strings.Join(c.Services["postgres"].Healthcheck.Test, " "), "pg_isready")
	require.Equal(t, []string{"CMD", "redis-cli", "ping"}, c.Services["redis"].Healthcheck.Test)
	require.Equal(t, "service_healthy", c.Services["coordinator"].DependsOn["postgres"].Condition)
	require.Equal(t, coordinatorBin, daemonOf(t, c.Services["coordinator"]))
	for _, db := range []string{"postgres", "redis"} {
		require.Empty(t, c.Services[db].Ports, "%s stays on the internal network unless %s is added", db, dbPortsFile)
	}

	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("storage-node-%d", i)
		svc := c.Services[name]
		require.Equal(t, storageNodeBin, daemonOf(t, svc), name)
		require.Equal(t, fmt.Sprintf("dfs-node-%d", i), svc.ContainerName, name)
		if i == 4 {
			require.Equal(t, []string{"scale"}, svc.Profiles, "storage-node-4 joins with --profile scale")
		} else {
			require.Empty(t, svc.Profiles, "%s starts by default", name)
		}
	}
	// A health condition needs a health check to wait for.
	for name, svc := range c.Services {
		for dep, d := range svc.DependsOn {
			require.Contains(t, c.Services, dep, "%s depends on %s", name, dep)
			if d.Condition == "service_healthy" {
				require.NotNil(t, c.Services[dep].Healthcheck, "%s waits for %s to be healthy", name, dep)
			}
		}
	}
}

// TestComposeBothGenerations: nothing in the Compose files that docker-compose
// 1.29 (v1) rejects or the v2 plugin warns about — no top-level name, which v1
// refuses, and no version, which v2 calls obsolete — and the project name
// that the file cannot carry comes from .env, which both read.
func TestComposeBothGenerations(t *testing.T) {
	require.Equal(t, []string{"services", "volumes"}, topLevelKeys(t, "docker-compose.yml"))
	require.Equal(t, []string{"services"}, topLevelKeys(t, dbPortsFile))
	e := loadEnvExample(t)
	require.Equal(t, "dfs", e.values["COMPOSE_PROJECT_NAME"], ".env.example names the project, as the file cannot")
	for _, svc := range loadCompose(t).Services {
		require.NotEmpty(t, svc.ContainerName, "the containers' names do not depend on the project's")
	}
}

// TestComposeDBPorts: the override publishes exactly the two databases, on
// loopback only, on host ports from .env that no other service takes, and
// .env.example's commented COMPOSE_FILE line turns it on.
func TestComposeDBPorts(t *testing.T) {
	base := loadCompose(t)
	dotenv := loadEnvExample(t).values
	taken := map[string]string{}
	for name, svc := range base.Services {
		for _, p := range svc.Ports {
			host, _, _ := strings.Cut(interpolate(t, p, dotenv, map[string]bool{}), ":")
			taken[host] = name
		}
	}
	coord := composeEnv(t, coordinatorBin, base.Services["coordinator"], dotenv)
	servicePort := map[string]string{}
	for key, svc := range map[string]string{"DATABASE_URL": "postgres", "REDIS_URL": "redis"} {
		u, err := url.Parse(coord[key])
		require.NoError(t, err, key)
		servicePort[svc] = u.Port()
	}

	var raw struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(readRepoFile(t, dbPortsFile)), &raw))
	require.Equal(t, []string{"postgres", "redis"}, sortedKeys(raw.Services))
	override := loadComposeFile(t, dbPortsFile)
	for name, svc := range override.Services {
		require.Equal(t, []string{"ports"}, sortedKeys(raw.Services[name]), "%s: the override adds ports and nothing else", name)
		require.Len(t, svc.Ports, 1, name)
		p := svc.Ports[0]
		named := map[string]bool{}
		parts := strings.Split(interpolate(t, p, dotenv, named), ":")
		require.Len(t, parts, 3, "%s publishes IP:HOST:CONTAINER, got %q", name, p)
		require.Equal(t, "127.0.0.1", parts[0], "%s: loopback only, the development password must not reach the network", name)
		require.Len(t, named, 1, "%s: the host port %q comes from .env", name, p)
		require.Equal(t, parts[1], strings.Split(interpolate(t, p, nil, map[string]bool{}), ":")[1], "%s: the default in %q", name, p)
		require.Equal(t, servicePort[name], parts[2], "%s publishes the port the coordinator uses", name)
		require.NotContains(t, taken, parts[1], "%s and %s publish host port %s", name, taken[parts[1]], parts[1])
		taken[parts[1]] = name
	}

	var composeFiles []string
	for _, entry := range loadEnvExample(t).entries["COMPOSE_FILE"] {
		require.True(t, entry.commented, "publishing the databases is a choice, off by default")
		composeFiles = append(composeFiles, entry.value)
	}
	require.Equal(t, []string{"docker-compose.yml:" + dbPortsFile}, composeFiles)
}

// TestComposeEnvironment: every variable set on a dfs container is one its
// daemon reads, with a value its daemon accepts, and every address names a
// compose service, never localhost.
func TestComposeEnvironment(t *testing.T) {
	c := loadCompose(t)
	dotenv := loadEnvExample(t).values
	for name, svc := range c.Services {
		binary := daemonOf(t, svc)
		if binary == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			vars := readVars(t, binary)
			for _, k := range sortedKeys(svc.Environment) {
				require.True(t, vars[k], "%s sets %s, which %s does not read", name, k, binary)
			}
			env := composeEnv(t, binary, svc, dotenv)
			require.NoError(t, loadConfig(binary, env), "%s's environment after cp .env.example .env", name)

			serviceURL := func(key string) *url.URL {
				u, err := url.Parse(env[key])
				require.NoError(t, err, "%s %s", name, key)
				require.Contains(t, c.Services, u.Hostname(), "%s %s=%s names a compose service", name, key, env[key])
				return u
			}
			switch binary {
			case coordinatorBin:
				require.Equal(t, "5432", serviceURL("DATABASE_URL").Port())
				require.Equal(t, "postgres", serviceURL("DATABASE_URL").Hostname())
				require.Equal(t, "redis", serviceURL("REDIS_URL").Hostname())
			case storageNodeBin:
				u := serviceURL("COORDINATOR_URL")
				require.Equal(t, composeEnv(t, coordinatorBin, c.Services[u.Hostname()], dotenv)["SERVER_PORT"], u.Port(),
					"%s reaches the coordinator on its SERVER_PORT", name)
				require.Equal(t, name, env["STORAGE_ADVERTISED_HOST"], "%s advertises its service name", name)
				require.Equal(t, env["SERVER_PORT"], env["STORAGE_ADVERTISED_PORT"], name)
			}
		})
	}
	// Node ids are distinct: two nodes under one id would be one node.
	ids := map[string]string{}
	for name, svc := range c.Services {
		if daemonOf(t, svc) == storageNodeBin {
			id := svc.Environment["STORAGE_NODE_ID"]
			require.NotContains(t, ids, id, "%s and %s share STORAGE_NODE_ID", name, ids[id])
			ids[id] = name
		}
	}
}

// TestComposePortsVolumesHealth: published ports map to SERVER_PORT and
// default to .env.example's values, each daemon keeps its data on a named
// volume of its own, and every health check probes a route its daemon serves
// on its port.
func TestComposePortsVolumesHealth(t *testing.T) {
	c := loadCompose(t)
	dotenv := loadEnvExample(t).values
	hostPorts := map[string]string{}
	volumes := map[string]string{}
	for name, svc := range c.Services {
		for _, p := range svc.Ports {
			named := map[string]bool{}
			host, container, ok := strings.Cut(interpolate(t, p, dotenv, named), ":")
			require.True(t, ok, "%s publishes HOST:CONTAINER, got %q", name, p)
			require.NotContains(t, hostPorts, host, "%s and %s publish host port %s", name, hostPorts[host], host)
			hostPorts[host] = name
			require.Len(t, named, 1, "%s: the host port %q comes from .env", name, p)
			// The port with no .env at all is the one .env.example shows.
			require.Equal(t, host, strings.Split(interpolate(t, p, nil, map[string]bool{}), ":")[0], "%s: the default in %q", name, p)
			if binary := daemonOf(t, svc); binary != "" {
				env := composeEnv(t, binary, svc, dotenv)
				require.Contains(t, []string{env["SERVER_PORT"], env["S3_PORT"]}, container, "%s publishes its SERVER_PORT or S3_PORT", name)
			}
		}
		binary := daemonOf(t, svc)
		if binary == "" {
			continue
		}
		env := composeEnv(t, binary, svc, dotenv)
		// Each daemon publishes its HTTP port, the coordinator its S3 port
		// too; the coordinators of the "ha" profile are reached through
		// HAProxy and publish none.
		if slices.Contains(svc.Profiles, "ha") {
			require.Empty(t, svc.Ports, name)
		} else {
			require.Len(t, svc.Ports, map[bool]int{true: 2, false: 1}[env["S3_PORT"] != ""], name)
		}
		dataDir := env[map[string]string{coordinatorBin: "DATA_DIRECTORY", storageNodeBin: "STORAGE_DATA_DIRECTORY"}[binary]]
		var mounted bool
		for _, v := range svc.Volumes {
			vol, target, _ := strings.Cut(v, ":")
			if target == dataDir {
				mounted = true
				require.Contains(t, c.Volumes, vol, "%s: volume %s is declared", name, vol)
				require.NotContains(t, volumes, vol, "%s and %s share volume %s", name, volumes[vol], vol)
				volumes[vol] = name
			}
		}
		require.True(t, mounted, "%s keeps %s on a named volume", name, dataDir)

		require.NotNil(t, svc.Healthcheck, "%s has a health check", name)
		test := svc.Healthcheck.Test
		require.Equal(t, []string{"CMD", "/usr/local/bin/" + probeBin}, test[:2], "%s: exec form with the probe; the image has no shell", name)
		u, err := url.Parse(test[len(test)-1])
		require.NoError(t, err)
		require.Contains(t, []string{"127.0.0.1", "localhost"}, u.Hostname(), "%s checks itself", name)
		require.Equal(t, env["SERVER_PORT"], u.Port(), "%s: the check's port is SERVER_PORT", name)
		require.Equal(t, "/health/ready", u.Path, "%s: readiness (for the coordinator: the process and the store, not Redis)", name)
		requireRoute(t, binary, "GET", u.Path, "docker-compose.yml "+name)
	}
	require.Equal(t, sortedKeys(c.Volumes), sortedKeys(addAll(volumes, "postgres-data")), "every declared volume is used")
}

func addAll(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		out[k] = ""
	}
	return out
}

// TestInterpolate pins the expander the compose tests rely on.
func TestInterpolate(t *testing.T) {
	env := map[string]string{"A": "a", "EMPTY": ""}
	tests := []struct{ in, want string }{
		{"${A}", "a"},
		{"$A/x", "a/x"},
		{"${B:-def}", "def"},
		{"${EMPTY:-def}", "def"},
		{"${EMPTY-def}", ""},
		{"${B-def}", "def"},
		{"${A:-def}", "a"},
		{"$${A}", "${A}"},
		{"${B:-}", ""},
	}
	for _, tt := range tests {
		named := map[string]bool{}
		require.Equal(t, tt.want, interpolate(t, tt.in, env, named), tt.in)
		require.Len(t, named, strings.Count(tt.in, "$")-2*strings.Count(tt.in, "$$"), tt.in)
	}
}

// TestComposeHAProfile: the "ha" profile's HAProxy runs the committed
// deploy/haproxy/haproxy.cfg (which internal/haproxy keeps equal to what it
// renders and has haproxy check), every server it names is a coordinator of
// this file on that coordinator's REST or S3 port, every coordinator is one
// of its servers, and it publishes the two ports its frontends bind.
func TestComposeHAProfile(t *testing.T) {
	c := loadCompose(t)
	dotenv := loadEnvExample(t).values
	hap := c.Services["haproxy"]
	require.Equal(t, []string{"ha"}, hap.Profiles)
	require.Regexp(t, `^haproxy:2\.\d+`, hap.Image)
	require.Equal(t, []string{"./deploy/haproxy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"}, hap.Volumes)

	// A coordinator answers to its service name and its aliases.
	coordinators := map[string]string{}
	for name, svc := range c.Services {
		if daemonOf(t, svc) != coordinatorBin {
			continue
		}
		coordinators[name] = name
		for _, n := range svc.Networks {
			for _, a := range n.Aliases {
				coordinators[a] = name
			}
		}
		require.Contains(t, hap.DependsOn, name, "haproxy starts after %s, whose name it resolves", name)
	}

	cfg := readRepoFile(t, "deploy/haproxy/haproxy.cfg")
	served := map[string]bool{}
	binds := map[string]bool{}
	backend := ""
	for _, line := range strings.Split(cfg, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "backend":
			backend = f[1]
		case len(f) >= 2 && f[0] == "bind":
			_, port, ok := strings.Cut(f[1], ":")
			require.True(t, ok, "bind %q", f[1])
			binds[port] = true
		case len(f) >= 3 && f[0] == "server":
			host, port, ok := strings.Cut(f[2], ":")
			require.True(t, ok, "server %q", line)
			svc, ok := coordinators[host]
			require.True(t, ok, "haproxy.cfg's server %s is no coordinator of docker-compose.yml", host)
			env := composeEnv(t, coordinatorBin, c.Services[svc], dotenv)
			want := map[string]string{"rest_coordinators": env["SERVER_PORT"], "s3_coordinators": env["S3_PORT"]}[backend]
			require.Equal(t, want, port, "%s: %s's port in backend %s", line, svc, backend)
			served[svc] = true
		}
	}
	require.Len(t, served, 3)
	for _, svc := range coordinators {
		require.True(t, served[svc], "%s gets no traffic from haproxy", svc)
	}
	require.Len(t, hap.Ports, 2)
	for _, p := range hap.Ports {
		_, container, _ := strings.Cut(interpolate(t, p, dotenv, map[string]bool{}), ":")
		require.True(t, binds[container], "haproxy publishes %s, which no frontend binds", container)
	}
}
