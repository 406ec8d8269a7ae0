//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// rawResponse is what a hand-written request got back.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// rawRequest sends one request exactly as written, with target as the
// request line's target, so that nothing on the way cleans, escapes or
// re-encodes the path the server sees.
func rawRequest(t *testing.T, base, method, target string, header http.Header, body []byte) rawResponse {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(callTimeout)))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, u.Host)
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	// A server may answer and close before the whole body is sent (a
	// refused size, say); its answer is what counts.
	_, werr := conn.Write(b.Bytes())
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	require.NoError(t, err, "%s %.80s (sending it: %v)", method, target, werr)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: got}
}

// errorCodes are the stable codes an answer to bad input may carry.
var errorCodes = map[string]bool{
	"FILE_NOT_FOUND": true, "NODE_NOT_FOUND": true, "NOT_FOUND": true, "BLOB_NOT_FOUND": true,
	"INVALID_REQUEST": true, "METHOD_NOT_ALLOWED": true, "UNAUTHORIZED": true,
	"RANGE_NOT_SATISFIABLE": true, "FILE_TOO_LARGE": true, "CONFLICT": true,
}

// requireRefused requires a 4xx answer in the one error shape (HEAD answers
// carry no body to check).
func requireRefused(t *testing.T, r rawResponse, what string) string {
	t.Helper()
	require.True(t, r.status >= 400 && r.status < 500, "%s: status %d, body %s", what, r.status, r.body)
	if len(r.body) == 0 {
		return ""
	}
	var e struct {
		Timestamp string `json:"timestamp"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
		Message   string `json:"message"`
		Path      string `json:"path"`
	}
	require.NoError(t, json.Unmarshal(r.body, &e), "%s: not the error shape: %s", what, r.body)
	require.Equal(t, r.status, e.Status, "%s: %s", what, r.body)
	require.True(t, errorCodes[e.Error], "%s: unexpected code in %s", what, r.body)
	require.NotEmpty(t, e.Timestamp, what)
	return e.Error
}

// badIDs are path segments as sent on the wire: traversal in every
// spelling, encodings of separators and NUL, and ids of absurd length.
var badIDs = []string{
	"..", ".", "..%2F..", "..%2f..%2fetc%2fpasswd", "%2e%2e", "%2e%2e%2fetc", "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
	"..%5C..%5Cwindows", "%252e%252e%252f", "a%00b", "%00", "%ff%fe", "%20", "*", "~root", "$(id)", "%3Bls",
	strings.ToUpper(uuid.NewString()), "{" + uuid.NewString() + "}", uuid.NewString() + "%2F..",
	uuid.NewString() + "%00", strings.Repeat("a", 4096), strings.Repeat("%2e%2e%2f", 500),
}

// sentinel is a file outside every data directory that no request may
// reach; checkSentinels fails if one was removed or an unknown file appeared.
func plantSentinels(t *testing.T, c *cluster) map[string]bool {
	t.Helper()
	root := filepath.Dir(c.lc.DataDir("node-1"))
	for _, p := range []string{filepath.Join(root, "sentinel"), filepath.Join(filepath.Dir(root), "sentinel")} {
		require.NoError(t, os.WriteFile(p, []byte("keep"), 0o644))
	}
	return walkNames(t, filepath.Dir(root))
}

func walkNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Logs, the metadata store and blobs come and go; any other new
		// name (etc, passwd, evil, …) is a write that escaped.
		if !d.IsDir() && !strings.HasSuffix(path, ".log") && !strings.Contains(path, "metadata.db") &&
			!strings.Contains(path, string(filepath.Separator)+"node-") {
			names[path] = true
		}
		return nil
	}))
	return names
}

func TestHostileRequestsAreRefusedOnEveryRoute(t *testing.T) {
	t.Parallel()
	const token = "s3cret-cluster-token"
	c := startCluster(t, options{nodes: 3, token: token, coordEnv: []string{"MAX_FILE_SIZE=1MB"}})
	files := c.uploadRandom(3, 1000)
	before := plantSentinels(t, c)
	rebalancesBefore := len(c.logEntries(localcluster.CoordinatorName, "rebalance started"))
	auth := http.Header{"Authorization": {"Bearer " + token}}
	coord := c.lc.CoordinatorURL()

	t.Run("ids on the coordinator's routes", func(t *testing.T) {
		c := c.with(t)
		routes := []struct{ method, pattern string }{
			{"GET", "/api/files/%s"}, {"GET", "/api/files/%s/metadata"}, {"DELETE", "/api/files/%s"},
			{"POST", "/api/files/%s/verify"}, {"GET", "/api/nodes/%s"}, {"DELETE", "/api/nodes/%s"},
			{"DELETE", "/api/nodes/%s?wait=true"}, {"POST", "/api/nodes/%s/rejoin"},
		}
		for _, rt := range routes {
			for _, id := range badIDs {
				target := fmt.Sprintf(rt.pattern, id)
				requireRefused(t, rawRequest(t, coord, rt.method, target, nil, nil), rt.method+" "+target)
			}
		}
		// Dot segments that would reach another route if anything cleaned
		// the path.
		for _, target := range []string{
			"/api/files/../admin/rebalance", "/api/nodes/../admin/rebalance", "/api/files/%2e%2e/admin/rebalance",
			"/api/files/..%2Fadmin%2Frebalance", "/api/../api/admin/rebalance/..", "/api/files/../../etc/passwd",
			"/api/nodes/x/../../admin/health-check",
		} {
			requireRefused(t, rawRequest(t, coord, "POST", target, nil, nil), "POST "+target)
			requireRefused(t, rawRequest(t, coord, "GET", target, nil, nil), "GET "+target)
		}
		require.Len(t, c.logEntries(localcluster.CoordinatorName, "rebalance started"), rebalancesBefore,
			"a traversal reached the rebalance route")
	})

	t.Run("ids on the nodes' routes", func(t *testing.T) {
		c := c.with(t)
		node := c.nodeURL("node-1")
		body := []byte("evil")
		put := http.Header{"Authorization": {"Bearer " + token}, wire.HeaderChecksum: {sha256Hex(body)}}
		for _, id := range append(badIDs, "..%2Fsentinel", "..%2F..%2Fsentinel", "%2e%2e%2fsentinel", "abc", "ABCD", "-abc", "a.bc") {
			target := wire.PathBlobs + "/" + id
			for _, method := range []string{"GET", "HEAD", "DELETE"} {
				requireRefused(t, rawRequest(t, node, method, target, auth, nil), method+" "+target)
			}
			requireRefused(t, rawRequest(t, node, "PUT", target, put, body), "PUT "+target)
			requireRefused(t, rawRequest(t, node, "GET", target+"/checksum", auth, nil), "GET "+target+"/checksum")
		}
		for _, q := range []string{"after=..%2F..", "after=" + strings.Repeat("a", 200), "limit=0", "limit=-1",
			"limit=99999999999999999999", "limit=abc", "after=%00"} {
			requireRefused(t, rawRequest(t, node, "GET", wire.PathBlobs+"?"+q, auth, nil), "list "+q)
		}

		// A batch carries its ids raw, not as path segments: each is refused
		// on its own, and the batch answers every one.
		var batch []byte
		var ids []string
		for _, seg := range append(badIDs, "..%2Fsentinel", "..%2F..%2Fsentinel", "abc", "-abc", "a.bc", "..", "/etc/passwd") {
			id, err := url.PathUnescape(seg)
			if err != nil {
				id = seg
			}
			if len(id) > 0xffff {
				continue
			}
			ids = append(ids, id)
			batch, err = wire.AppendBatchFrame(batch, wire.BatchItem{ID: id, Checksum: sha256Hex(body), Data: body})
			require.NoError(t, err)
		}
		r := rawRequest(t, node, "POST", wire.PathBlobBatch, auth, batch)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var answer wire.BatchAnswer
		require.NoError(t, json.Unmarshal(r.body, &answer))
		require.Len(t, answer.Results, len(ids))
		for i, res := range answer.Results {
			require.Equal(t, http.StatusBadRequest, res.Status, "batched id %q: %+v", ids[i], res)
			require.Equal(t, "INVALID_REQUEST", res.Error, "batched id %q", ids[i])
		}
	})

	t.Run("internal calls need the cluster token", func(t *testing.T) {
		c := c.with(t)
		id := files[0].res.FileID
		holder := files[0].res.PrimaryNode
		node := c.nodeURL(holder)
		body := []byte("not yours")
		for _, authz := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Bearer ", token, "Basic " + token, "Token " + token} {
			h := http.Header{}
			if authz != "" {
				h.Set("Authorization", authz)
			}
			for _, call := range []struct{ method, target string }{
				{"GET", wire.PathBlobs}, {"GET", wire.PathStats}, {"GET", wire.BlobPath(id)}, {"HEAD", wire.BlobPath(id)},
				{"DELETE", wire.BlobPath(id)}, {"GET", wire.ChecksumPath(id)},
			} {
				r := rawRequest(t, node, call.method, call.target, h, nil)
				require.Equal(t, http.StatusUnauthorized, r.status, "%s %s with %q", call.method, call.target, authz)
				if call.method != "HEAD" {
					require.Equal(t, "UNAUTHORIZED", requireRefused(t, r, call.target))
				}
			}
			ph := h.Clone()
			ph.Set(wire.HeaderChecksum, sha256Hex(body))
			r := rawRequest(t, node, "PUT", wire.BlobPath("intruder-0001"), ph, body)
			require.Equal(t, http.StatusUnauthorized, r.status, "PUT with %q", authz)
			batch, err := wire.AppendBatchFrame(nil, wire.BatchItem{ID: "intruder-0002", Checksum: sha256Hex(body), Data: body})
			require.NoError(t, err)
			r = rawRequest(t, node, "POST", wire.PathBlobBatch, h, batch)
			require.Equal(t, http.StatusUnauthorized, r.status, "batch with %q", authz)

			reg, err := json.Marshal(client.RegisterRequest{NodeID: "intruder", Host: "127.0.0.1", Port: 1})
			require.NoError(t, err)
			rh := h.Clone()
			rh.Set("Content-Type", "application/json")
			r = rawRequest(t, coord, "POST", "/api/nodes/register", rh, reg)
			require.Equal(t, http.StatusUnauthorized, r.status, "register with %q", authz)
			require.Equal(t, "UNAUTHORIZED", requireRefused(t, r, "register"))
		}
		// Nothing happened: the blob is still there, nothing was written,
		// no intruder joined.
		require.Contains(t, c.blobs(holder), id)
		require.NotContains(t, c.blobs(holder), "intruder-0001")
		require.NotContains(t, c.nodes(), "intruder")
		c.mustRead(files[0])
		// The public side needs no token; health and metrics are open.
		for _, target := range []string{"/health/live", "/health/ready", "/metrics"} {
			require.Equal(t, 200, rawRequest(t, node, "GET", target, nil, nil).status, target)
		}
		require.Equal(t, 200, rawRequest(t, coord, "GET", "/api/files", nil, nil).status)
		// The right token re-announces a node as it is.
		n := c.nodes()[holder]
		reg, err := json.Marshal(client.RegisterRequest{NodeID: holder, Host: n.Host, Port: n.Port})
		require.NoError(t, err)
		h := auth.Clone()
		h.Set("Content-Type", "application/json")
		require.Equal(t, 200, rawRequest(t, coord, "POST", "/api/nodes/register", h, reg).status)
	})

	t.Run("range headers", func(t *testing.T) {
		f := files[1]
		size := len(f.data)
		cases := []struct {
			header     string
			status     int
			start, end int // the bytes expected, end exclusive
		}{
			{"bytes=0-0", 206, 0, 1},
			{"bytes=10-19", 206, 10, 20},
			{"bytes= 10-19 ", 206, 10, 20},
			{"bytes=999-", 206, 999, 1000},
			{"bytes=990-5000", 206, 990, 1000},
			{"bytes=-1", 206, 999, 1000},
			{"bytes=0-", 200, 0, size},
			{"bytes=-99999", 200, 0, size},
			{"bytes=1000-", 416, 0, 0},
			{"bytes=5000-6000", 416, 0, 0},
			{"bytes=-0", 416, 0, 0},
			{"bytes=9223372036854775807-", 416, 0, 0},
			{"bytes=5-2", 200, 0, size},
			{"bytes=0-99999999999999999999", 200, 0, size},
			{"bytes=-9223372036854775808", 200, 0, size},
			{"bytes=abc", 200, 0, size},
			{"bytes=", 200, 0, size},
			{"bytes=-", 200, 0, size},
			{"bytes=--1", 200, 0, size},
			{"bytes=+5-", 200, 0, size},
			{"bytes=0-+5", 200, 0, size},
			{"bytes=0-1,5-6", 200, 0, size},
			{"items=0-1", 200, 0, size},
			{"bytes=" + strings.Repeat("0-0,", 1500) + "0-0", 200, 0, size},
		}
		for _, tc := range cases {
			r := rawRequest(t, coord, "GET", "/api/files/"+f.res.FileID, http.Header{"Range": {tc.header}}, nil)
			name := fmt.Sprintf("Range %.60q", tc.header)
			require.Equal(t, tc.status, r.status, "%s: %s", name, r.body)
			switch tc.status {
			case 416:
				require.Equal(t, "RANGE_NOT_SATISFIABLE", requireRefused(t, r, name))
				require.Equal(t, fmt.Sprintf("bytes */%d", size), r.header.Get("Content-Range"), name)
			case 206:
				require.Equal(t, fmt.Sprintf("bytes %d-%d/%d", tc.start, tc.end-1, size), r.header.Get("Content-Range"), name)
				fallthrough
			default:
				require.Equal(t, f.data[tc.start:tc.end], r.body, name)
			}
		}
	})

	t.Run("page sizes", func(t *testing.T) {
		for _, q := range []string{"size=0", "size=-1", "size=1001", "size=99999999999999999999", "size=abc", "size=1.5",
			"page=-1", "page=abc", "page=99999999999999999999", "page=2147483647&size=1000", "page=9223372036854775807&size=1000",
			"status=BOGUS", "status=ACTIVE,NOPE", "size=-9223372036854775808"} {
			r := rawRequest(t, coord, "GET", "/api/files?"+q, nil, nil)
			require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", q, r.body)
			require.Equal(t, "INVALID_REQUEST", requireRefused(t, r, q))
		}
		for _, q := range []string{"size=1000", "size=1", "page=1000000&size=1", "page=2147483&size=1000", "status=", "status=ACTIVE,DELETED"} {
			r := rawRequest(t, coord, "GET", "/api/files?"+q, nil, nil)
			require.Equal(t, http.StatusOK, r.status, "%s: %s", q, r.body)
			var l client.FileList
			require.NoError(t, json.Unmarshal(r.body, &l), q)
			require.Equal(t, len(files), l.Total, q)
		}
	})

	t.Run("request ids", func(t *testing.T) {
		for _, id := range []string{strings.Repeat("x", 5000), "a b", "<script>", "line\tbreak"} {
			r := rawRequest(t, coord, "GET", "/api/files", http.Header{"X-Request-Id": {id}}, nil)
			require.Equal(t, 200, r.status)
			got := r.header.Get("X-Request-Id")
			require.NotEqual(t, id, got, "an unsafe request id was echoed")
			require.NotEmpty(t, got)
		}
	})

	// Nothing escaped a data directory, nothing was deleted outside one,
	// and the cluster is as it was.
	require.Equal(t, before, walkNames(t, filepath.Dir(filepath.Dir(c.lc.DataDir("node-1")))))
	c.waitOnRing(c.lc.Nodes()...)
	require.Len(t, c.files(), len(files))
	for _, f := range files {
		c.mustRead(f)
	}
}

// multipartBody lays out a multipart/form-data body with one part.
func multipartBody(boundary, field, filename string, data []byte) []byte {
	var b bytes.Buffer
	disp := mime.FormatMediaType("form-data", map[string]string{"name": field, "filename": filename})
	fmt.Fprintf(&b, "--%s\r\nContent-Disposition: %s\r\nContent-Type: application/octet-stream\r\n\r\n", boundary, disp)
	b.Write(data)
	fmt.Fprintf(&b, "\r\n--%s--\r\n", boundary)
	return b.Bytes()
}

// spoolFiles lists what the coordinator's upload spool holds.
func (c *cluster) spoolFiles() []string {
	c.t.Helper()
	entries, err := os.ReadDir(filepath.Join(c.lc.DataDir(localcluster.CoordinatorName), "spool"))
	require.NoError(c.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// requireNothingLeftBehind waits until no upload is in the spool or PENDING
// and every blob on the nodes is a copy the metadata records.
func (c *cluster) requireNothingLeftBehind() {
	c.t.Helper()
	nodes := c.lc.Nodes()
	eventually(c.t, settleTimeout, "nothing left behind", func() (bool, string) {
		spool, pending := c.spoolFiles(), c.files(client.FilePending)
		held, recorded := c.heldBlobs(nodes...), c.recordedCopies(nodes...)
		return len(spool) == 0 && len(pending) == 0 && equalPlacement(held, recorded),
			fmt.Sprintf("spool %v, %d PENDING, held %v, recorded %v", spool, len(pending), held, recorded)
	})
}

func TestBadUploadBodiesLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	c := startCluster(t, options{nodes: 3, coordEnv: []string{"MAX_FILE_SIZE=1MB"}})
	coord := c.lc.CoordinatorURL()
	const boundary = "b0undary"
	form := http.Header{"Content-Type": {"multipart/form-data; boundary=" + boundary}}
	data := randomBytes(64 << 10)
	full := multipartBody(boundary, "file", "f.bin", data)

	t.Run("malformed and truncated", func(t *testing.T) {
		c := c.with(t)
		cases := []struct {
			name   string
			header http.Header
			body   []byte
		}{
			{"not multipart", http.Header{"Content-Type": {"text/plain"}}, []byte("hello")},
			{"no content type", http.Header{}, full},
			{"no boundary", http.Header{"Content-Type": {"multipart/form-data"}}, full},
			{"another boundary", http.Header{"Content-Type": {"multipart/form-data; boundary=other"}}, full},
			{"garbage", form, []byte("garbage\r\n\r\n--")},
			{"empty body", form, []byte{}},
			{"no file part", form, multipartBody(boundary, "note", "n.txt", []byte("hi"))},
			{"truncated before the end", form, full[:len(full)/2]},
			{"no closing boundary", form, full[:len(full)-len(boundary)-6]},
			{"part header without end", form, []byte("--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"")},
			{"huge part header", form, append([]byte("--"+boundary+"\r\nX-Junk: "+strings.Repeat("j", 2<<20)+"\r\n\r\n"), full...)},
		}
		for _, tc := range cases {
			r := rawRequest(t, coord, "POST", "/api/files", tc.header, tc.body)
			code := requireRefused(t, r, tc.name)
			require.Contains(t, []string{"INVALID_REQUEST", "FILE_TOO_LARGE"}, code, tc.name)
		}
		c.requireNothingLeftBehind()
		require.Empty(t, c.files())
	})

	t.Run("sizes at and over the limit", func(t *testing.T) {
		c := c.with(t)
		at := c.mustUpload("at-limit.bin", randomBytes(limit))
		c.mustRead(at)
		_, err := c.upload("over-limit.bin", randomBytes(limit+1))
		requireAPIError(t, err, 413, "FILE_TOO_LARGE")
		// Sent chunked, with no length to refuse up front.
		ctx, cancel := callCtx()
		defer cancel()
		_, err = c.api.Upload(ctx, "chunked.bin", bytes.NewReader(randomBytes(2*limit)), -1, client.UploadOptions{})
		requireAPIError(t, err, 413, "FILE_TOO_LARGE")
		// A declared length far over the limit is refused before any
		// byte of the body is sent.
		h := form.Clone()
		h.Set("Content-Length", fmt.Sprint(100*limit))
		r := rawRequest(t, coord, "POST", "/api/files", h, nil)
		require.Equal(t, "FILE_TOO_LARGE", requireRefused(t, r, "declared length"))
		empty := c.mustUpload("empty.bin", nil)
		require.Zero(t, empty.res.SizeBytes)
		c.mustRead(empty)
		c.requireNothingLeftBehind()
		require.Len(t, c.files(), 2)
	})

	t.Run("hostile file names", func(t *testing.T) {
		for name, want := range map[string]string{
			"../../etc/passwd":      "passwd",
			`..\..\windows\win.ini`: "win.ini",
			"/":                     "file",
			"..":                    "file",
			"a\x01b\x7fc.txt":       "abc.txt",
		} {
			r := rawRequest(t, coord, "POST", "/api/files", form, multipartBody(boundary, "file", name, data))
			require.Equal(t, 201, r.status, "%q: %s", name, r.body)
			var res client.UploadResult
			require.NoError(t, json.Unmarshal(r.body, &res))
			require.Equal(t, want, res.FileName, "%q", name)
		}
		long := strings.Repeat("n", 1000)
		r := rawRequest(t, coord, "POST", "/api/files", form, multipartBody(boundary, "file", long, data))
		require.Equal(t, 201, r.status, "%s", r.body)
		var res client.UploadResult
		require.NoError(t, json.Unmarshal(r.body, &res))
		require.LessOrEqual(t, len(res.FileName), 255)
	})

	t.Run("client hangs up mid-body", func(t *testing.T) {
		c := c.with(t)
		before := len(c.files())
		big := multipartBody(boundary, "file", "cut.bin", randomBytes(512<<10))
		hangUp := func(head string, payload []byte) {
			u, err := url.Parse(coord)
			require.NoError(t, err)
			conn, err := net.Dial("tcp", u.Host)
			require.NoError(t, err)
			_, err = io.WriteString(conn, head)
			require.NoError(t, err)
			_, err = conn.Write(payload)
			require.NoError(t, err)
			require.NoError(t, conn.Close())
		}
		reqHead := func(extra string) string {
			return "POST /api/files HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=" + boundary + "\r\n" + extra + "\r\n"
		}
		hangUp(reqHead(fmt.Sprintf("Content-Length: %d\r\n", len(big))), big[:len(big)/3])
		hangUp(reqHead("Transfer-Encoding: chunked\r\n"), []byte(fmt.Sprintf("%x\r\n%s", len(big)/2, big[:len(big)/4])))
		hangUp(reqHead(fmt.Sprintf("Content-Length: %d\r\n", len(big))), big[:200]) // inside the part header
		c.requireNothingLeftBehind()
		require.Len(t, c.files(), before, "a cut-off upload was recorded")

		// A client that hangs up after the whole body, before the answer:
		// the upload finishes anyway and is whole.
		payload := randomBytes(256 << 10)
		hangUp(reqHead(fmt.Sprintf("Content-Length: %d\r\n", len(multipartBody(boundary, "file", "whole.bin", payload)))),
			multipartBody(boundary, "file", "whole.bin", payload))
		var finished client.File
		eventually(t, settleTimeout, "the abandoned but complete upload stored", func() (bool, string) {
			for _, f := range c.files(client.FileActive) {
				if f.FileName == "whole.bin" {
					finished = f
					return true, ""
				}
			}
			return false, "not listed yet"
		})
		require.Equal(t, sha256Hex(payload), finished.Checksum)
		c.mustRead(stored{data: payload, res: client.UploadResult{FileID: finished.FileID}})
		c.requireNothingLeftBehind()
	})
}
