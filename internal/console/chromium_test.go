//go:build linux

package console_test

import (
	"fmt"
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
// operations and nodes pages read.
func fakeCoordinator() http.Handler { return fakeCoordinatorOf(nodesAnswer, ringAnswer) }

// fakeCoordinatorOf is fakeCoordinator with these nodes and this ring.
func fakeCoordinatorOf(nodesAnswer, ringAnswer string) http.Handler {
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

// zonedNodes are five nodes: two in zone-a (node-2 at an operator's weight
// 2), one in zone-b, one of no zone and one in zone-c off the ring.
const zonedNodes = `[
 {"nodeId":"node-1","host":"127.0.0.1","port":9001,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":21.5,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":3,
  "zone":"zone-a","weight":1,"points":100,"reportedZone":"zone-a","reportedWeight":1},
 {"nodeId":"node-2","host":"127.0.0.1","port":9002,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":42.25,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":3,
  "zone":"zone-a","weight":2,"points":200,"reportedZone":"zone-a","reportedWeight":1,"overridden":["weight"]},
 {"nodeId":"node-3","host":"127.0.0.1","port":9003,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":19.1,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":3,
  "zone":"zone-b","weight":1,"points":100,"reportedWeight":1,"overridden":["zone"]},
 {"nodeId":"node-4","host":"127.0.0.1","port":9004,"status":"HEALTHY","onRing":true,"keyspaceSharePercent":17.15,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":0,"consecutiveSuccesses":3,
  "weight":1,"points":100,"reportedWeight":1},
 {"nodeId":"node-5","host":"127.0.0.1","port":9005,"status":"UNHEALTHY","onRing":false,"keyspaceSharePercent":0,
  "registeredAt":"2026-12-01T12:00:00Z","lastCheckAt":null,"lastHealthyAt":null,"consecutiveFailures":4,"consecutiveSuccesses":0,
  "zone":"zone-c","weight":1,"points":0,"reportedZone":"zone-c","reportedWeight":1}]`

const zonedRing = `{"physicalNodes":4,"virtualNodesPerNode":100,"totalRingPositions":500,
 "nodes":[{"nodeId":"node-2","keyspaceSharePercent":42.25,"zone":"zone-a","weight":2,"points":200},
  {"nodeId":"node-1","keyspaceSharePercent":21.5,"zone":"zone-a","weight":1,"points":100},
  {"nodeId":"node-3","keyspaceSharePercent":19.1,"zone":"zone-b","weight":1,"points":100},
  {"nodeId":"node-4","keyspaceSharePercent":17.15,"weight":1,"points":100}],
 "zones":[{"zone":"zone-a","keyspaceSharePercent":63.75,"nodes":2},{"zone":"zone-b","keyspaceSharePercent":19.1,"nodes":1}]}`

// The nodes page groups the nodes by zone under a heading with the zone's
// share: the ring's zones largest first, a zone off the ring, then the
// nodes of no zone together; each node shows its weight (* when an
// operator set it), points and share.
func TestTheNodesPageGroupsNodesByZone(t *testing.T) {
	doc := load(t, fakeCoordinatorOf(zonedNodes, zonedRing), "/console/#/nodes")
	groups := doc.Find("table#nodes tbody.zone-group")
	var zones []string
	groups.Each(func(_ int, g *goquery.Selection) { zones = append(zones, g.AttrOr("data-zone", "?")) })
	require.Equal(t, []string{"zone-a", "zone-b", "zone-c", ""}, zones)

	members := func(zone string) (ids []string) {
		doc.Find(`tbody.zone-group[data-zone="` + zone + `"] tr[data-node]`).Each(func(_ int, r *goquery.Selection) {
			ids = append(ids, r.AttrOr("data-node", ""))
		})
		return ids
	}
	require.Equal(t, []string{"node-1", "node-2"}, members("zone-a"))
	require.Equal(t, []string{"node-3"}, members("zone-b"))
	require.Equal(t, []string{"node-5"}, members("zone-c"))
	require.Equal(t, []string{"node-4"}, members(""))

	heading := func(zone string) *goquery.Selection {
		return doc.Find(`tbody.zone-group[data-zone="` + zone + `"] tr.zone-head`)
	}
	require.Equal(t, "63.75 %", heading("zone-a").Find(`[data-field="zoneShare"]`).Text())
	require.Equal(t, "zone-a", heading("zone-a").Find(".zone-name").Text())
	require.Contains(t, heading("zone-a").Text(), "2 nodes")
	require.Equal(t, "19.10 %", heading("zone-b").Find(`[data-field="zoneShare"]`).Text())
	require.Equal(t, "0.00 %", heading("zone-c").Find(`[data-field="zoneShare"]`).Text(), "a zone off the ring")
	require.Equal(t, "No zone", heading("").Find(".zone-name").Text())
	require.Contains(t, heading("").Text(), "each a zone of its own")
	require.Equal(t, "17.15 %", heading("").Find(`[data-field="zoneShare"]`).Text())

	n2 := doc.Find(`tr[data-node="node-2"][data-status="HEALTHY"]`)
	require.Equal(t, "2 *", n2.Find(`[data-field="weight"]`).Text())
	require.Equal(t, "set by an operator; the node reports 1", n2.Find(`[data-field="weight"]`).AttrOr("title", ""))
	require.Equal(t, "200", n2.Find(`[data-field="points"]`).Text())
	require.Equal(t, "42.25 %", n2.Find(`[data-field="share"]`).Text())
	n1 := doc.Find(`tr[data-node="node-1"][data-status="HEALTHY"]`)
	require.Equal(t, "1", n1.Find(`[data-field="weight"]`).Text())
	require.Zero(t, n1.Find(`[data-field="zoneOverride"]`).Length())
	n3 := doc.Find(`tr[data-node="node-3"][data-status="HEALTHY"]`)
	require.Equal(t, "zone set by an operator; the node reports no zone", n3.Find(`[data-field="zoneOverride"]`).Text())
	n5 := doc.Find(`tr[data-node="node-5"][data-status="UNHEALTHY"]`)
	require.Equal(t, "—", n5.Find(`[data-field="points"]`).Text(), "off the ring")
	require.Equal(t, "—", n5.Find(`[data-field="share"]`).Text())
	require.Contains(t, doc.Find("#view").Text(), "A weight marked * was set by an operator")
}

// copiesOf is a file's or a chunk's replicas answer: an ACTIVE copy on each
// named node, the first the primary.
func copiesOf(nodes ...string) string {
	var rs []string
	for i, n := range nodes {
		rs = append(rs, fmt.Sprintf(`{"nodeId":%q,"status":"ACTIVE","primary":%t,"updatedAt":"2026-12-01T12:00:00Z"}`, n, i == 0))
	}
	return "[" + strings.Join(rs, ",") + "]"
}

// fileAnswer is a file's metadata answer with these replicas and chunks
// (each a chunk's replicas answer; none for a whole file). A chunk with
// fewer than three ACTIVE copies is DEGRADED.
func fileAnswer(replicas string, chunks ...string) string {
	var cs []string
	for i, c := range chunks {
		status := "ACTIVE"
		if strings.Count(c, `"ACTIVE"`) < 3 {
			status = "DEGRADED"
		}
		cs = append(cs, fmt.Sprintf(`{"index":%d,"chunkId":"c-%d","offset":%d,"sizeBytes":4,"checksum":"ab","status":%q,"replicas":%s}`,
			i, i, 4*i, status, c))
	}
	chunked := ""
	if len(cs) > 0 {
		chunked = `,"chunks":[` + strings.Join(cs, ",") + "]"
	}
	return `{"fileId":"5b0c2a52-3a8e-4a43-9f6e-0d3c8f1a2b7c","fileName":"big.bin","contentType":"application/octet-stream",
 "sizeBytes":12,"checksum":"cd","status":"ACTIVE","primaryNode":"node-1","replicationFactor":3,"ringPosition":1,
 "createdAt":"2026-12-01T12:00:00Z","updatedAt":"2026-12-01T12:00:00Z","replicas":` + replicas + chunked + "}"
}

// A chunked file has no copies of its own: its page sums up its chunks'
// copies as `dfs info` does and lists the chunks that are not ACTIVE; a
// whole file's page lists its copies.
func TestTheFilePageSumsUpAChunkedFilesCopies(t *testing.T) {
	const id = "5b0c2a52-3a8e-4a43-9f6e-0d3c8f1a2b7c"
	tests := []struct {
		name     string
		answer   string
		summary  string   // "" for a whole file
		copies   []string // the nodes of the copy table's rows
		troubled []string // the chunks listed as not ACTIVE
	}{
		{"a chunked file", fileAnswer("[]", copiesOf("node-1", "node-2", "node-3"), copiesOf("node-2", "node-3", "node-1"), copiesOf("node-3", "node-1", "node-2")),
			"3 chunks, 3 copies each on node-1, node-2, node-3", nil, nil},
		{"chunks with fewer copies", fileAnswer("[]", copiesOf("node-1", "node-2", "node-3"), copiesOf("node-2", "node-4"), copiesOf("node-3", "node-1", "node-2")),
			"3 chunks, 2–3 copies each on node-1, node-2, node-3, node-4", nil, []string{"1"}},
		{"a chunk of one copy", fileAnswer("[]", copiesOf("node-1"), copiesOf("node-2")),
			"2 chunks, 1 copy each on node-1, node-2", nil, []string{"0", "1"}},
		{"a whole file", fileAnswer(copiesOf("node-1", "node-2", "node-3")), "", []string{"node-1", "node-2", "node-3"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("/api/files/"+id+"/metadata", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.answer))
			})
			mux.Handle("/", fakeCoordinator())
			doc := load(t, mux, "/console/#/files/"+id)

			summary := doc.Find("#chunk-copies")
			if tc.summary == "" {
				require.Zero(t, summary.Length(), "a whole file has no chunk summary")
			} else {
				require.Equal(t, tc.summary, summary.Text())
			}
			var copies []string
			doc.Find("tr[data-node]").Each(func(_ int, r *goquery.Selection) { copies = append(copies, r.AttrOr("data-node", "")) })
			require.Equal(t, tc.copies, copies)
			var troubled []string
			doc.Find("tr[data-chunk]").Each(func(_ int, r *goquery.Selection) {
				require.Equal(t, "DEGRADED", r.AttrOr("data-status", ""))
				troubled = append(troubled, r.AttrOr("data-chunk", ""))
			})
			require.Equal(t, tc.troubled, troubled)
		})
	}
}

// A chunked file's verification lists no copies of its own: the page says
// how many chunks were checked and shows each chunk copy that was not OK or
// was rebuilt; a whole file's shows every copy.
func TestTheFilePageShowsAChunkedFilesVerification(t *testing.T) {
	const id = "5b0c2a52-3a8e-4a43-9f6e-0d3c8f1a2b7c"
	check := func(node, result string, rebuilt bool) string {
		return fmt.Sprintf(`{"nodeId":%q,"result":%q,"status":"ACTIVE","rebuilt":%t}`, node, result, rebuilt)
	}
	chunk := func(i int, copies ...string) string {
		return fmt.Sprintf(`{"fileId":"c-%d","checksum":"ab","status":"ACTIVE","healthyCopies":3,"index":%d,"copies":[%s]}`,
			i, i, strings.Join(copies, ","))
	}
	tests := []struct {
		name    string
		verify  string
		summary string   // "" for a whole file
		rows    []string // chunk/node/result of each row
	}{
		{"every chunk copy OK",
			`{"fileId":"` + id + `","checksum":"cd","status":"ACTIVE","healthyCopies":3,"copies":[],"chunks":[` +
				chunk(0, check("node-1", "OK", false), check("node-2", "OK", false)) + "," +
				chunk(1, check("node-2", "OK", false), check("node-3", "OK", false)) + "]}",
			"2 chunks checked: every copy OK", nil},
		{"a corrupt chunk copy rebuilt elsewhere",
			`{"fileId":"` + id + `","checksum":"cd","status":"ACTIVE","healthyCopies":3,"copies":[],"chunks":[` +
				chunk(0, check("node-1", "OK", false), check("node-2", "OK", false)) + "," +
				chunk(1, check("node-2", "CORRUPT", false), check("node-3", "OK", false), check("node-4", "OK", true)) + "]}",
			"2 chunks checked: 1 with a copy not OK or rebuilt", []string{"1/node-2/CORRUPT", "1/node-4/OK"}},
		{"a whole file",
			`{"fileId":"` + id + `","checksum":"cd","status":"ACTIVE","healthyCopies":2,"copies":[` +
				check("node-1", "OK", false) + "," + check("node-2", "MISSING", false) + "]}",
			"", []string{"/node-1/OK", "/node-2/MISSING"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("/api/files/"+id+"/metadata", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(fileAnswer(copiesOf("node-1", "node-2", "node-3"))))
			})
			mux.HandleFunc("POST /api/files/"+id+"/verify", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.verify))
			})
			mux.Handle("/", fakeCoordinator())
			doc := load(t, mux, "/console/#/files/"+id+"?verify=1")

			result := doc.Find("#verify-result")
			require.Contains(t, result.Text(), "Verified:", "the verification did not show:\n%s", result.Text())
			summary := result.Find("#verify-chunks")
			if tc.summary == "" {
				require.Zero(t, summary.Length(), "a whole file has no chunk summary")
			} else {
				require.Equal(t, tc.summary, summary.Text())
			}
			var rows []string
			result.Find("tr[data-result]").Each(func(_ int, r *goquery.Selection) {
				rows = append(rows, r.AttrOr("data-chunk", "")+"/"+r.AttrOr("data-node", "")+"/"+r.AttrOr("data-result", ""))
			})
			require.Equal(t, tc.rows, rows)
		})
	}
}
