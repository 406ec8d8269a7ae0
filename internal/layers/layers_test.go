package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/dfs-project/dfs/"

// A rule says that no package matched by from may depend, directly or
// through others, on a package matched by to. Patterns are module-relative
// paths; a pattern ending in "/..." matches the path and everything below
// it. Test files do not count: test harnesses may reach across layers.
type rule struct {
	name     string
	from, to []string
	// except lists from-packages the rule does not apply to.
	except []string
}

// coordinatorSide is every package that knows the cluster: placement,
// metadata, the front ends and the background passes.
var coordinatorSide = []string{
	"internal/coordinator/...", "internal/files/...", "internal/meta/...", "internal/api/...", "internal/apiwire/...",
	"internal/s3/...", "internal/objects/...", "internal/auth/...", "internal/rebalance/...", "internal/reconcile/...",
	"internal/antientropy/...", "internal/membership/...", "internal/nodeclient/...", "internal/client/...",
	"internal/metrics/...", "internal/redisx/...", "internal/lease/...", "internal/ring/...", "internal/ops/...",
}

var rules = []rule{
	{name: "the storage node and its store know nothing of the cluster",
		from: []string{"internal/storagenode/...", "internal/blob/...", "internal/scrub/..."}, to: coordinatorSide},
	{name: "the blob store sits below the node, its wire format and its client",
		from: []string{"internal/blob/..."}, to: []string{"internal/storagenode/...", "internal/nodeclient/...", "internal/scrub/..."}},
	{name: "only cmd/ imports the coordinator daemon",
		from: []string{"..."}, to: []string{"internal/coordinator/..."}, except: []string{"cmd/...", "internal/coordinator/..."}},
	{name: "only cmd/ imports the storage node daemon",
		from: []string{"..."}, to: []string{"internal/storagenode"}, except: []string{"cmd/...", "internal/storagenode/..."}},
	{name: "the node's wire format is a leaf",
		from: []string{"internal/storagenode/wire"}, to: []string{"..."}},
	{name: "the ring knows nothing but strings and hashes",
		from: []string{"internal/ring"}, to: []string{"..."}},
	{name: "neither front end imports the other",
		from: []string{"internal/api/..."}, to: []string{"internal/s3/..."}},
	{name: "neither front end imports the other",
		from: []string{"internal/s3/..."}, to: []string{"internal/api/..."}},
	{name: "the client library knows nothing of the servers",
		from: []string{"internal/client/..."},
		to: []string{"internal/coordinator/...", "internal/files/...", "internal/meta/...", "internal/api", "internal/s3/...",
			"internal/storagenode/...", "internal/nodeclient/...", "internal/blob/..."}},
}

// known are the dependencies that break a rule today, each with why it is
// left as it is. The test fails when one of them is gone too, so that the
// list only shrinks.
var known = map[string]string{
	"internal/client -> internal/storagenode/wire": "the cluster's scrub report embeds the node's wire.ScrubProgress; it goes when the wire formats become leaf packages of their own",
}

// match reports whether the module-relative path p matches pattern.
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// violations lists "from -> to" for every dependency in deps (package to
// its dependencies, module-relative; other modules and the standard library
// left out) that breaks a rule, with the name of the first rule it breaks.
func violations(deps map[string][]string) map[string]string {
	out := map[string]string{}
	for from, ds := range deps {
		for _, r := range rules {
			if !matchAny(r.from, from) || matchAny(r.except, from) {
				continue
			}
			for _, to := range ds {
				if _, seen := out[from+" -> "+to]; !seen && to != from && matchAny(r.to, to) {
					out[from+" -> "+to] = r.name
				}
			}
		}
	}
	return out
}

// graph is the module's packages and their dependencies, as go list sees
// them without test files.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	_, err := exec.LookPath("go")
	require.NoError(t, err, "the layer check needs the go command")
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Deps,Error", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	deps := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Deps       []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		require.Nil(t, p.Error, "go list %s", p.ImportPath)
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		deps[from] = []string{}
		for _, d := range p.Deps {
			if rel, ok := strings.CutPrefix(d, module); ok {
				deps[from] = append(deps[from], rel)
			}
		}
	}
	require.Contains(t, deps, "internal/ring", "go list did not list the module")
	return deps
}

func TestNoImportRunsBackUpTheLayers(t *testing.T) {
	got := violations(graph(t))
	var report []string
	for v, name := range got {
		if _, ok := known[v]; !ok {
			report = append(report, fmt.Sprintf("%s: %s", v, name))
		}
	}
	for v := range known {
		if _, ok := got[v]; !ok {
			report = append(report, fmt.Sprintf("%s is listed in known but no longer happens: take it off the list", v))
		}
	}
	slices.Sort(report)
	require.Empty(t, report, "imports against the layer rules (ARCHITECTURE.md's package table):\n%s", strings.Join(report, "\n"))
}

// TestRulesCatchAnUpwardImport holds the checker itself to the cases the
// rules are for, on a made-up graph.
func TestRulesCatchAnUpwardImport(t *testing.T) {
	got := violations(map[string][]string{
		"internal/blob":                 {"internal/errs", "internal/nodeclient", "internal/storagenode/wire"},
		"internal/storagenode":          {"internal/blob", "internal/storagenode/wire", "internal/meta"},
		"internal/storagenode/nodetest": {"internal/storagenode"},
		"internal/files":                {"internal/coordinator", "internal/ring"},
		"cmd/coordinator":               {"internal/coordinator"},
		"internal/ring":                 {},
		"internal/api":                  {"internal/s3/xml"},
	})
	require.Equal(t, map[string]string{
		"internal/blob -> internal/nodeclient":       "the storage node and its store know nothing of the cluster",
		"internal/blob -> internal/storagenode/wire": "the blob store sits below the node, its wire format and its client",
		"internal/storagenode -> internal/meta":      "the storage node and its store know nothing of the cluster",
		"internal/files -> internal/coordinator":     "only cmd/ imports the coordinator daemon",
		"internal/api -> internal/s3/xml":            "neither front end imports the other",
	}, got)
}
