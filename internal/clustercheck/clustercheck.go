// Package clustercheck checks a running dfs cluster against the promise the
// system makes after any fault has passed: every acknowledged file reads back
// byte-exact, is ACTIVE with exactly the copies its preference list names on
// the current ring (the first of them the primary), every copy the metadata
// lists is on its node's disk with the right bytes, and no node holds a blob
// the metadata does not list as one of its ACTIVE copies.
//
// It looks only from outside, the way an operator could: the coordinator's
// REST API for the ring, the file list and each file's metadata, and the
// storage nodes' internal API for what they actually hold (their listings
// and a re-hash of each copy). Placement is recomputed with internal/ring,
// which is byte-exact by contract, so a coordinator that agrees with itself
// but not with the ring is caught.
//
// The e2e fault tests and the chaos soak both end with Check; they poll it
// through a quiet period, since a cluster that is still converging fails it
// for a while.
package clustercheck

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// File is a file the caller was told is stored: its id and the SHA-256 (lower
// case hex) of the bytes it uploaded.
type File struct {
	ID     string
	SHA256 string
}

// Options say what to check and how to reach the cluster.
type Options struct {
	// API is the coordinator's REST client. Required.
	API *client.Client
	// Nodes maps the id of every running storage node to its base URL
	// (http://127.0.0.1:9001). A node on the ring that is missing here is
	// reached at the address the coordinator has for it; a running node that
	// is not on the ring belongs here too, since it must hold nothing.
	Nodes map[string]string
	// HTTP calls the storage nodes. Default: a client with a 30s timeout.
	HTTP *http.Client
	// Token is the CLUSTER_TOKEN the nodes' internal API wants, if any.
	Token string
	// RF is the coordinator's REPLICATION_FACTOR. Default 3.
	RF int
	// VNodes is the coordinator's VIRTUAL_NODES; zero takes what the
	// coordinator reports (GET /api/nodes/ring). A value that differs from
	// the coordinator's is an error: every placement judged by it would be
	// wrong.
	VNodes int
	// Files are the acknowledged files; Deleted the ids of files the caller
	// deleted (with an answer or not). A file the metadata lists that is in
	// neither is held to the same rules as an acknowledged one, with the
	// metadata's checksum as its expected bytes: an upload whose answer was
	// lost may legitimately exist, misplaced it may not.
	Files   []File
	Deleted []string
	// Shallow skips the downloads and the re-hash of every copy, and takes
	// a copy's checksum from its node's listing (its sidecar) instead: a
	// cheap check to poll until it holds, before the full one.
	Shallow bool
	// Concurrency is how many calls run at once. Default 8.
	Concurrency int
}

func (o Options) withDefaults() (Options, error) {
	if o.API == nil {
		return o, errors.New("clustercheck: Options.API is required")
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if o.RF <= 0 {
		o.RF = 3
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	return o, nil
}

// Kind names the rule a violation breaks.
type Kind string

// The rules, in the order a report lists them.
const (
	// KindNode: a node could not be listed, so what it holds is unknown.
	KindNode Kind = "node"
	// KindRead: a file does not read back with the bytes it was stored with.
	KindRead Kind = "read"
	// KindStatus: a file's metadata is missing, not ACTIVE, or has another
	// checksum than the bytes uploaded.
	KindStatus Kind = "status"
	// KindPlacement: a file's copy rows are not exactly its preference list,
	// every one ACTIVE.
	KindPlacement Kind = "placement"
	// KindPrimary: a file's primary is not the first of its preference list.
	KindPrimary Kind = "primary"
	// KindCopy: an ACTIVE copy row whose node does not hold the blob, or
	// holds other bytes, or a sidecar that does not record them.
	KindCopy Kind = "copy"
	// KindOrphan: a node holds a blob that is no ACTIVE copy row of an
	// existing file on that node.
	KindOrphan Kind = "orphan"
	// KindDeleted: a deleted file still has metadata or a blob on a node.
	KindDeleted Kind = "deleted"
)

var kindOrder = []Kind{KindNode, KindRead, KindStatus, KindPlacement, KindPrimary, KindCopy, KindOrphan, KindDeleted}

// Violation is one broken rule.
type Violation struct {
	Kind   Kind
	File   string // empty when the violation is about a node
	Node   string // empty when it is about a file as a whole
	Detail string
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(string(v.Kind))
	if v.File != "" {
		b.WriteString(" file " + v.File)
	}
	if v.Node != "" {
		b.WriteString(" on " + v.Node)
	}
	b.WriteString(": " + v.Detail)
	return b.String()
}

// Report is the outcome of one check.
type Report struct {
	// Ring is the nodes on the coordinator's ring, sorted.
	Ring []string
	// Files counts the files checked; Unacknowledged those of them the
	// metadata lists but the caller did not name.
	Files, Unacknowledged int
	// Deleted counts the deleted files checked to be gone.
	Deleted int
	// Nodes counts the nodes listed; Blobs the blobs they hold together.
	Nodes, Blobs int
	// Shallow is Options.Shallow: no reads and no re-hashes were made.
	Shallow bool
	// Violations lists every broken rule, by kind, file and node.
	Violations []Violation
}

// OK reports whether the invariant holds.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Count returns the number of violations of kind k.
func (r Report) Count(k Kind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

// Summary is one line: what was checked and the violations by kind.
func (r Report) Summary() string {
	depth := "full"
	if r.Shallow {
		depth = "shallow"
	}
	s := fmt.Sprintf("%s check over ring %v: %d files (%d unacknowledged), %d deleted, %d blobs on %d nodes",
		depth, r.Ring, r.Files, r.Unacknowledged, r.Deleted, r.Blobs, r.Nodes)
	if r.OK() {
		return s + ": the invariant holds"
	}
	var parts []string
	for _, k := range kindOrder {
		if n := r.Count(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return fmt.Sprintf("%s: %d violations (%s)", s, len(r.Violations), strings.Join(parts, ", "))
}

// Lines returns the summary followed by the first limit violations, one a
// line, and a count of the rest; limit <= 0 lists every one.
func (r Report) Lines(limit int) string {
	var b strings.Builder
	b.WriteString(r.Summary())
	for i, v := range r.Violations {
		if limit > 0 && i == limit {
			fmt.Fprintf(&b, "\n  … and %d more", len(r.Violations)-limit)
			break
		}
		b.WriteString("\n  " + v.String())
	}
	return b.String()
}

// String is Lines with every violation.
func (r Report) String() string { return r.Lines(0) }

// Check checks the invariant once. The error is for a check that could not
// be made at all (bad options, a coordinator that cannot list its nodes or
// files); everything the check found wrong is in the report, including
// files and nodes that did not answer.
func Check(ctx context.Context, opts Options) (Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	ck := &checker{o: o, rep: Report{Shallow: o.Shallow}}
	return ck.run(ctx)
}

// checker is one run of Check.
type checker struct {
	o    Options
	ring *ring.Ring

	mu  sync.Mutex
	rep Report
}

func (c *checker) violate(k Kind, file, node, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rep.Violations = append(c.rep.Violations, Violation{Kind: k, File: file, Node: node, Detail: fmt.Sprintf(format, args...)})
}

// target is a file that must be stored: its expected checksum and, once
// read, its metadata.
type target struct {
	id     string
	sha    string
	acked  bool
	md     *client.File // nil when the metadata could not be read
	active map[string]bool
	// gone is set for a file the list had that was deleted before its
	// metadata was read: its blobs are looked up like unlisted ones.
	gone bool
}

func (c *checker) run(ctx context.Context) (Report, error) {
	nodes, err := c.o.API.Nodes(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("clustercheck: list the nodes: %w", err)
	}
	urls := maps.Clone(c.o.Nodes)
	if urls == nil {
		urls = map[string]string{}
	}
	var onRing []string
	for _, n := range nodes {
		if !n.OnRing {
			continue
		}
		onRing = append(onRing, n.NodeID)
		if _, ok := urls[n.NodeID]; !ok {
			urls[n.NodeID] = "http://" + n.Host + ":" + strconv.Itoa(n.Port)
		}
	}
	slices.Sort(onRing)
	c.rep.Ring = onRing
	info, err := c.o.API.Ring(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("clustercheck: read the ring: %w", err)
	}
	switch {
	case c.o.VNodes <= 0:
		c.o.VNodes = info.VirtualNodesPerNode
	case info.VirtualNodesPerNode != c.o.VNodes:
		return Report{}, fmt.Errorf("clustercheck: the coordinator places %d virtual nodes per node, the check was told %d", info.VirtualNodesPerNode, c.o.VNodes)
	}
	c.ring = ring.New(c.o.VNodes, onRing...)

	listed, err := c.listFiles(ctx)
	if err != nil {
		return Report{}, err
	}
	targets, deleted := c.targets(listed)
	c.rep.Files, c.rep.Deleted = len(targets), len(deleted)
	for _, t := range targets {
		if !t.acked {
			c.rep.Unacknowledged++
		}
	}

	c.each(len(targets), func(i int) { c.checkFile(ctx, targets[i]) })
	c.each(len(deleted), func(i int) { c.checkDeletedMetadata(ctx, deleted[i]) })

	// What every node holds, listed after the metadata was read: a blob
	// that appears in between is looked up on its own below.
	held := make(map[string]map[string]wire.BlobInfo, len(urls))
	ids := slices.Sorted(maps.Keys(urls))
	lists := make([]map[string]wire.BlobInfo, len(ids))
	c.each(len(ids), func(i int) {
		l, err := c.listBlobs(ctx, urls[ids[i]])
		if err != nil {
			c.violate(KindNode, "", ids[i], "cannot list its blobs: %v", err)
			return
		}
		lists[i] = l
	})
	for i, id := range ids {
		if lists[i] != nil {
			held[id] = lists[i]
			c.rep.Nodes++
			c.rep.Blobs += len(lists[i])
		}
	}

	byID := make(map[string]*target, len(targets))
	for _, t := range targets {
		byID[t.id] = t
	}
	type copyRef struct {
		t    *target
		node string
	}
	var copies []copyRef
	for _, t := range targets {
		for _, n := range slices.Sorted(maps.Keys(t.active)) {
			copies = append(copies, copyRef{t, n})
		}
	}
	c.each(len(copies), func(i int) {
		cp := copies[i]
		c.checkCopy(ctx, cp.t, cp.node, urls, held)
	})

	isDeleted := make(map[string]bool, len(deleted))
	for _, id := range deleted {
		isDeleted[id] = true
	}
	type blobRef struct{ node, id string }
	var unknown []blobRef
	for _, n := range ids {
		for _, id := range slices.Sorted(maps.Keys(held[n])) {
			switch t := byID[id]; {
			case isDeleted[id]:
				c.violate(KindDeleted, id, n, "the file was deleted, but the node still holds its blob")
			case t == nil || t.gone:
				unknown = append(unknown, blobRef{n, id})
			case t.md == nil:
				// Its metadata could not be read; that is reported already.
			case !t.active[n]:
				c.violate(KindOrphan, id, n, "the node holds the blob, but the metadata has no ACTIVE copy here (copy rows %s)", rows(t.md))
			}
		}
	}
	c.each(len(unknown), func(i int) { c.checkUnlisted(ctx, unknown[i].node, unknown[i].id) })

	slices.SortStableFunc(c.rep.Violations, func(a, b Violation) int {
		return cmp.Or(
			cmp.Compare(slices.Index(kindOrder, a.Kind), slices.Index(kindOrder, b.Kind)),
			cmp.Compare(a.File, b.File), cmp.Compare(a.Node, b.Node))
	})
	return c.rep, nil
}

// each runs fn(0) … fn(n-1), Concurrency at a time.
func (c *checker) each(n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.o.Concurrency, n) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

var allStatuses = []client.FileStatus{client.FilePending, client.FileActive, client.FileDegraded,
	client.FileRebalancing, client.FileFailed, client.FileDeleted}

// listFiles returns every file the metadata holds, in every status.
func (c *checker) listFiles(ctx context.Context) (map[string]client.File, error) {
	out := map[string]client.File{}
	for page := 0; ; page++ {
		l, err := c.o.API.List(ctx, page, 1000, allStatuses)
		if err != nil {
			return nil, fmt.Errorf("clustercheck: list the files (page %d): %w", page, err)
		}
		for _, f := range l.Items {
			out[f.FileID] = f
		}
		if len(l.Items) == 0 || (page+1)*1000 >= l.Total {
			return out, nil
		}
	}
}

// targets are the files that must be stored — the acknowledged ones and
// whatever else the metadata lists — and the deleted ones that must be gone.
func (c *checker) targets(listed map[string]client.File) ([]*target, []string) {
	deleted := slices.Clone(c.o.Deleted)
	slices.Sort(deleted)
	deleted = slices.Compact(deleted)
	seen := map[string]bool{}
	for _, id := range deleted {
		seen[id] = true
	}
	var out []*target
	for _, f := range c.o.Files {
		if seen[f.ID] {
			continue
		}
		seen[f.ID] = true
		out = append(out, &target{id: f.ID, sha: strings.ToLower(f.SHA256), acked: true})
	}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		if !seen[id] {
			out = append(out, &target{id: id, sha: listed[id].Checksum})
		}
	}
	return out, deleted
}

func isNotFound(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// checkFile checks one file's metadata against the ring and reads it back.
func (c *checker) checkFile(ctx context.Context, t *target) {
	md, err := c.o.API.Metadata(ctx, t.id)
	switch {
	case isNotFound(err) && t.acked:
		c.violate(KindStatus, t.id, "", "acknowledged, but the metadata does not know it (404)")
		return
	case isNotFound(err):
		t.gone = true // listed a moment ago and deleted since: nothing to hold
		return
	case err != nil:
		c.violate(KindStatus, t.id, "", "metadata: %v", err)
		return
	}
	t.md = &md
	t.active = map[string]bool{}
	for _, r := range md.Replicas {
		if r.Status == client.CopyActive {
			t.active[r.NodeID] = true
		}
	}
	if t.sha == "" {
		t.sha = md.Checksum
	}
	if md.Checksum != t.sha {
		c.violate(KindStatus, t.id, "", "the metadata's checksum is %s, the uploaded bytes' %s", md.Checksum, t.sha)
	}
	if md.Status != client.FileActive {
		reason := ""
		if md.Reason != "" {
			reason = " (" + md.Reason + ")"
		}
		c.violate(KindStatus, t.id, "", "status %s%s, want ACTIVE", md.Status, reason)
	}
	want := c.ring.Preference(t.id, c.o.RF)
	if !exactly(md.Replicas, want) {
		c.violate(KindPlacement, t.id, "", "copy rows %s, want exactly %v, every one ACTIVE", rows(&md), want)
	}
	if len(want) > 0 && md.PrimaryNode != want[0] {
		c.violate(KindPrimary, t.id, "", "primary %q, want %s, the first of the preference list %v", md.PrimaryNode, want[0], want)
	}
	if !c.o.Shallow {
		c.read(ctx, t)
	}
}

// exactly reports whether the copy rows are want's nodes, one each, all ACTIVE.
func exactly(replicas []client.Replica, want []string) bool {
	if len(replicas) != len(want) {
		return false
	}
	for _, r := range replicas {
		if r.Status != client.CopyActive || !slices.Contains(want, r.NodeID) {
			return false
		}
	}
	return true
}

// rows describes a file's copy rows as node:STATUS, in the order the
// metadata gave them.
func rows(md *client.File) string {
	parts := make([]string, len(md.Replicas))
	for i, r := range md.Replicas {
		parts[i] = r.NodeID + ":" + string(r.Status)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (c *checker) read(ctx context.Context, t *target) {
	h := sha256.New()
	info, err := c.o.API.Download(ctx, t.id, h, client.DownloadOptions{})
	if err != nil {
		c.violate(KindRead, t.id, "", "download: %v", err)
		return
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != t.sha {
		c.violate(KindRead, t.id, info.ServedBy, "read back bytes hashing to %s, want %s", got, t.sha)
	}
}

// checkDeletedMetadata requires a deleted file to be gone from the metadata.
func (c *checker) checkDeletedMetadata(ctx context.Context, id string) {
	md, err := c.o.API.Metadata(ctx, id)
	switch {
	case isNotFound(err):
	case err != nil:
		c.violate(KindDeleted, id, "", "metadata: %v", err)
	default:
		c.violate(KindDeleted, id, "", "deleted, but the metadata still has it as %s with copy rows %s", md.Status, rows(&md))
	}
}

// checkCopy requires an ACTIVE copy row's blob on its node, with the file's
// bytes and a sidecar that records them.
func (c *checker) checkCopy(ctx context.Context, t *target, node string, urls map[string]string, held map[string]map[string]wire.BlobInfo) {
	base, ok := urls[node]
	if !ok {
		c.violate(KindCopy, t.id, node, "an ACTIVE copy row on a node that is neither running nor on the ring")
		return
	}
	list, ok := held[node]
	if !ok {
		return // the node could not be listed; reported once for the node
	}
	info, ok := list[t.id]
	if !ok {
		c.violate(KindCopy, t.id, node, "an ACTIVE copy row, but the node does not hold the blob")
		return
	}
	if info.Checksum != t.sha {
		c.violate(KindCopy, t.id, node, "the node lists the blob with checksum %q (its sidecar), want %s", info.Checksum, t.sha)
		return
	}
	if c.o.Shallow {
		return
	}
	rep, status, err := c.rehash(ctx, base, t.id)
	switch {
	case err != nil:
		c.violate(KindCopy, t.id, node, "re-hash: %v", err)
	case status != http.StatusOK:
		c.violate(KindCopy, t.id, node, "re-hash answered %d", status)
	case rep.ActualChecksum != t.sha:
		c.violate(KindCopy, t.id, node, "the bytes on disk hash to %s, want %s", rep.ActualChecksum, t.sha)
	case rep.StoredChecksum != t.sha || !rep.Intact:
		c.violate(KindCopy, t.id, node, "the sidecar records %q, want %s (intact=%t)", rep.StoredChecksum, t.sha, rep.Intact)
	}
}

// checkUnlisted looks up a blob whose id the file list did not have: a file
// stored after the list was read is fine if this node holds an ACTIVE copy
// of it; anything else is an orphan.
func (c *checker) checkUnlisted(ctx context.Context, node, id string) {
	md, err := c.o.API.Metadata(ctx, id)
	switch {
	case isNotFound(err):
		c.violate(KindOrphan, id, node, "the node holds a blob no file of the metadata has")
	case err != nil:
		c.violate(KindOrphan, id, node, "the node holds a blob the file list does not have, and its metadata failed: %v", err)
	default:
		for _, r := range md.Replicas {
			if r.NodeID == node && r.Status == client.CopyActive {
				return
			}
		}
		c.violate(KindOrphan, id, node, "the node holds the blob, but the metadata (%s) has no ACTIVE copy here (copy rows %s)", md.Status, rows(&md))
	}
}

// get sends a GET to a node's internal API.
func (c *checker) get(ctx context.Context, target string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if c.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Token)
	}
	return c.o.HTTP.Do(req)
}

// listBlobs lists everything a node holds, page by page.
func (c *checker) listBlobs(ctx context.Context, base string) (map[string]wire.BlobInfo, error) {
	out := map[string]wire.BlobInfo{}
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(wire.MaxListLimit)}}
		if after != "" {
			q.Set("after", after)
		}
		resp, err := c.get(ctx, base+wire.PathBlobs+"?"+q.Encode())
		if err != nil {
			return nil, err
		}
		var page wire.BlobList
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s answered %s: %s", wire.PathBlobs, resp.Status, strings.TrimSpace(string(body)))
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("decode the blob list: %w", err)
		}
		for _, b := range page.Blobs {
			out[b.ID] = b
		}
		if page.Next == "" {
			return out, nil
		}
		after = page.Next
	}
}

// rehash asks a node to hash one blob's bytes again.
func (c *checker) rehash(ctx context.Context, base, id string) (wire.ChecksumReport, int, error) {
	resp, err := c.get(ctx, base+wire.ChecksumPath(id))
	if err != nil {
		return wire.ChecksumReport{}, 0, err
	}
	defer resp.Body.Close()
	var rep wire.ChecksumReport
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return rep, resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return rep, resp.StatusCode, fmt.Errorf("decode the re-hash: %w", err)
	}
	return rep, resp.StatusCode, nil
}
