//go:build linux

package console_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/console"
	"github.com/dfs-project/dfs/internal/httpx"
	"github.com/dfs-project/dfs/internal/testenv/browsertest"
)

// operationsAnswer has a drain and a scrub pass running and a scrub pass
// finished that found two corrupt copies.
const operationsAnswer = `{"running":[{"id":"x-1","kind":"DRAIN","trigger":"DEREGISTERED","nodeId":"node-3","state":"RUNNING",
 "done":3,"total":12,"bytesDone":3072,"bytesPerSecond":1024,"etaSeconds":9,"startedAt":"2026-12-01T12:00:00Z","finishedAt":null},
 {"id":"scrub-node-1-a","kind":"SCRUB","trigger":"SCRUB_PERIOD","nodeId":"node-1","state":"RUNNING",
 "done":250,"total":1000,"bytesDone":1048576,"bytesPerSecond":512,"etaSeconds":6144,"startedAt":"2026-12-01T12:00:00Z","finishedAt":null,
 "report":{"copiesScrubbed":250,"bytesScrubbed":1048576,"corruptionsFound":0,"behind":true}}],
 "recent":[{"id":"scrub-node-2-b","kind":"SCRUB","trigger":"SCRUB_PERIOD","nodeId":"node-2","state":"DONE",
 "done":1000,"total":1000,"bytesDone":4194304,"bytesPerSecond":1024,"etaSeconds":null,
 "startedAt":"2026-11-30T00:00:00Z","finishedAt":"2026-11-30T01:08:16Z",
 "report":{"copiesScrubbed":1000,"bytesScrubbed":4194304,"corruptionsFound":2,"behind":false}}]}`

// nodesAnswer has node-3 half drained; ringAnswer is the ring without it
// (two nodes at VIRTUAL_NODES=2, as API.md's example).
const nodesAnswer = `[
 {"nodeId":"node-1","host":"127.0.0.1","port":9001,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":19.57,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":3,
  "blobCount":7,"bytesUsed":7168,"freeBytes":1073741824},
 {"nodeId":"node-3","host":"127.0.0.1","port":9003,"status":"DEREGISTERED","onRing":false,"keyspaceSharePercent":0,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":3,
  "drain":{"id":"x-1","kind":"DRAIN","trigger":"DEREGISTERED","nodeId":"node-3","state":"RUNNING","done":3,"total":12,
   "bytesDone":3072,"bytesPerSecond":1024,"etaSeconds":9,"startedAt":"2026-12-01T12:00:00Z","finishedAt":null}}]`

const ringAnswer = `{"physicalNodes":2,"virtualNodesPerNode":2,"totalRingPositions":4,
 "nodes":[{"nodeId":"node-2","keyspaceSharePercent":80.43},{"nodeId":"node-1","keyspaceSharePercent":19.57}],
 "points":[{"nodeId":"node-1","position":53367683256895997},{"nodeId":"node-2","position":6365551437590537204},
  {"nodeId":"node-1","position":6903187661124769136},{"nodeId":"node-2","position":8009011069314504270}]}`

// fakeCoordinator serves the console and the few API answers the
// operations page reads.
func fakeCoordinator() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/console/", console.Handler())
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}
	}
	mux.Handle("/api/health", answer(`{"status":"UP"}`))
	mux.Handle("/api/cluster/operations", answer(operationsAnswer))
	mux.Handle("/api/nodes", answer(nodesAnswer))
	mux.Handle("/api/nodes/ring", answer(ringAnswer))
	mux.HandleFunc("/", httpx.NotFoundHandler)
	return mux
}

func load(t *testing.T, h http.Handler, path string) *goquery.Document {
	t.Helper()
	bin := browsertest.Chromium(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	dom, requested := browsertest.Load(t, bin, srv.URL, path, 5*time.Second)
	for _, u := range requested {
		require.True(t, strings.HasPrefix(u, srv.URL+"/"), "the page requested %s, outside the coordinator", u)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(dom))
	require.NoError(t, err)
	require.Equal(t, "true", doc.Find("#view").AttrOr("data-loaded", ""), "the page did not finish loading:\n%s\nrequested: %v", dom, requested)
	return doc
}

// The operations page lists scrub passes from the operations answer beside
// the other operations, with the corrupt copies each found.
func TestTheOperationsPageListsScrubPasses(t *testing.T) {
	doc := load(t, fakeCoordinator(), "/console/#/operations")
	n1 := doc.Find(`tr[data-op="scrub-node-1-a"]`)
	require.Equal(t, 1, n1.Length(), "node-1's running pass")
	require.Equal(t, "SCRUB", n1.AttrOr("data-kind", ""))
	require.Equal(t, "RUNNING", n1.AttrOr("data-state", ""))
	require.Equal(t, "250", n1.Find(".bar").AttrOr("data-done", ""))
	require.Equal(t, "1000", n1.Find(".bar").AttrOr("data-total", ""))
	require.Contains(t, n1.Text(), "1.0 MiB")
	require.Equal(t, "0 (behind)", n1.Find(`[data-field="corruptionsFound"]`).Text())
	n2 := doc.Find(`tr[data-op="scrub-node-2-b"]`)
	require.Equal(t, "DONE", n2.AttrOr("data-state", ""))
	require.Equal(t, "2", n2.Find(`[data-field="corruptionsFound"]`).Text())
	require.Contains(t, n2.Text(), "node-2")

	// The running drain from the operations answer, with its progress.
	op := doc.Find(`tr[data-op="x-1"]`)
	require.Equal(t, "DRAIN", op.AttrOr("data-kind", ""))
	require.Equal(t, "3", op.Find(".bar").AttrOr("data-done", ""))
	require.Equal(t, "12", op.Find(".bar").AttrOr("data-total", ""))
	require.Contains(t, op.Text(), "node-3")
	require.Equal(t, "—", op.Find(`[data-field="corruptionsFound"]`).Text(), "a drain finds no corrupt copies")
}

// A node being drained shows its drain's progress instead of a drain
// button, and the ring is drawn with one arc per run of a node's points.
func TestTheNodesPageShowsADrainAndTheRingsArcs(t *testing.T) {
	doc := load(t, fakeCoordinator(), "/console/#/nodes")
	draining := doc.Find(`tr[data-status="DEREGISTERED"][data-node="node-3"]`)
	require.Equal(t, "3", draining.Find(".drain .bar").AttrOr("data-done", ""))
	require.Equal(t, "12", draining.Find(".drain .bar").AttrOr("data-total", ""))
	require.Contains(t, draining.Text(), "ETA 9s")
	require.Zero(t, draining.Find("button").Length(), "no drain button for a node being drained")
	healthy := doc.Find(`tr[data-status="HEALTHY"][data-node="node-1"]`)
	require.Equal(t, "node-1", healthy.Find("button[data-drain]").AttrOr("data-drain", ""))
	require.Equal(t, "7", healthy.Find(`[data-field="blobCount"]`).Text())

	// Points alternate 1, 2, 1, 2, and node-2's last arc runs up to where
	// node-1's first one, wrapping past 0, begins: four arcs.
	arcs := doc.Find("#ring path[data-node]")
	require.Equal(t, 4, arcs.Length())
	var owners []string
	arcs.Each(func(_ int, s *goquery.Selection) { owners = append(owners, s.AttrOr("data-node", "")) })
	require.Equal(t, []string{"node-1", "node-2", "node-1", "node-2"}, owners)
	require.Equal(t, 2, doc.Find("#ring path.share").Length(), "one share arc per node")
}
