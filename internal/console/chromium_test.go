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

// scrubAnswer is the shape GET /api/cluster/scrub answers (the scrubber's
// branch adds the route): one node mid-pass, one idle with a corruption.
const scrubAnswer = `{"nodes":[
 {"nodeId":"node-1","periodStart":"2026-11-30T00:00:00Z","copiesScrubbed":250,"copiesTotal":1000,
  "bytesScrubbed":1048576,"bytesTotal":4194304,"lastFullPassAt":"2026-11-29T23:10:00Z","corruptionsFound":0,"running":true},
 {"nodeId":"node-2","periodStart":"2026-11-30T00:00:00Z","copiesScrubbed":1000,"copiesTotal":1000,
  "bytesScrubbed":4194304,"bytesTotal":4194304,"lastFullPassAt":null,"corruptionsFound":2,"running":false}]}`

const operationsAnswer = `{"running":[{"id":"x-1","kind":"DRAIN","trigger":"DEREGISTERED","nodeId":"node-3","state":"RUNNING",
 "done":3,"total":12,"bytesDone":3072,"bytesPerSecond":1024,"etaSeconds":9,"startedAt":"2026-12-01T12:00:00Z","finishedAt":null}],
 "recent":[]}`

// fakeCoordinator serves the console and the few API answers the
// operations page reads; scrub says whether the scrub route exists.
func fakeCoordinator(scrub bool) http.Handler {
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
	if scrub {
		mux.Handle("/api/cluster/scrub", answer(scrubAnswer))
	}
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

// The scrub panel shows each node's pass as the scrubber reports it, and
// says so plainly when the coordinator has no scrubber.
func TestTheScrubPanelRendersTheScrubbersAnswer(t *testing.T) {
	doc := load(t, fakeCoordinator(true), "/console/#/operations")
	require.Zero(t, doc.Find("#scrub-missing").Length())
	n1 := doc.Find(`tr[data-node="node-1"]`)
	require.Equal(t, 1, n1.Length(), "node-1's scrub row")
	require.Equal(t, "true", n1.AttrOr("data-running", ""))
	require.Equal(t, "RUNNING", n1.Find(".badge").First().Text())
	require.Equal(t, "250", n1.Find(".bar").AttrOr("data-done", ""))
	require.Equal(t, "1000", n1.Find(".bar").AttrOr("data-total", ""))
	require.Contains(t, n1.Text(), "1.0 MiB / 4.0 MiB")
	n2 := doc.Find(`tr[data-node="node-2"]`)
	require.Equal(t, "IDLE", n2.Find(".badge").First().Text())
	require.Equal(t, "2", n2.Find(`[data-field="corruptionsFound"]`).Text())
	require.Contains(t, n2.Text(), "—", "a node with no full pass yet shows none")

	// The running drain from the operations answer, with its progress.
	op := doc.Find(`tr[data-op="x-1"]`)
	require.Equal(t, "DRAIN", op.AttrOr("data-kind", ""))
	require.Equal(t, "3", op.Find(".bar").AttrOr("data-done", ""))
	require.Equal(t, "12", op.Find(".bar").AttrOr("data-total", ""))
	require.Contains(t, op.Text(), "node-3")

	doc = load(t, fakeCoordinator(false), "/console/#/operations")
	require.Equal(t, "scrubber not available on this coordinator", doc.Find("#scrub-missing").Text())
}
