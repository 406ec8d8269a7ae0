package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

func TestStatus(t *testing.T) {
	nodes := func(one, none [3]int, down int) []client.NodeRisk {
		var out []client.NodeRisk
		for i, id := range []string{"node-1", "node-2", "node-3"} {
			st := client.NodeHealthy
			if i == down {
				st = client.NodeUnhealthy
			}
			out = append(out, client.NodeRisk{NodeID: id, Status: st, FilesLeftWithOneCopy: one[i], FilesLeftWithNoCopy: none[i]})
		}
		return out
	}
	tests := []struct {
		name  string
		rep   client.DurabilityReport
		code  int
		lines []string
	}{
		{"safe", client.DurabilityReport{
			FilesByCopies: map[string]int{"0": 0, "1": 0, "2": 0, "3": 12}, Files: 12, FailureHeadroom: 2,
			ReplicationFactor: 3, HealthyNodes: 3, Nodes: nodes([3]int{}, [3]int{}, -1),
		}, exitOK, []string{
			`(?m)^files\s+12 readable, 3 copies wanted each$`,
			`(?m)^healthy copies\s+3: 12  2: 0  1: 0  0: 0$`,
			`(?m)^at risk\s+nothing: every file has all its copies$`,
			`(?m)^failure headroom\s+2 \(`,
			`(?m)^nodes\s+3 healthy of 3 known$`,
			`(?m)^node-2\s+HEALTHY\s+0\s+0$`,
		}},
		{"a node down", client.DurabilityReport{
			FilesByCopies: map[string]int{"0": 0, "1": 1, "2": 11, "3": 0}, Files: 12, BytesAtRisk: 3 << 20,
			FailureHeadroom: 0, ReplicationFactor: 3, HealthyNodes: 2,
			Nodes: nodes([3]int{11, 0, 11}, [3]int{1, 0, 0}, 1),
		}, exitFailed, []string{
			`(?m)^healthy copies\s+3: 0  2: 11  1: 1  0: 0$`,
			`(?m)^at risk\s+12 files below 3 copies, 3\.0 MiB$`,
			`(?m)^failure headroom\s+0 \(`,
			`(?m)^nodes\s+2 healthy of 3 known$`,
			`(?m)^NODE\s+STATUS\s+FILES LEFT WITH 1 COPY\s+FILES LEFT WITH NONE$`,
			`(?m)^node-1\s+HEALTHY\s+11\s+1$`,
			`(?m)^node-2\s+UNHEALTHY\s+0\s+0$`,
		}},
		{"a file lost", client.DurabilityReport{
			FilesByCopies: map[string]int{"0": 2, "1": 0, "2": 0, "3": 0}, Files: 2, BytesAtRisk: 10,
			ReplicationFactor: 3, Nodes: nodes([3]int{}, [3]int{}, -1),
		}, exitFailed, []string{
			`(?m)^unreadable\s+2 files have no healthy copy$`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCoordinator(t)
			f.durability = tt.rep
			code, stdout, stderr := dfs(t, f.srv.URL, "", "status")
			require.Equal(t, tt.code, code, stderr)
			for _, l := range tt.lines {
				require.Regexp(t, l, stdout)
			}

			code, stdout, _ = dfs(t, f.srv.URL, "", "status", "-json")
			require.Equal(t, tt.code, code, "-json keeps the exit status")
			var got client.DurabilityReport
			require.NoError(t, json.Unmarshal([]byte(stdout), &got))
			require.Equal(t, tt.rep, got)
		})
	}
}

func TestStatusReportsAnErrorAnswer(t *testing.T) {
	f := newFakeCoordinator(t)
	f.fail["GET /api/cluster/durability"] = fakeAnswer{http.StatusServiceUnavailable, string(errs.CodeMetadataUnavailable), "metadata store down"}
	code, stdout, stderr := dfs(t, f.srv.URL, "", "status")
	require.Equal(t, exitFailed, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "metadata store down")
}
