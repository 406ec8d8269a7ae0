package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

func TestStatus(t *testing.T) {
	nodes := func(one, none [3]int, down int) []client.NodeRisk {
		var out []client.NodeRisk
		for i, id := range []string{"node-1", "node-2", "node-3"} {
			st := client.NodeHealthy
			if i == down {
				st = client.NodeUnhealthy
			}
			out = append(out, client.NodeRisk{NodeID: id, Status: string(st), FilesLeftWithOneCopy: one[i], FilesLeftWithNoCopy: none[i]})
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
		{"zones", client.DurabilityReport{
			FilesByCopies: map[string]int{"0": 0, "1": 0, "2": 0, "3": 12}, Files: 12, FailureHeadroom: 2,
			ReplicationFactor: 3, HealthyNodes: 3, Nodes: nodes([3]int{}, [3]int{}, -1),
			ZoneFailureHeadroom: 1, FilesZoneCollapsed: 5, Zones: []client.ZoneRisk{
				{Zone: "a", Nodes: []string{"node-1", "node-2"}, FilesLeftWithOneCopy: 5},
				{Nodes: []string{"node-3"}},
			},
		}, exitOK, []string{
			`(?m)^zone headroom\s+1 \(`,
			`(?m)^zone collapsed\s+5 files keep two copies in one zone`,
			`(?m)^ZONE\s+HEALTHY NODES\s+FILES LEFT WITH 1 COPY\s+FILES LEFT WITH NONE$`,
			`(?m)^a\s+node-1,node-2\s+5\s+0$`,
			`(?m)^\(none\)\s+node-3\s+0\s+0$`,
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

// dfs status ends with each node's scrub pass; a coordinator without the
// scrub route shows none, and a failing one neither hides the durability
// answer nor changes the exit status.
func TestStatusShowsEachNodesScrubPass(t *testing.T) {
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	last := time.Date(2026, 11, 29, 23, 10, 0, 0, time.UTC)
	safe := client.DurabilityReport{FilesByCopies: map[string]int{"3": 1}, Files: 1, ReplicationFactor: 3, HealthyNodes: 3}
	f := newFakeCoordinator(t)
	f.durability = safe
	f.scrub = &client.ScrubReport{Nodes: []client.NodeScrub{
		{NodeID: "node-1", Status: client.NodeHealthy, Reachable: true, ScrubProgress: wire.ScrubProgress{
			PeriodStart: &start, LastFullPassAt: &last, CopiesScrubbed: 250, CopiesTotal: 1000, BytesScrubbed: 1 << 20,
			BytesTotal: 4 << 20, CorruptionsFound: 0, CorruptionsFoundTotal: 3, Running: true, Behind: true}},
		{NodeID: "node-2", Status: client.NodeHealthy, Reachable: true, ScrubProgress: wire.ScrubProgress{
			PeriodStart: &start, CopiesScrubbed: 1000, CopiesTotal: 1000, BytesScrubbed: 4 << 20, BytesTotal: 4 << 20,
			CorruptionsFound: 2, CorruptionsFoundTotal: 2}},
		{NodeID: "node-3", Status: client.NodeUnhealthy, Error: "Get \"http://127.0.0.1:9003/internal/scrub\": dial tcp 127.0.0.1:9003: connect: connection refused"},
		{NodeID: "node-4", Status: client.NodeHealthy, Reachable: true},
		{NodeID: "node-5", Status: client.NodeUnhealthy, Error: "Get \"https://node-5.example:9005/internal/scrub\": tls: failed to verify certificate:\n\t" +
			strings.Repeat("x509: certificate signed by unknown authority; ", 8) + "read: connection reset by peer"},
	}}
	code, stdout, stderr := dfs(t, f.srv.URL, "", "status")
	require.Equal(t, exitOK, code, stderr)
	for _, l := range []string{
		`(?m)^scrub passes:$`,
		`(?m)^NODE\s+PASS\s+COPIES\s+BYTES\s+LAST FULL PASS\s+CORRUPT \(PERIOD/EVER\)$`,
		`(?m)^node-1\s+running 25% \(behind\)\s+250/1000\s+1\.0 MiB/4\.0 MiB\s+2026-11-29T23:10:00Z\s+0/3$`,
		`(?m)^node-2\s+done\s+1000/1000\s+4\.0 MiB/4\.0 MiB\s+never\s+2/2$`,
		`(?m)^node-3\s+unreachable\s+-\s+-\s+-\s+-$`,
		`(?m)^  node-3: Get "http://127\.0\.0\.1:9003/internal/scrub": dial tcp 127\.0\.0\.1:9003: connect: connection refused$`,
		`(?m)^node-4\s+not started\s+0/0\s+0 B/0 B\s+never\s+0/0$`,
	} {
		require.Regexp(t, l, stdout)
	}
	header := regexp.MustCompile(`(?m)^NODE.*$`).FindString(stdout)
	require.Less(t, len(header), 120, "the error does not widen the table: %q", header)
	// A long error is shortened to one line that keeps what was asked and
	// the cause at its end.
	long := regexp.MustCompile(`(?m)^  node-5: .*$`).FindString(stdout)
	require.Regexp(t, `^  node-5: Get "https://node-5\.example:9005/internal/scrub".* … .*read: connection reset by peer$`, long)
	require.LessOrEqual(t, utf8.RuneCountInString(long), len("  node-5: ")+maxErrorWidth)
	code, stdout, _ = dfs(t, f.srv.URL, "", "status", "-json")
	require.Equal(t, exitOK, code)
	require.NotContains(t, stdout, "node-1", "-json is the durability report")

	f.fail["GET /api/cluster/scrub"] = fakeAnswer{status: http.StatusServiceUnavailable, code: "METADATA_UNAVAILABLE", msg: "store down"}
	code, stdout, stderr = dfs(t, f.srv.URL, "", "status")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^failure headroom`, stdout)
	require.Regexp(t, `(?m)^scrub: not available: .*store down`, stdout)

	delete(f.fail, "GET /api/cluster/scrub")
	f.scrub = nil
	code, stdout, _ = dfs(t, f.srv.URL, "", "status")
	require.Equal(t, exitOK, code)
	require.NotContains(t, stdout, "scrub", "a coordinator without scrubbers shows none")
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  string
	}{
		{"connection refused", 20, "connection refused"},
		{"a\n\tb   c", 20, "a b c"},
		{"0123456789", 10, "0123456789"},
		{"0123456789ab", 10, "01 … 789ab"},
		{"ééééééééééüüüüü", 9, "éé … üüüü"},
	} {
		got := clip(tc.in, tc.width)
		require.Equal(t, tc.want, got, "%q", tc.in)
		require.LessOrEqual(t, utf8.RuneCountInString(got), tc.width)
	}
}
