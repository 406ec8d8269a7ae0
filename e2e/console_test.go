//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/ops"
	"github.com/dfs-project/dfs/internal/testenv/browsertest"
)

// page loads a console page from the cluster's coordinator in headless
// Chromium and returns its DOM, failing unless the page finished loading
// and asked nothing of any other origin.
func (c *cluster) page(bin, hash string) *goquery.Document {
	c.t.Helper()
	origin := c.lc.CoordinatorURL()
	dom, requested := browsertest.Load(c.t, bin, origin, "/console/"+hash, 4*time.Second)
	for _, u := range requested {
		require.True(c.t, strings.HasPrefix(u, origin+"/"), "the console requested %s, outside the coordinator", u)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(dom))
	require.NoError(c.t, err)
	require.Equal(c.t, "true", doc.Find("#view").AttrOr("data-loaded", ""), "%s did not load:\n%s", hash, dom)
	return doc
}

// getJSON decodes a GET of the coordinator's API.
func (c *cluster) getJSON(path string, v any) int {
	c.t.Helper()
	resp, err := c.http.Get(c.lc.CoordinatorURL() + path)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.NoError(c.t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
}

// overviewShows loads the overview and checks it against the durability
// report, which it returns: the health, the headroom, the files by copies
// and each node's status.
func (c *cluster) overviewShows(bin, health string) client.DurabilityReport {
	c.t.Helper()
	d := c.durability()
	doc := c.page(bin, "#/overview")
	require.Equal(c.t, health, text(doc.Find("#health-status")))
	require.Equal(c.t, strconv.Itoa(d.FailureHeadroom), text(doc.Find("#headroom")))
	for copies, n := range d.FilesByCopies {
		require.Equal(c.t, strconv.Itoa(n), text(doc.Find(`[data-copies="`+copies+`"] b`)), "files with %s copies", copies)
	}
	for _, n := range d.Nodes {
		row := doc.Find(`tr[data-node="` + n.NodeID + `"]`)
		require.Equal(c.t, string(n.Status), row.AttrOr("data-status", ""), n.NodeID)
		require.Equal(c.t, strconv.Itoa(n.FilesLeftWithOneCopy), text(row.Find("td.num").First()), n.NodeID)
	}
	return d
}

func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

// TestConsoleShowsTheCluster loads each console page from a real cluster
// and checks what it shows against the API, then kills a node with SIGKILL
// and sees the pages show the failure and the rebalance it set off.
func TestConsoleShowsTheCluster(t *testing.T) {
	t.Parallel()
	bin := browsertest.Chromium(t)
	c := startCluster(t, options{})
	files := c.uploadRandom(4, 4<<10)
	nodes := c.lc.Nodes()
	victim := nodes[2]

	t.Run("overview", func(t *testing.T) {
		d := c.with(t).overviewShows(bin, "UP")
		require.Equal(t, 2, d.FailureHeadroom)
		require.Equal(t, len(files), d.FilesByCopies["3"], "every file has three copies")
	})

	t.Run("nodes and ring", func(t *testing.T) {
		c := c.with(t)
		ctx, cancel := callCtx()
		defer cancel()
		ring, err := c.api.Ring(ctx)
		require.NoError(t, err)
		doc := c.page(bin, "#/nodes")
		for _, n := range c.nodes() {
			row := doc.Find(`#view table tr[data-status][data-node="` + n.NodeID + `"]`)
			require.Equal(t, 1, row.Length(), "a row for %s", n.NodeID)
			require.Equal(t, "HEALTHY", row.AttrOr("data-status", ""))
			require.NotNil(t, n.BlobCount)
			require.Equal(t, fmt.Sprint(*n.BlobCount), text(row.Find(`[data-field="blobCount"]`)), n.NodeID)
			require.Equal(t, len(files), int(*n.BlobCount), "every node holds a copy of every file")
		}
		for _, s := range ring.Nodes {
			require.Positive(t, doc.Find(`#ring path[data-node="`+s.NodeID+`"]`).Length(), "%s has arcs on the ring", s.NodeID)
			require.Equal(t, fmt.Sprintf("%.2f %%", s.KeyspaceSharePercent), text(doc.Find(`#ring-legend tr[data-node="`+s.NodeID+`"] td.num`)))
		}
	})

	t.Run("files and verify", func(t *testing.T) {
		c := c.with(t)
		doc := c.page(bin, "#/files")
		for _, f := range files {
			require.Equal(t, "ACTIVE", doc.Find(`tr[data-file="`+f.res.FileID+`"]`).AttrOr("data-status", ""), f.name)
		}
		// The search box: a name and an id.
		for _, q := range []string{files[1].name, files[1].res.FileID} {
			doc = c.page(bin, "#/files?q="+url.QueryEscape(q))
			rows := doc.Find("tr[data-file]")
			require.Equal(t, 1, rows.Length(), "one file matches %q", q)
			require.Equal(t, files[1].res.FileID, rows.AttrOr("data-file", ""))
		}
		// A bucket/key finds the objects whose keys start with it.
		obj := c.putObject("photos", "2026/a.jpg", []byte("not really a photo"))
		for _, q := range []string{"photos/2026/a.jpg", "s3://photos/2026/", "photos/"} {
			doc = c.page(bin, "#/files?q="+url.QueryEscape(q))
			rows := doc.Find("tr[data-file]")
			require.Equal(t, 1, rows.Length(), "one object matches %q", q)
			require.Equal(t, obj, rows.AttrOr("data-file", ""), q)
			require.Equal(t, "ACTIVE", rows.AttrOr("data-status", ""), q)
			require.Contains(t, text(rows.Find("td").First()), "photos/2026/a.jpg", q)
		}
		doc = c.page(bin, "#/files?q="+url.QueryEscape("photos/2025/"))
		require.Zero(t, doc.Find("tr[data-file]").Length())
		require.Contains(t, text(doc.Find("#file-note")), "no object in photos")
		doc = c.page(bin, "#/files?q="+url.QueryEscape("albums/2026/a.jpg"))
		require.Zero(t, doc.Find("tr[data-file]").Length())
		require.Contains(t, text(doc.Find("#file-note")), "no bucket named albums")

		id := files[0].res.FileID
		doc = c.page(bin, "#/files/"+id+"?verify=1")
		require.Equal(t, id, text(doc.Find("#file-id")))
		meta := c.metadata(id)
		require.Len(t, meta.Replicas, 3)
		for _, r := range meta.Replicas {
			require.Equal(t, string(r.Status), doc.Find(`#view table tr[data-status][data-node="`+r.NodeID+`"]`).AttrOr("data-status", ""))
			require.Equal(t, "OK", doc.Find(`#verify-result tr[data-node="`+r.NodeID+`"]`).AttrOr("data-result", ""), "verify of %s", r.NodeID)
		}
	})

	t.Run("drain pre-flight", func(t *testing.T) {
		c := c.with(t)
		ctx, cancel := callCtx()
		defer cancel()
		plan, err := c.api.PlanDrain(ctx, nodes[0])
		require.NoError(t, err)
		require.False(t, plan.Safe, "two nodes left at RF 3")
		doc := c.page(bin, "#/nodes?drain="+nodes[0])
		require.Equal(t, "Not safe to drain:", text(doc.Find("#drain-verdict")))
		var shown []string
		doc.Find("#drain-reasons li").Each(func(_ int, s *goquery.Selection) { shown = append(shown, text(s)) })
		require.Equal(t, plan.Reasons, shown)
		require.Equal(t, 1, doc.Find("#drain-force[disabled]").Length(), "forcing waits for the operator's acknowledgement")
		require.Contains(t, text(doc.Find("#drain-risk")), "What it risks")
		require.Equal(t, client.NodeHealthy, c.nodes()[nodes[0]].Status, "a pre-flight changes nothing")
	})

	require.NoError(t, c.lc.KillNode(victim))
	c.waitEvicted(victim)
	eventually(t, settleTimeout, "the durability report to count the eviction", func() (bool, string) {
		d := c.durability()
		// The files, and the object the file search stored.
		return d.FilesByCopies["2"] == len(files)+1, fmt.Sprintf("%+v", d)
	})

	t.Run("the failure shows", func(t *testing.T) {
		c := c.with(t)
		d := c.overviewShows(bin, "DEGRADED")
		require.Equal(t, 1, d.FailureHeadroom)
		require.Equal(t, len(files)+1, d.FilesByCopies["2"])

		doc := c.page(bin, "#/nodes")
		require.Equal(t, "UNHEALTHY", doc.Find(`#view table tr[data-status][data-node="`+victim+`"]`).AttrOr("data-status", ""))
		require.Zero(t, doc.Find(`#ring path[data-node="`+victim+`"]`).Length(), "an evicted node is off the ring")

		var failed *ops.Operation
		eventually(t, settleTimeout, "the eviction's rebalance to be among the recent operations", func() (bool, string) {
			var snap ops.Snapshot
			require.Equal(t, http.StatusOK, c.getJSON("/api/cluster/operations", &snap))
			for i, o := range snap.Recent {
				if o.Kind == ops.Rebalance && o.Trigger == "FAILED" && o.NodeID == victim {
					failed = &snap.Recent[i]
				}
			}
			return failed != nil, fmt.Sprintf("%+v", snap)
		})
		doc = c.page(bin, "#/operations")
		row := doc.Find(`tr[data-op="` + failed.ID + `"]`)
		require.Equal(t, 1, row.Length(), "the page lists the eviction's rebalance")
		require.Equal(t, string(failed.State), row.AttrOr("data-state", ""))
		require.Equal(t, fmt.Sprint(failed.Done), row.Find(".bar").AttrOr("data-done", ""))

		// Every node's scrubber starts a pass soon after the node: the page
		// lists the running ones among the operations.
		var pass *ops.Operation
		eventually(t, settleTimeout, "a scrub pass among the operations", func() (bool, string) {
			var snap ops.Snapshot
			require.Equal(t, http.StatusOK, c.getJSON("/api/cluster/operations", &snap))
			all := append(snap.Running, snap.Recent...)
			for i, o := range all {
				if o.Kind == ops.Scrub && o.NodeID != victim {
					pass = &all[i]
				}
			}
			return pass != nil, fmt.Sprintf("%+v", snap)
		})
		doc = c.page(bin, "#/operations")
		row = doc.Find(`tr[data-op="` + pass.ID + `"]`)
		require.Equal(t, 1, row.Length(), "the page lists %s's scrub pass", pass.NodeID)
		require.Equal(t, "SCRUB", row.AttrOr("data-kind", ""))
		require.Equal(t, pass.NodeID, row.AttrOr("data-node", ""))
	})
}

// putObject creates bucket (when new) and stores data under key through the
// REST API, and returns the object's file id.
func (c *cluster) putObject(bucket, key string, data []byte) string {
	c.t.Helper()
	base := c.lc.CoordinatorURL() + "/api/buckets/" + bucket
	req, err := http.NewRequest(http.MethodPut, base, nil)
	require.NoError(c.t, err)
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	resp.Body.Close()
	require.Contains(c.t, []int{http.StatusCreated, http.StatusConflict}, resp.StatusCode, "create bucket %s", bucket)
	req, err = http.NewRequest(http.MethodPut, base+"/object?key="+url.QueryEscape(key), bytes.NewReader(data))
	require.NoError(c.t, err)
	resp, err = c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	require.Equal(c.t, http.StatusCreated, resp.StatusCode, "put %s/%s", bucket, key)
	var res struct{ FileID string }
	require.NoError(c.t, json.NewDecoder(resp.Body).Decode(&res))
	require.NotEmpty(c.t, res.FileID)
	return res.FileID
}
