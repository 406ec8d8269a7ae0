package deploytest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// envExample is .env.example read the way Compose and a reader read it.
type envExample struct {
	// values are the uncommented settings: what Compose interpolates after
	// `cp .env.example .env`.
	values map[string]string
	// entries are every NAME=… line, commented or not, by name.
	entries map[string][]envEntry
}

type envEntry struct {
	section   string // the "# ---- Section ----" heading above it
	value     string // up to the first blank
	commented bool
}

// The sections whose commented values are the binaries' defaults, and which
// docker-compose.yml passes through to the daemons.
var tunableSections = map[string][]string{
	"Both services":         {coordinatorBin, storageNodeBin},
	"Coordinator tunables":  {coordinatorBin},
	"Storage node tunables": {storageNodeBin},
}

func loadEnvExample(t *testing.T) envExample {
	t.Helper()
	e := envExample{values: map[string]string{}, entries: map[string][]envEntry{}}
	heading := regexp.MustCompile(`^# -+ (.+?) -+$`)
	setting := regexp.MustCompile(`^(#\s*)?([A-Z][A-Z0-9_]*)=(\S*)`)
	section := ""
	for _, line := range strings.Split(readRepoFile(t, ".env.example"), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			section = m[1]
			continue
		}
		m := setting.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		entry := envEntry{section: section, value: m[3], commented: m[1] != ""}
		e.entries[m[2]] = append(e.entries[m[2]], entry)
		if !entry.commented {
			require.NotContains(t, e.values, m[2], ".env.example sets %s twice", m[2])
			e.values[m[2]] = m[3]
		}
	}
	require.NotEmpty(t, e.entries)
	return e
}

// composeOwnVariables are the variables Compose itself reads from .env,
// rather than interpolating them into a file.
var composeOwnVariables = map[string]bool{"COMPOSE_PROJECT_NAME": true, "COMPOSE_FILE": true}

// composeVariables returns every variable docker-compose.yml and its
// database-ports override interpolate, and, per daemon, those passed straight
// through as NAME: ${NAME:-}.
func composeVariables(t *testing.T) (named map[string]bool, passed map[string]map[string]bool) {
	t.Helper()
	named = map[string]bool{}
	passed = map[string]map[string]bool{coordinatorBin: {}, storageNodeBin: {}}
	for _, file := range []string{"docker-compose.yml", dbPortsFile} {
		for _, svc := range loadComposeFile(t, file).Services {
			binary := daemonOf(t, svc)
			for k, v := range svc.Environment {
				interpolate(t, v, nil, named)
				if binary != "" && v == "${"+k+":-}" {
					passed[binary][k] = true
				}
			}
			for _, p := range svc.Ports {
				interpolate(t, p, nil, named)
			}
		}
	}
	return named, passed
}

// TestEnvExampleListsEveryVariable: every variable either daemon reads is in
// .env.example, and every name there is read by a daemon or used by Compose,
// in a file or as one of its own settings.
func TestEnvExampleListsEveryVariable(t *testing.T) {
	e := loadEnvExample(t)
	named, _ := composeVariables(t)
	read := map[string]bool{}
	for _, binary := range []string{coordinatorBin, storageNodeBin} {
		for name := range readVars(t, binary) {
			read[name] = true
			require.Contains(t, e.entries, name, ".env.example lists %s, which %s reads", name, binary)
		}
	}
	for name := range named {
		require.Contains(t, e.entries, name, ".env.example lists %s, which docker-compose.yml interpolates", name)
		if !read[name] {
			require.Contains(t, e.values, name, ".env.example sets %s, a Compose-only setting", name)
		}
	}
	for _, name := range sortedKeys(e.entries) {
		require.True(t, read[name] || named[name] || composeOwnVariables[name], ".env.example lists %s, which no binary reads and Compose does not use", name)
	}
}

// TestEnvExampleTunables: a tunable's commented value is its daemon's real
// default (loading it changes nothing), and Compose hands it to every daemon
// that reads it, so that setting it in .env has an effect.
func TestEnvExampleTunables(t *testing.T) {
	e := loadEnvExample(t)
	_, passed := composeVariables(t)
	listed := map[string]map[string]bool{coordinatorBin: {}, storageNodeBin: {}}
	for _, name := range sortedKeys(e.entries) {
		for _, entry := range e.entries[name] {
			binaries, ok := tunableSections[entry.section]
			if !ok {
				continue
			}
			require.True(t, entry.commented, "%s: a tunable is commented out, so that its default applies", name)
			for _, binary := range binaries {
				require.True(t, readVars(t, binary)[name], "%s is under %q but %s does not read it", name, entry.section, binary)
				listed[binary][name] = true
				require.Equal(t, configOf(t, binary, nil), configOf(t, binary, map[string]string{name: entry.value}),
					".env.example shows %s=%s, which is not %s's default", name, entry.value, binary)
			}
		}
	}
	for binary := range listed {
		require.Equal(t, sortedKeys(listed[binary]), sortedKeys(passed[binary]),
			"docker-compose.yml passes to %s exactly the tunables .env.example lists for it", binary)
	}
}
