package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

// dfs runs a command against url in-process, with -url given first.
func dfs(t *testing.T, url, stdin string, args ...string) (int, string, string) {
	t.Helper()
	full := append([]string{args[0], "-url", url}, args[1:]...)
	return runDFS(t, stdin, full...)
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// dirEntries lists the names in dir, to show that nothing half-written is
// left behind.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

var uuidAtStart = regexp.MustCompile(`(?m)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}  `)

func TestEveryClientCommandReportsAnUnreachableCoordinator(t *testing.T) {
	url := deadURL(t)
	file := writeFile(t, t.TempDir(), "a.txt", "a")
	for _, args := range [][]string{
		{"put", file}, {"get", "f1"}, {"ls"}, {"info", "f1"}, {"rm", "f1"}, {"verify", "f1"},
		{"nodes"}, {"nodes", "drain", "node-1"}, {"nodes", "rejoin", "node-1"}, {"health"}, {"rebalance"},
		{"status"}, {"nodes", "set", "node-1", "weight=2"}, {"nodes", "ring"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runDFS(t, "", append(args, "-url", url)...)
			require.Equal(t, exitUnreachable, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, "cannot reach the coordinator at "+url)
			require.Contains(t, stderr, "`make run`")
			require.Contains(t, stderr, "DFS_URL")
		})
	}
}

func TestUsageErrors(t *testing.T) {
	url := newFakeCoordinator(t).srv.URL
	dir := t.TempDir()
	a, b := writeFile(t, dir, "a", "a"), writeFile(t, dir, "b", "b")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"put without a file", []string{"put"}, "missing argument"},
		{"key with two files", []string{"put", "-key", "k", a, b}, "-key and -name need exactly one FILE"},
		{"get without an id", []string{"get"}, "missing argument"},
		{"get with two ids", []string{"get", "x", "y"}, `unexpected argument "y"`},
		{"json and stdout", []string{"get", "-json", "-o", "-", "x"}, "would both write to stdout"},
		{"ls with an argument that names no bucket", []string{"ls", "x"}, `"x" is not BUCKET or BUCKET/PREFIX`},
		{"ls with two arguments", []string{"ls", "abc", "def"}, `unexpected argument "def"`},
		{"bad flag", []string{"nodes", "-frobnicate"}, "flag provided but not defined"},
		{"bad page", []string{"ls", "-page", "one"}, `invalid value "one" for flag -page`},
		{"negative page", []string{"ls", "-page", "-1"}, "-page must be 0 or more, got -1"},
		{"size not a number", []string{"ls", "-size", "abc"}, `invalid value "abc" for flag -size`},
		{"size zero", []string{"ls", "-size", "0"}, "-size must be 1–1000, got 0"},
		{"size too large", []string{"ls", "-size", "1001"}, "-size must be 1–1000, got 1001"},
		{"unknown state", []string{"ls", "-status", "active,lost"}, `-status: unknown state "LOST"`},
		{"key with a space", []string{"put", "-key", "a b", a}, `-key: "a b": only printable ASCII without spaces`},
		{"key too long", []string{"put", "-key", strings.Repeat("k", 256), a}, "-key: longer than 255 characters"},
		{"bad content type", []string{"put", "-type", "text/", a}, `-type "text/" is not a content type`},
		{"bad boolean", []string{"get", "-f=maybe", "x"}, `invalid boolean value "maybe" for -f`},
		{"json with a value", []string{"nodes", "-json=perhaps"}, `invalid boolean value "perhaps" for -json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := dfs(t, url, "", tt.args...)
			require.Equal(t, exitUsage, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tt.want)
			require.Contains(t, stderr, "run `dfs "+tt.args[0]+" -h` for help")
		})
	}
}

func TestRequestsNameTheCLI(t *testing.T) {
	f := newFakeCoordinator(t)
	code, _, stderr := dfs(t, f.srv.URL, "", "health")
	require.Equal(t, exitOK, code, stderr)
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, "dfs-cli/"+buildinfo.Version(), f.userAgent)
}

func TestBadURLIsAUsageError(t *testing.T) {
	code, _, stderr := runDFS(t, "", "nodes", "-url", "ftp://somewhere")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "must look like http://host:port")
}

func TestURLComesFromTheEnvironment(t *testing.T) {
	f := newFakeCoordinator(t)
	t.Setenv("DFS_URL", f.srv.URL)
	code, stdout, stderr := runDFS(t, "", "health")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "UP")

	t.Setenv("DFS_URL", deadURL(t))
	code, _, _ = runDFS(t, "", "health", "-url", f.srv.URL)
	require.Equal(t, exitOK, code, "-url wins over DFS_URL")
}

// clientCommands are the commands that talk to a coordinator, as typed.
var clientCommands = [][]string{
	{"put"}, {"get"}, {"ls"}, {"info"}, {"rm"}, {"verify"}, {"nodes"}, {"nodes", "drain"}, {"nodes", "rejoin"},
	{"nodes", "set"}, {"nodes", "ring"}, {"health"}, {"rebalance"}, {"status"},
}

// Help asked for goes to stdout, in each of the ways to ask, so that it can
// be paged or searched.
func TestHelpIsOnStdoutAndDocumentsExitCodes(t *testing.T) {
	for _, name := range clientCommands {
		for _, args := range [][]string{
			append(slices.Clone(name), "-h"),
			append(slices.Clone(name), "-help"),
			append([]string{"help"}, name...),
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runDFS(t, "", args...)
				require.Equal(t, exitOK, code)
				require.Empty(t, stderr)
				require.Contains(t, stdout, "usage: dfs "+strings.Join(name, " "))
				require.Contains(t, stdout, "3 the\ncoordinator cannot be reached")
				require.Contains(t, stdout, "DFS_URL")
				require.Contains(t, stdout, "-json")
			})
		}
	}
}

func TestPut(t *testing.T) {
	f := newFakeCoordinator(t)
	dir := t.TempDir()
	a := writeFile(t, dir, "a.txt", "alpha")
	b := writeFile(t, dir, "b.bin", "bravo!")

	code, stdout, stderr := dfs(t, f.srv.URL, "", "put", a, b)
	require.Equal(t, exitOK, code, stderr)
	require.Empty(t, stderr, "no progress bar when stderr is not a terminal")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, uuidAtStart, lines[0])
	require.Contains(t, lines[0], "ACTIVE  a.txt  5 B  primary node-1, replicas node-2")
	require.Contains(t, lines[1], "b.bin  6 B")

	code, stdout, stderr = dfs(t, f.srv.URL, "piped bytes", "put", "-name", "notes.txt", "-type", "text/x-notes", "-json", "-")
	require.Equal(t, exitOK, code, stderr)
	var res client.UploadResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	require.Equal(t, "notes.txt", res.FileName)
	require.Equal(t, "text/x-notes", res.ContentType)
	require.Equal(t, int64(len("piped bytes")), res.SizeBytes)
}

func TestPutGoesOnAfterAFailedFile(t *testing.T) {
	f := newFakeCoordinator(t)
	dir := t.TempDir()
	good := writeFile(t, dir, "good", "g")
	code, stdout, stderr := dfs(t, f.srv.URL, "", "put", filepath.Join(dir, "missing"), dir, good)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "no such file or directory")
	require.Contains(t, stderr, "is not a regular file")
	require.Contains(t, stdout, "  good  ")
	require.Equal(t, 1, f.uploads)
}

func TestPutWarnsAboutADegradedFile(t *testing.T) {
	f := newFakeCoordinator(t)
	f.uploadStatus, f.uploadReason = client.FileDegraded, "2 of 3 copies written: node-3: connection refused"
	file := writeFile(t, t.TempDir(), "d", "d")
	code, stdout, stderr := dfs(t, f.srv.URL, "", "put", file)
	require.Equal(t, exitOK, code, "the file is stored")
	require.Contains(t, stdout, "DEGRADED")
	require.Contains(t, stderr, "node-3: connection refused")
}

func TestErrorAnswersGiveAdvice(t *testing.T) {
	tests := []struct {
		name    string
		route   string
		answer  fakeAnswer
		args    []string
		wantErr []string
	}{
		{"file too large", "POST /api/files", fakeAnswer{413, errs.CodeFileTooLarge, "request exceeds the maximum file size"},
			[]string{"put", "FILE"}, []string{"413 FILE_TOO_LARGE", "MAX_FILE_SIZE"}},
		{"no nodes", "POST /api/files", fakeAnswer{503, errs.CodeNoHealthyNodes, "no storage node is on the ring"},
			[]string{"put", "FILE"}, []string{"NO_HEALTHY_NODES", "`dfs nodes`"}},
		{"storage down", "GET /api/files/{id}/metadata", fakeAnswer{503, errs.CodeStorageUnavailable, "no holder answered"},
			[]string{"info", "x"}, []string{"no holder answered", "`dfs health`"}},
		{"metadata store down", "GET /api/nodes", fakeAnswer{503, errs.CodeMetadataUnavailable, "metadata store unavailable"},
			[]string{"nodes"}, []string{"DATABASE_URL"}},
		{"refused request", "GET /api/files", fakeAnswer{400, errs.CodeInvalidRequest, "page too far"},
			[]string{"ls", "-page", "99999"}, []string{"page too far (400 INVALID_REQUEST)"}},
		{"conflict", "DELETE /api/files/{id}", fakeAnswer{409, errs.CodeConflict, "the file is still PENDING"},
			[]string{"rm", "x"}, []string{"still PENDING", "409 CONFLICT"}},
		{"internal", "POST /api/admin/rebalance", fakeAnswer{500, errs.CodeInternal, "internal error"},
			[]string{"rebalance"}, []string{"log has the detail: look for request id req-fake-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeCoordinator(t)
			f.fail[tt.route] = tt.answer
			args := append([]string(nil), tt.args...)
			for i, a := range args {
				if a == "FILE" {
					args[i] = writeFile(t, t.TempDir(), "f", "data")
				}
			}
			code, stdout, stderr := dfs(t, f.srv.URL, "", args...)
			require.Equal(t, exitFailed, code, stderr)
			require.Empty(t, stdout)
			for _, want := range tt.wantErr {
				require.Contains(t, stderr, want)
			}
		})
	}
}

func TestNotACoordinator(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	code, _, stderr := runDFS(t, "", "ls", "-url", srv.URL)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "404 page not found (404)")
	require.Contains(t, stderr, "is "+srv.URL+" a dfs coordinator?")
}

func TestGet(t *testing.T) {
	f := newFakeCoordinator(t)
	id := f.add("report.pdf", []byte("%PDF-1.7 contents"))

	t.Run("into the current directory", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		code, stdout, stderr := dfs(t, f.srv.URL, "", "get", id)
		require.Equal(t, exitOK, code, stderr)
		require.Contains(t, stdout, "saved report.pdf (17 B, SHA-256 verified, served by node-2)")
		got, err := os.ReadFile(filepath.Join(dir, "report.pdf"))
		require.NoError(t, err)
		require.Equal(t, "%PDF-1.7 contents", string(got))
		require.Equal(t, []string{"report.pdf"}, dirEntries(t, dir))

		code, _, stderr = dfs(t, f.srv.URL, "", "get", id)
		require.Equal(t, exitFailed, code, "an existing file is not replaced")
		require.Contains(t, stderr, "report.pdf exists; use -f")
	})
	t.Run("answered from the content cache", func(t *testing.T) {
		f.mu.Lock()
		f.fromCache = true
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.fromCache = false; f.mu.Unlock() }()
		dir := t.TempDir()
		code, stdout, stderr := dfs(t, f.srv.URL, "", "get", "-o", filepath.Join(dir, "a"), id)
		require.Equal(t, exitOK, code, stderr)
		require.Contains(t, stdout, "saved "+filepath.Join(dir, "a")+" (17 B, SHA-256 verified, from the coordinator's content cache)")
		code, stdout, stderr = dfs(t, f.srv.URL, "", "get", "-json", "-o", filepath.Join(dir, "b"), id)
		require.Equal(t, exitOK, code, stderr)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &out))
		require.Equal(t, true, out["fromCache"])
		require.NotContains(t, out, "servedBy")
	})
	t.Run("flags after the id, into a directory", func(t *testing.T) {
		dir := t.TempDir()
		code, _, stderr := dfs(t, f.srv.URL, "", "get", id, "-o", dir)
		require.Equal(t, exitOK, code, stderr)
		require.FileExists(t, filepath.Join(dir, "report.pdf"))
	})
	t.Run("replace with -f", func(t *testing.T) {
		dir := t.TempDir()
		path := writeFile(t, dir, "old", "old contents")
		code, _, stderr := dfs(t, f.srv.URL, "", "get", "-o", path, id)
		require.Equal(t, exitFailed, code)
		require.Contains(t, stderr, "exists")
		got, _ := os.ReadFile(path)
		require.Equal(t, "old contents", string(got))

		code, stdout, stderr := dfs(t, f.srv.URL, "", "get", "-f", "-o", path, "-json", id)
		require.Equal(t, exitOK, code, stderr)
		got, _ = os.ReadFile(path)
		require.Equal(t, "%PDF-1.7 contents", string(got))
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(stdout), &out))
		require.Equal(t, true, out["verified"])
		require.Equal(t, path, out["path"])
		require.Equal(t, []string{"old"}, dirEntries(t, dir))
	})
	t.Run("to stdout", func(t *testing.T) {
		code, stdout, stderr := dfs(t, f.srv.URL, "", "get", "-o", "-", id)
		require.Equal(t, exitOK, code, stderr)
		require.Equal(t, "%PDF-1.7 contents", stdout)
		require.Empty(t, stderr)
	})
	t.Run("unknown file", func(t *testing.T) {
		dir := t.TempDir()
		code, _, stderr := dfs(t, f.srv.URL, "", "get", "-o", filepath.Join(dir, "x"), "0f8fad5b-d9cb-469f-a165-70867728950e")
		require.Equal(t, exitFailed, code)
		require.Contains(t, stderr, "404 FILE_NOT_FOUND")
		require.Contains(t, stderr, "`dfs ls`")
		require.Empty(t, dirEntries(t, dir))
	})
}

func TestGetLeavesNothingWhenTheBytesAreWrong(t *testing.T) {
	f := newFakeCoordinator(t)
	id := f.add("data.bin", bytes.Repeat([]byte("x"), 1000))
	f.corrupt = true
	dir := t.TempDir()
	code, stdout, stderr := dfs(t, f.srv.URL, "", "get", "-o", dir, id)
	require.Equal(t, exitFailed, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "not to the declared")
	require.Contains(t, stderr, "nothing was saved")
	require.Empty(t, dirEntries(t, dir), "neither the target nor a temporary file is left")
}

func TestLs(t *testing.T) {
	f := newFakeCoordinator(t)
	code, stdout, _ := dfs(t, f.srv.URL, "", "ls")
	require.Equal(t, exitOK, code)
	require.Equal(t, "no files on page 0 (0 in all)\n", stdout)

	first := f.add("first.txt", []byte("1"))
	second := f.add("second.txt", []byte("22"))
	f.add("third.txt", []byte("333"))

	code, stdout, stderr := dfs(t, f.srv.URL, "", "ls", "-size", "2")
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 4, stdout)
	require.Regexp(t, `^ID\s+STATUS\s+SIZE\s+CREATED\s+NAME$`, lines[0])
	require.Contains(t, lines[1], "third.txt", "newest first")
	require.Contains(t, lines[2], second)
	require.Equal(t, "files 1–2 of 3; next page: dfs ls -page 1", lines[3])

	code, stdout, _ = dfs(t, f.srv.URL, "", "ls", "-size", "2", "-page", "1", "-status", "active", "-json")
	require.Equal(t, exitOK, code)
	var list client.FileList
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Equal(t, 3, list.Total)
	require.Len(t, list.Items, 1)
	require.Equal(t, first, list.Items[0].FileID)
}

func TestInfo(t *testing.T) {
	f := newFakeCoordinator(t)
	id := f.add("a.txt", []byte("abc"))
	code, stdout, stderr := dfs(t, f.srv.URL, "", "info", id)
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^id\s+`+id+`$`, stdout)
	require.Regexp(t, `(?m)^sha256\s+ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad$`, stdout)
	require.Regexp(t, `(?m)^node-1\s+ACTIVE\s+yes\s`, stdout)
	require.Regexp(t, `(?m)^node-2\s+ACTIVE\s+\d{4}-`, stdout)

	code, stdout, _ = dfs(t, f.srv.URL, "", "info", "-json", id)
	require.Equal(t, exitOK, code)
	var file client.File
	require.NoError(t, json.Unmarshal([]byte(stdout), &file))
	require.Len(t, file.Replicas, 2)
}

func TestPutAndInfoSummariseAChunkedFilesCopies(t *testing.T) {
	f := newFakeCoordinator(t)
	f.chunkSize = 4
	dir := t.TempDir()
	path := filepath.Join(dir, "big.bin")
	require.NoError(t, os.WriteFile(path, []byte("0123456789"), 0o644))
	code, stdout, stderr := dfs(t, f.srv.URL, "", "put", path)
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `  ACTIVE  big.bin  10 B  3 chunks, 3 copies each on node-1, node-2, node-3\n$`, stdout)
	require.NotContains(t, stdout, "replicas none")
	id := strings.Fields(stdout)[0]

	f.mu.Lock()
	ch := f.files[id].meta.Chunks
	ch[1].Status, ch[1].Reason = client.FileDegraded, "node-2 is down"
	ch[1].Replicas[2].Status = client.CopyFailed
	f.mu.Unlock()
	code, stdout, stderr = dfs(t, f.srv.URL, "", "info", id)
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^copies\s+3 chunks, 2–3 copies each on node-1, node-2, node-3$`, stdout)
	require.Regexp(t, `(?m)^1\s+DEGRADED\s+node-3, node-1\s+node-2 is down$`, stdout)
	require.NotContains(t, stdout, "NODE", "a chunked file has no copy table of its own")
	require.NotRegexp(t, `(?m)^0\s`, stdout, "ACTIVE chunks are not listed")
}

func TestRm(t *testing.T) {
	f := newFakeCoordinator(t)
	id := f.add("a", []byte("a"))
	code, stdout, _ := dfs(t, f.srv.URL, "", "rm", id)
	require.Equal(t, exitOK, code)
	require.Equal(t, "deleted "+id+"\n", stdout)

	code, _, stderr := dfs(t, f.srv.URL, "", "rm", id)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "FILE_NOT_FOUND")

	f.deletePending = []string{"node-3"}
	id = f.add("b", []byte("b"))
	code, stdout, _ = dfs(t, f.srv.URL, "", "rm", id)
	require.Equal(t, exitOK, code, "the file is gone for readers")
	require.Contains(t, stdout, "the copies on node-3 will be removed when those nodes return")
}

func TestVerify(t *testing.T) {
	f := newFakeCoordinator(t)
	id := f.add("a", []byte("a"))
	code, stdout, stderr := dfs(t, f.srv.URL, "", "verify", id)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, id+"  ACTIVE, 2 good copies")
	require.Regexp(t, `(?m)^node-2\s+CORRUPT\s+yes\s+ACTIVE`, stdout)

	f.verifyStatus = client.FileDegraded
	code, stdout, stderr = dfs(t, f.srv.URL, "", "verify", id)
	require.Equal(t, exitFailed, code)
	require.Regexp(t, `(?m)^node-3\s+UNREACHABLE\s+connection refused`, stdout)
	require.Contains(t, stderr, "is DEGRADED after verification")
}

func TestNodes(t *testing.T) {
	f := newFakeCoordinator(t)
	code, stdout, stderr := dfs(t, f.srv.URL, "", "nodes")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "2 nodes known; the ring has 1 nodes × 100 virtual nodes per unit of weight, 100 points\n")
	require.Regexp(t, `(?m)^NODE\s+STATUS\s+ON RING\s+ZONE\s+WEIGHT\s+POINTS\s+SHARE\s+BLOBS\s`, stdout)
	require.Regexp(t, `(?m)^node-1\s+HEALTHY\s+yes\s+zone-a\s+1\s+100\s+32\.40 %\s+12\s+3\.0 MiB\s+5\.0 GiB\s+127\.0\.0\.1:9001\s+3s ago\s+0$`, stdout)
	require.Regexp(t, `(?m)^node-2\s+UNHEALTHY\s+no\s+-\s+1\s+-\s+-\s+-\s+-\s+-\s+127\.0\.0\.1:9002\s+never\s+4$`, stdout)
	require.NotContains(t, stdout, "set by an operator", "no legend without an override")

	code, stdout, _ = dfs(t, f.srv.URL, "", "nodes", "-json")
	require.Equal(t, exitOK, code)
	var nodes []client.Node
	require.NoError(t, json.Unmarshal([]byte(stdout), &nodes))
	require.Len(t, nodes, 2)
	require.Equal(t, "zone-a", nodes[0].Zone)
	require.Equal(t, 100, nodes[0].Points)
}

// dfs nodes set sends the operator's zone and weight, shows what is in force
// beside what the node reports, and dfs nodes marks the overrides until
// -reset drops them.
func TestNodesSet(t *testing.T) {
	f := newFakeCoordinator(t)
	code, stdout, stderr := runDFS(t, "", "nodes", "set", "-url", f.srv.URL, "node-1", "zone=rack-2", "weight=2.5")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, `{"zone":"rack-2","weight":2.5}`, f.placements[0])
	require.Regexp(t, `(?m)^node\s+node-1, HEALTHY$`, stdout)
	require.Regexp(t, `(?m)^zone\s+rack-2 \(set by an operator; the node reports zone-a\)$`, stdout)
	require.Regexp(t, `(?m)^weight\s+2\.5 \(set by an operator; the node reports 1\)$`, stdout)
	require.Regexp(t, `(?m)^ring\s+250 points, 0\.00 % of the keyspace$`, stdout)

	code, stdout, stderr = dfs(t, f.srv.URL, "", "nodes")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^node-1\s+HEALTHY\s+yes\s+rack-2\*\s+2\.5\*\s+250\s+32\.40 %`, stdout)
	require.Contains(t, stdout, "\n* set by an operator (`dfs nodes set`), not what the node reports; `dfs nodes set NODE -reset zone,weight` drops it\n")

	// zone= is an override to no zone; -reset drops the weight's.
	code, stdout, stderr = runDFS(t, "", "nodes", "set", "-url", f.srv.URL, "node-1", "zone=", "-reset", "weight")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, `{"zone":"","reset":["weight"]}`, f.placements[1])
	require.Regexp(t, `(?m)^zone\s+no zone \(set by an operator; the node reports zone-a\)$`, stdout)
	require.Regexp(t, `(?m)^weight\s+1 \(the node's own\)$`, stdout)
	code, stdout, _ = dfs(t, f.srv.URL, "", "nodes")
	require.Equal(t, exitOK, code)
	require.Regexp(t, `(?m)^node-1\s+HEALTHY\s+yes\s+-\*\s+1\s+100\s`, stdout)

	code, stdout, stderr = runDFS(t, "", "nodes", "set", "-url", f.srv.URL, "-reset", "zone,weight", "-json", "node-1")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, `{"reset":["zone","weight"]}`, f.placements[2])
	var n client.Node
	require.NoError(t, json.Unmarshal([]byte(stdout), &n))
	require.Equal(t, "zone-a", n.Zone)
	require.Empty(t, n.Overridden)
	code, stdout, _ = dfs(t, f.srv.URL, "", "nodes")
	require.Equal(t, exitOK, code)
	require.NotContains(t, stdout, "*")

	// A node off the ring keeps its settings for when it joins.
	code, stdout, stderr = runDFS(t, "", "nodes", "set", "-url", f.srv.URL, "node-2", "weight=3")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^zone\s+no zone \(the node's own\)$`, stdout)
	require.Regexp(t, `(?m)^weight\s+3 \(set by an operator; the node reports 1\)$`, stdout)

	// A node the coordinator does not know.
	code, stdout, stderr = runDFS(t, "", "nodes", "set", "-url", f.srv.URL, "node-9", "weight=2")
	require.Equal(t, exitFailed, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "NODE_NOT_FOUND")
	require.Contains(t, stderr, "`dfs nodes` lists the known storage nodes")
}

// A wrong dfs nodes set names what is wrong and sends nothing.
func TestNodesSetUsage(t *testing.T) {
	f := newFakeCoordinator(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"node-1"}, "nothing to change: give zone=<z>, weight=<w> or -reset zone,weight"},
		{[]string{}, "missing NODE: dfs nodes set NODE [zone=<z>] [weight=<w>] [-reset zone,weight]"},
		{[]string{"weight=2"}, "missing NODE"},
		{[]string{"node-1", "weight=heavy"}, `weight "heavy": must be a decimal > 0 and at most 1000`},
		{[]string{"node-1", "weight="}, `weight "": must be a decimal > 0 and at most 1000`},
		{[]string{"node-1", "weight=0"}, "weight 0: must be a decimal > 0 and at most 1000"},
		{[]string{"node-1", "weight=-2"}, "weight -2: must be a decimal > 0 and at most 1000"},
		{[]string{"node-1", "weight=1000.01"}, "weight 1000.01: must be a decimal > 0 and at most 1000"},
		{[]string{"node-1", "weight=NaN"}, "weight NaN: must be a decimal > 0"},
		{[]string{"node-1", "rack=r2"}, `unknown setting "rack=r2": want zone=<z> or weight=<w>`},
		{[]string{"node-1", "heavy"}, `unknown setting "heavy": want zone=<z> or weight=<w>`},
		{[]string{"node-1", "zone=a", "zone=b"}, "zone given twice"},
		{[]string{"node-1", "zone=rack 2"}, `zone "rack 2": no spaces or control characters`},
		{[]string{"node-1", "-reset", "rack"}, `reset "rack": want zone or weight`},
		{[]string{"node-1", "weight=2", "-reset", "weight"}, "weight both set and reset: give one"},
		{[]string{"node-1", "-frobnicate"}, "flag provided but not defined: -frobnicate"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runDFS(t, "", append([]string{"nodes", "set", "-url", f.srv.URL}, tt.args...)...)
			require.Equal(t, exitUsage, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, "dfs nodes set: "+tt.want)
			require.Contains(t, stderr, "run `dfs nodes set -h` for help")
		})
	}
	require.Empty(t, f.placements, "a refused command line sent a request")
}

// dfs nodes ring shows each node's zone, weight, points and share, then
// each zone's share, and says which nodes have no zone.
func TestNodesRing(t *testing.T) {
	f := newFakeCoordinator(t)
	f.ringInfo = client.RingInfo{PhysicalNodes: 4, VirtualNodesPerNode: 100, TotalRingPositions: 500,
		Nodes: []client.RingShare{
			{NodeID: "node-2", KeyspaceSharePercent: 40.12, Zone: "zone-a", Weight: 2, Points: 200},
			{NodeID: "node-1", KeyspaceSharePercent: 20.5, Zone: "zone-a", Weight: 1, Points: 100},
			{NodeID: "node-3", KeyspaceSharePercent: 20.1, Zone: "zone-b", Weight: 1, Points: 100},
			{NodeID: "node-4", KeyspaceSharePercent: 19.28, Weight: 1, Points: 100},
		},
		Zones: []client.ZoneShare{{Zone: "zone-a", KeyspaceSharePercent: 60.62, Nodes: 2}, {Zone: "zone-b", KeyspaceSharePercent: 20.1, Nodes: 1}}}
	code, stdout, stderr := runDFS(t, "", "nodes", "ring", "-url", f.srv.URL)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stdout, "the ring has 4 nodes × 100 virtual nodes per unit of weight, 500 points\n")
	require.Regexp(t, `(?m)^NODE\s+ZONE\s+WEIGHT\s+POINTS\s+SHARE$`, stdout)
	require.Regexp(t, `(?m)^node-2\s+zone-a\s+2\s+200\s+40\.12 %$`, stdout)
	require.Regexp(t, `(?m)^node-4\s+-\s+1\s+100\s+19\.28 %$`, stdout)
	require.Regexp(t, `(?m)^ZONE\s+NODES\s+SHARE$`, stdout)
	require.Regexp(t, `(?m)^zone-a\s+2\s+60\.62 %$`, stdout)
	require.Regexp(t, `(?m)^zone-b\s+1\s+20\.10 %$`, stdout)
	require.Contains(t, stdout, "of no zone, each a zone of its own: node-4\n")
	require.Less(t, strings.Index(stdout, "node-2"), strings.Index(stdout, "node-1"), "the coordinator's order, largest share first")

	code, stdout, _ = runDFS(t, "", "nodes", "ring", "-url", f.srv.URL, "-json")
	require.Equal(t, exitOK, code)
	var ring client.RingInfo
	require.NoError(t, json.Unmarshal([]byte(stdout), &ring))
	require.Equal(t, f.ringInfo, ring)

	f.ringInfo = client.RingInfo{PhysicalNodes: 1, VirtualNodesPerNode: 100, TotalRingPositions: 100,
		Nodes: []client.RingShare{{NodeID: "node-1", KeyspaceSharePercent: 100, Weight: 1, Points: 100}}}
	code, stdout, _ = runDFS(t, "", "nodes", "ring", "-url", f.srv.URL)
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "\nno node has a zone: each node is a zone of its own\n")
	require.NotContains(t, stdout, "ZONE  NODES")

	code, stdout, stderr = runDFS(t, "", "nodes", "ring", "-url", f.srv.URL, "extra")
	require.Equal(t, exitUsage, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `dfs nodes ring: unexpected argument "extra"`)
}

func TestNodesDrain(t *testing.T) {
	f := newFakeCoordinator(t)
	t.Run("in the background", func(t *testing.T) {
		f.drainLeft = 7
		code, stdout, stderr := runDFS(t, "", "nodes", "drain", "-url", f.srv.URL, "node-2")
		require.Equal(t, exitOK, code, stderr)
		require.Empty(t, stderr)
		require.Regexp(t, `(?m)^node\s+node-2, DEREGISTERED, off the ring$`, stdout)
		require.Regexp(t, `(?m)^drain\s+in progress: 7 files still to move$`, stdout)
		require.Regexp(t, `(?m)^this round\s+3 of 10 files, 3.0 MiB copied at 1.0 MiB/s, about 7s left$`, stdout)
		require.Regexp(t, `(?m)^uploads in flight\s+1 `, stdout)
		require.NotContains(t, stdout, "last round")
	})
	t.Run("waiting, complete", func(t *testing.T) {
		f.drainLeft = 0
		code, stdout, stderr := runDFS(t, "", "nodes", "drain", "-url", f.srv.URL, "node-2", "-wait")
		require.Equal(t, exitOK, code, stderr)
		require.Regexp(t, `(?m)^drain\s+complete: the node holds no file$`, stdout)
		require.Contains(t, stdout, "last round:")
		require.Regexp(t, `(?m)^trigger\s+DEREGISTERED$`, stdout)
		require.Regexp(t, `(?m)^copies created\s+4$`, stdout)
		require.Regexp(t, `(?m)^took\s+1.5s$`, stdout)
	})
	t.Run("waiting, files left", func(t *testing.T) {
		f.drainLeft = 2
		code, stdout, stderr := runDFS(t, "", "nodes", "drain", "-wait", "-json", "-url", f.srv.URL, "node-2")
		require.Equal(t, exitFailed, code, "a drain that did not finish fails a waiting script")
		require.Contains(t, stderr, "node-2 still holds 2 files after the coordinator's DRAIN_TIMEOUT")
		var res client.DeregisterResult
		require.NoError(t, json.Unmarshal([]byte(stdout), &res))
		require.False(t, res.Drain.Complete)
		require.Equal(t, 2, res.Drain.FilesRemaining)
		require.Equal(t, client.TriggerDeregistered, res.Drain.Run.Trigger)
	})
	f.mu.Lock()
	require.Equal(t, []string{"", "wait=true", "wait=true"}, f.drainQueries, "-wait, and only -wait, asks the coordinator to wait")
	f.mu.Unlock()

	t.Run("unknown node", func(t *testing.T) {
		code, stdout, stderr := runDFS(t, "", "nodes", "drain", "-json", "-url", f.srv.URL, "node-9")
		require.Equal(t, exitFailed, code)
		require.Contains(t, stderr, "`dfs nodes` lists the known storage nodes")
		require.Equal(t, []map[string]any{{"error": "NODE_NOT_FOUND", "message": "node node-9 not found", "status": float64(404),
			"requestId": "req-fake-1"}}, jsonValues(t, stdout))
	})
}

func TestNodesDrainRefusesUnsafeDrainsUnlessForced(t *testing.T) {
	f := newFakeCoordinator(t)
	f.drainUnsafe = []string{"only 2 node(s) would remain on the ring, fewer than the replication factor 3"}

	code, stdout, stderr := runDFS(t, "", "nodes", "drain", "-dry-run", "-url", f.srv.URL, "node-2")
	require.Equal(t, exitFailed, code, "an unsafe plan fails a script")
	require.Regexp(t, `(?m)^drain of\s+node-2: NOT safe \(dry run, nothing changed\)$`, stdout)
	require.Regexp(t, `(?m)^reason\s+only 2 node\(s\) would remain on the ring, fewer than the replication factor 3$`, stdout)
	require.Regexp(t, `(?m)^to copy\s+4 files, 6.0 MiB$`, stdout)
	require.Regexp(t, `(?m)^node-1\s+4\s+6.0 MiB\s+3.0 GiB$`, stdout)
	require.Regexp(t, `(?m)^node-3\s+1\s+1 B\s+unknown$`, stdout)
	require.Contains(t, stderr, "`dfs nodes drain -force node-2` drains it anyway")

	code, _, stderr = runDFS(t, "", "nodes", "drain", "-wait", "-url", f.srv.URL, "node-2")
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "UNSAFE_DRAIN")
	require.Contains(t, stderr, "fewer than the replication factor 3")
	require.Contains(t, stderr, "`dfs nodes drain -force ID` drains anyway")

	code, stdout, stderr = runDFS(t, "", "nodes", "drain", "-force", "-url", f.srv.URL, "node-2")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^node\s+node-2, DEREGISTERED, off the ring$`, stdout)

	f.drainUnsafe = nil
	code, stdout, stderr = runDFS(t, "", "nodes", "drain", "-dry-run", "-json", "-url", f.srv.URL, "node-1")
	require.Equal(t, exitOK, code, stderr)
	var p client.DrainPlan
	require.NoError(t, json.Unmarshal([]byte(stdout), &p))
	require.True(t, p.Safe)
	require.Len(t, p.Targets, 2)

	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(t, []string{"dryRun=true", "wait=true", "force=true", "dryRun=true"}, f.drainQueries)
	require.False(t, f.deregistered["node-1"], "a dry run deregisters nothing")
}

func TestNodesRejoin(t *testing.T) {
	f := newFakeCoordinator(t)
	code, _, stderr := runDFS(t, "", "nodes", "rejoin", "-url", f.srv.URL, "node-1")
	require.Equal(t, exitFailed, code, "node-1 is not drained")
	require.Contains(t, stderr, "not deregistered (409 CONFLICT)")

	code, _, stderr = runDFS(t, "", "nodes", "drain", "-url", f.srv.URL, "node-1")
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr := runDFS(t, "", "nodes", "rejoin", "-url", f.srv.URL, "node-1")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, "node-1 is UNHEALTHY; it joins the ring after enough good health checks (`dfs nodes` shows when)\n", stdout)

	code, _, _ = runDFS(t, "", "nodes", "drain", "-url", f.srv.URL, "node-1")
	require.Equal(t, exitOK, code)
	code, stdout, _ = runDFS(t, "", "nodes", "rejoin", "-json", "-url", f.srv.URL, "node-1")
	require.Equal(t, exitOK, code)
	var n client.Node
	require.NoError(t, json.Unmarshal([]byte(stdout), &n))
	require.Equal(t, client.NodeUnhealthy, n.Status)
}

func TestNodesSubcommandUsage(t *testing.T) {
	url := newFakeCoordinator(t).srv.URL
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"nodes", "-url", url, "drain", "node-1"}, "the subcommand comes first, flags after it: dfs nodes drain [flags] ID"},
		{[]string{"nodes", "-url", url, "set", "node-1", "weight=2"}, "the subcommand comes first, flags after it: dfs nodes set [flags] NODE [zone=<z>] [weight=<w>]"},
		{[]string{"nodes", "-json", "ring"}, "the subcommand comes first, flags after it: dfs nodes ring [flags]\n"},
		{[]string{"nodes", "cordon", "node-1"}, `unknown subcommand "cordon" (set, ring, drain or rejoin)`},
		{[]string{"nodes", "drain"}, "dfs nodes drain: missing argument"},
		{[]string{"nodes", "drain", "node-1", "node-2"}, `dfs nodes drain: unexpected argument "node-2"`},
		{[]string{"nodes", "drain", "-wait=soon", "node-1"}, `invalid boolean value "soon" for -wait`},
		{[]string{"nodes", "rejoin"}, "dfs nodes rejoin: missing argument"},
		{[]string{"nodes", "rejoin", "-wait", "node-1"}, "flag provided but not defined: -wait"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runDFS(t, "", tt.args...)
			require.Equal(t, exitUsage, code, stderr)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tt.want)
		})
	}
}

func TestHealthExitStatus(t *testing.T) {
	tests := []struct {
		status string
		code   int
	}{
		{client.HealthUp, exitOK},
		{client.HealthDegraded, exitFailed},
		{client.HealthDown, exitFailed}, // answered with 503, still a report
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) {
			f := newFakeCoordinator(t)
			f.health = client.HealthReport{Status: tt.status, Reasons: []string{"because"}, MetadataStore: client.ComponentState{Status: "UP", Kind: "sqlite"}}
			code, stdout, _ := dfs(t, f.srv.URL, "", "health")
			require.Equal(t, tt.code, code)
			require.Regexp(t, `(?m)^cluster\s+`+tt.status+`$`, stdout)
			require.Regexp(t, `(?m)^reason\s+because$`, stdout)
			require.Regexp(t, `(?m)^metadata store\s+UP \(sqlite\)$`, stdout)
		})
	}
}

func TestRebalance(t *testing.T) {
	f := newFakeCoordinator(t)
	f.rebalance = client.RebalanceReport{Trigger: client.TriggerManual, FilesScanned: 12, CopiesCreated: 5, UnrecoverableFiles: []string{}, DurationMs: 225}
	code, stdout, stderr := dfs(t, f.srv.URL, "", "rebalance")
	require.Equal(t, exitOK, code, stderr)
	require.Regexp(t, `(?m)^copies created\s+5$`, stdout)
	require.Regexp(t, `(?m)^took\s+225ms$`, stdout)
	require.NotContains(t, stdout, "skipped")

	f.rebalance.Skipped = true
	code, stdout, _ = dfs(t, f.srv.URL, "", "rebalance")
	require.Equal(t, exitOK, code)
	require.Regexp(t, `(?m)^skipped\s+another coordinator`, stdout)

	f.rebalance.Failures, f.rebalance.UnrecoverableFiles = 1, []string{"f9"}
	code, stdout, stderr = dfs(t, f.srv.URL, "", "rebalance", "-json")
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr, "1 failures, 1 unrecoverable files")
	var rep client.RebalanceReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	require.Equal(t, []string{"f9"}, rep.UnrecoverableFiles)
}

func TestCancelledPutStopsAtOnce(t *testing.T) {
	f := newFakeCoordinator(t)
	dir := t.TempDir()
	a, b := writeFile(t, dir, "a", "a"), writeFile(t, dir, "b", "b")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"put", "-url", f.srv.URL, a, b}, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	require.Equal(t, exitFailed, code)
	require.Equal(t, 1, strings.Count(errOut.String(), "interrupted; it was not stored"), "the second file is not tried:\n%s", errOut.String())
	require.Zero(t, f.uploads)
}

// jsonValues decodes every JSON value printed on stdout, in order.
func jsonValues(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var out []map[string]any
	for dec.More() {
		var v map[string]any
		require.NoError(t, dec.Decode(&v), "stdout:\n%s", stdout)
		out = append(out, v)
	}
	return out
}

// Under -json a failure is a JSON object on stdout, the exit status and the
// human message on stderr staying as they are.
func TestJSONErrors(t *testing.T) {
	const unknown = "0f8fad5b-d9cb-469f-a165-70867728950e"
	t.Run("unreachable", func(t *testing.T) {
		url := deadURL(t)
		file := writeFile(t, t.TempDir(), "a.txt", "a")
		for _, args := range [][]string{
			{"put", file}, {"get", "f1"}, {"ls"}, {"info", "f1"}, {"rm", "f1"}, {"verify", "f1"},
			{"nodes"}, {"nodes", "drain", "node-1"}, {"nodes", "rejoin", "node-1"}, {"health"}, {"rebalance"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runDFS(t, "", append(args, "-json", "-url", url)...)
				require.Equal(t, exitUnreachable, code, stderr)
				require.Contains(t, stderr, "cannot reach the coordinator", "stderr keeps the human message")
				values := jsonValues(t, stdout)
				require.Len(t, values, 1)
				require.Equal(t, "UNREACHABLE", values[0]["error"])
				require.Contains(t, values[0]["message"], "cannot reach the coordinator at "+url)
				require.NotContains(t, values[0], "status", "no answer, no status")
			})
		}
	})
	t.Run("error answers", func(t *testing.T) {
		f := newFakeCoordinator(t)
		for _, args := range [][]string{{"get", unknown}, {"info", unknown}, {"rm", unknown}, {"verify", unknown}} {
			t.Run(args[0], func(t *testing.T) {
				code, stdout, stderr := dfs(t, f.srv.URL, "", append(args, "-json")...)
				require.Equal(t, exitFailed, code)
				require.Contains(t, stderr, "`dfs ls`")
				require.Equal(t, []map[string]any{{
					"error": "FILE_NOT_FOUND", "message": "file " + unknown + " not found", "status": float64(404), "requestId": "req-fake-1",
				}}, jsonValues(t, stdout))
			})
		}
	})
	t.Run("an answer not in the API's shape", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		code, stdout, _ := runDFS(t, "", "ls", "-json", "-url", srv.URL)
		require.Equal(t, exitFailed, code)
		require.Equal(t, []map[string]any{{"error": "UNEXPECTED_ANSWER", "message": "404 page not found", "status": float64(404)}},
			jsonValues(t, stdout))
	})
	t.Run("corrupt download", func(t *testing.T) {
		f := newFakeCoordinator(t)
		id := f.add("data.bin", []byte("data"))
		f.corrupt = true
		code, stdout, _ := dfs(t, f.srv.URL, "", "get", "-json", "-o", t.TempDir(), id)
		require.Equal(t, exitFailed, code)
		values := jsonValues(t, stdout)
		require.Len(t, values, 1)
		require.Equal(t, "CHECKSUM_MISMATCH", values[0]["error"])
		require.Contains(t, values[0]["message"], "not to the declared")
	})
	t.Run("a local file in the way", func(t *testing.T) {
		f := newFakeCoordinator(t)
		id := f.add("a", []byte("a"))
		path := writeFile(t, t.TempDir(), "a", "old")
		code, stdout, _ := dfs(t, f.srv.URL, "", "get", "-json", "-o", path, id)
		require.Equal(t, exitFailed, code)
		values := jsonValues(t, stdout)
		require.Len(t, values, 1)
		require.Equal(t, "CONFLICT", values[0]["error"])
		require.NotContains(t, values[0], "status")
	})
	t.Run("put: one value per file", func(t *testing.T) {
		f := newFakeCoordinator(t)
		dir := t.TempDir()
		missing, good := filepath.Join(dir, "missing"), writeFile(t, dir, "good", "g")
		code, stdout, _ := dfs(t, f.srv.URL, "", "put", "-json", missing, good)
		require.Equal(t, exitFailed, code)
		values := jsonValues(t, stdout)
		require.Len(t, values, 2)
		require.Equal(t, "INVALID_REQUEST", values[0]["error"])
		require.Equal(t, missing, values[0]["file"])
		require.Contains(t, values[0]["message"], "no such file or directory")
		require.Equal(t, "good", values[1]["fileName"])

		f.fail["POST /api/files"] = fakeAnswer{413, errs.CodeFileTooLarge, "request exceeds the maximum file size"}
		code, stdout, _ = dfs(t, f.srv.URL, "", "put", "-json", good)
		require.Equal(t, exitFailed, code)
		require.Equal(t, []map[string]any{{"error": "FILE_TOO_LARGE", "message": "request exceeds the maximum file size",
			"status": float64(413), "requestId": "req-fake-1", "file": good}}, jsonValues(t, stdout))
	})
}

// dfs nodes -h says how to set and reset a zone and weight and what the
// listing's * and - mean.
func TestNodesHelpDocumentsPlacement(t *testing.T) {
	code, stdout, _ := runDFS(t, "", "nodes", "-h")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "dfs nodes set [flags] NODE [zone=<z>] [weight=<w>] [-reset zone,weight]")
	require.Contains(t, stdout, "`dfs nodes set NODE zone=<z> weight=<w>` sets one,\n`dfs nodes set NODE -reset zone,weight` drops it.")
	require.Contains(t, stdout, "A zone or weight marked *\nis an operator's override")
	require.Contains(t, stdout, "A\nzone of - is none")
	code, stdout, _ = runDFS(t, "", "nodes", "set", "-h")
	require.Equal(t, exitOK, code)
	require.Contains(t, stdout, "zone= (empty) is no zone")
	require.Contains(t, stdout, "a decimal > 0 and at most 1000")
	require.Contains(t, stdout, "-reset L")
}
