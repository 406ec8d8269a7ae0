//go:build linux

package s3e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tree writes the local files the tools copy: small ones, one in a
// subdirectory, and one of 12 MiB, which every tool is told to send as a
// multipart upload of 5 MiB parts (three parts, the last one smaller).
func tree(t *testing.T) (string, map[string][]byte) {
	dir := t.TempDir()
	files := map[string][]byte{
		"a.txt":       []byte("hello from dfs\n"),
		"sub/b.bin":   random(100 << 10),
		"sub/c/d.txt": []byte("deeper\n"),
		"big.bin":     random(12 << 20),
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	return dir, files
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// tool runs a command-line client and returns its output; a failure fails
// the test with that output.
type tool struct {
	t   *testing.T
	env []string
}

// run returns what the command wrote to stdout, and its log (stderr).
func (tl tool) run(name string, args ...string) string {
	tl.t.Helper()
	out, log, err := tl.try(name, args...)
	require.NoError(tl.t, err, "%s %s:\n%s%s", name, strings.Join(args, " "), out, log)
	return out
}

// logOf runs the command and returns its stdout and stderr together.
func (tl tool) logOf(name string, args ...string) string {
	tl.t.Helper()
	out, log, err := tl.try(name, args...)
	require.NoError(tl.t, err, "%s %s:\n%s%s", name, strings.Join(args, " "), out, log)
	return out + log
}

func (tl tool) try(name string, args ...string) (string, string, error) {
	tl.t.Helper()
	// Debian's packages first (a developer's own installs, such as a
	// Python virtualenv's aws, may need the environment kept out below).
	path := filepath.Join("/usr/bin", name)
	if _, err := os.Stat(path); err != nil {
		path, err = exec.LookPath(name)
		require.NoError(tl.t, err, "%s is not installed (.ci/run installs it)", name)
	}
	cmd := exec.Command(path, args...)
	// A clean environment: a CA bundle or a credentials variable of the
	// developer's shell must not change what the tools do.
	cmd.Env = append([]string{"PATH=/usr/bin:/bin:" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}, tl.env...)
	var out, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &log
	err := cmd.Run()
	return out.String(), log.String(), err
}

func requireSameFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(b, got), "%s differs after the round trip", name)
	}
}

// TestStorageTools drives awscli, s3cmd, rclone and restic through one
// cluster: make a bucket, copy a tree up and down byte-exact, list by
// prefix, sync again without moving anything, read a range, copy on the
// server, delete, and a restic backup, check --read-data and restore.
func TestStorageTools(t *testing.T) {
	c := startCluster(t)
	home := t.TempDir()
	src, files := tree(t)
	base := []string{"HOME=" + home, "AWS_ACCESS_KEY_ID=" + rootKey, "AWS_SECRET_ACCESS_KEY=" + rootSecret, "AWS_DEFAULT_REGION=" + region}

	awsConfig := filepath.Join(home, "aws-config")
	require.NoError(t, os.WriteFile(awsConfig, []byte("[default]\ns3 =\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n  addressing_style = path\n"), 0o600))
	awsEnv := append(base, "AWS_CONFIG_FILE="+awsConfig, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "none"))
	ep := []string{"--endpoint-url", c.s3URL}
	// head is head-object's answer, through awscli, for the other tools' objects.
	head := func(t *testing.T, bucket, key string) string {
		return tool{t, awsEnv}.run("aws", append(ep, "s3api", "head-object", "--bucket", bucket, "--key", key)...)
	}

	t.Run("awscli", func(t *testing.T) {
		aws := tool{t, awsEnv}
		s3 := func(args ...string) string { return aws.run("aws", append(ep, args...)...) }
		s3("s3", "mb", "s3://aws-bucket")
		s3("s3", "sync", src, "s3://aws-bucket/tree/")
		requireMultipartETag(t, head(t, "aws-bucket", "tree/big.bin"), 3)
		require.Empty(t, strings.TrimSpace(s3("s3", "sync", src, "s3://aws-bucket/tree/")), "a second sync moves nothing")
		ls := s3("s3", "ls", "s3://aws-bucket/tree/")
		require.Contains(t, ls, "PRE sub/")
		require.Contains(t, ls, "a.txt")
		require.NotContains(t, ls, "d.txt", "a listing by prefix rolls the deeper keys up")
		down := t.TempDir()
		s3("s3", "sync", "s3://aws-bucket/tree/", down)
		requireSameFiles(t, down, files)
		part := filepath.Join(down, "range")
		s3("s3api", "get-object", "--bucket", "aws-bucket", "--key", "tree/big.bin", "--range", "bytes=1000-1999", part)
		got, err := os.ReadFile(part)
		require.NoError(t, err)
		require.Equal(t, files["big.bin"][1000:2000], got)
		s3("s3", "cp", "s3://aws-bucket/tree/a.txt", "s3://aws-bucket/copy.txt")
		require.Equal(t, string(files["a.txt"]), s3("s3", "cp", "s3://aws-bucket/copy.txt", "-"))
		// Above the threshold, a server-side copy is a multipart copy
		// (UploadPartCopy of 5 MiB ranges).
		s3("s3", "cp", "s3://aws-bucket/tree/big.bin", "s3://aws-bucket/copy.bin")
		requireMultipartETag(t, head(t, "aws-bucket", "copy.bin"), 3)
		big := filepath.Join(down, "copy.bin")
		s3("s3", "cp", "s3://aws-bucket/copy.bin", big)
		got, err = os.ReadFile(big)
		require.NoError(t, err)
		require.True(t, bytes.Equal(files["big.bin"], got), "the multipart copy holds the source's bytes")
		// An upload left open, listed a level at a time.
		created := s3("s3api", "create-multipart-upload", "--bucket", "aws-bucket", "--key", "open/upload.bin")
		var mp struct{ UploadId string }
		require.NoError(t, json.Unmarshal([]byte(created), &mp))
		var listed struct {
			Uploads        []struct{ Key, UploadId string }
			CommonPrefixes []struct{ Prefix string }
		}
		require.NoError(t, json.Unmarshal([]byte(s3("s3api", "list-multipart-uploads", "--bucket", "aws-bucket", "--delimiter", "/")), &listed))
		require.Empty(t, listed.Uploads)
		require.Len(t, listed.CommonPrefixes, 1)
		require.Equal(t, "open/", listed.CommonPrefixes[0].Prefix)
		require.NoError(t, json.Unmarshal([]byte(s3("s3api", "list-multipart-uploads", "--bucket", "aws-bucket", "--delimiter", "/", "--prefix", "open/")), &listed))
		require.Len(t, listed.Uploads, 1)
		require.Equal(t, mp.UploadId, listed.Uploads[0].UploadId)
		require.Equal(t, "open/upload.bin", listed.Uploads[0].Key)
		s3("s3api", "abort-multipart-upload", "--bucket", "aws-bucket", "--key", "open/upload.bin", "--upload-id", mp.UploadId)
		// What teardowns that empty a bucket version by version read.
		var versions struct {
			Versions []struct{ Key, VersionId string }
		}
		require.NoError(t, json.Unmarshal([]byte(s3("s3api", "list-object-versions", "--bucket", "aws-bucket", "--prefix", "tree/")), &versions))
		require.Len(t, versions.Versions, len(files))
		for _, v := range versions.Versions {
			require.Equal(t, "null", v.VersionId, v.Key)
		}
		s3("s3api", "delete-object", "--bucket", "aws-bucket", "--key", "copy.txt", "--version-id", "null")
		s3("s3", "rm", "--recursive", "s3://aws-bucket/")
		require.Empty(t, strings.TrimSpace(s3("s3", "ls", "--recursive", "s3://aws-bucket/")))
		s3("s3", "rb", "s3://aws-bucket")
	})

	t.Run("s3cmd", func(t *testing.T) {
		s3cmd := s3cmdWith(t, c, home, base, "s3cfg", "bucket_location = us-east-1\nsignature_v2 = False\nenable_multipart = True\nmultipart_chunk_size_mb = 5\n")
		s3cmd("mb", "s3://s3cmd-bucket")
		s3cmd("sync", src+"/", "s3://s3cmd-bucket/tree/")
		requireMultipartETag(t, head(t, "s3cmd-bucket", "tree/big.bin"), 3)
		again := s3cmd("sync", src+"/", "s3://s3cmd-bucket/tree/")
		require.NotContains(t, again, "upload:", "a second sync moves nothing")
		ls := s3cmd("ls", "s3://s3cmd-bucket/tree/")
		require.Contains(t, ls, "DIR  s3://s3cmd-bucket/tree/sub/")
		down := t.TempDir()
		s3cmd("sync", "s3://s3cmd-bucket/tree/", down+"/")
		requireSameFiles(t, down, files)
		s3cmd("cp", "s3://s3cmd-bucket/tree/sub/b.bin", "s3://s3cmd-bucket/copy.bin")
		s3cmd("get", "s3://s3cmd-bucket/copy.bin", filepath.Join(down, "copy.bin"))
		got, err := os.ReadFile(filepath.Join(down, "copy.bin"))
		require.NoError(t, err)
		require.Equal(t, files["sub/b.bin"], got)
		// s3cmd has no range option; --continue resumes a partial file with
		// a ranged GET (Range: bytes=N-) for the bytes it lacks.
		partial := filepath.Join(down, "partial.bin")
		require.NoError(t, os.WriteFile(partial, files["sub/b.bin"][:40000], 0o644))
		s3cmd("get", "--continue", "s3://s3cmd-bucket/tree/sub/b.bin", partial)
		got, err = os.ReadFile(partial)
		require.NoError(t, err)
		require.True(t, bytes.Equal(files["sub/b.bin"], got), "the resumed file is byte-exact")
		require.True(t, c.served(http.MethodGet, "/s3cmd-bucket/tree/sub/b.bin", http.StatusPartialContent), "s3cmd resumed with a ranged GET")
		s3cmd("del", "--recursive", "--force", "s3://s3cmd-bucket/")
		s3cmd("rb", "s3://s3cmd-bucket")
	})

	// s3cmd as installed: bucket_location US, which it signs the first
	// request for, then signs again for the <Region> the error names.
	t.Run("s3cmd-default", func(t *testing.T) {
		s3cmd := s3cmdWith(t, c, home, base, "s3cfg-default", "")
		s3cmd("mb", "s3://s3cmd-default")
		s3cmd("put", filepath.Join(src, "a.txt"), "s3://s3cmd-default/a.txt")
		require.Contains(t, s3cmd("ls", "s3://s3cmd-default/"), "s3://s3cmd-default/a.txt")
		require.Equal(t, files["a.txt"], s3cmdGet(t, s3cmd, "s3://s3cmd-default/a.txt"))
		require.Contains(t, s3cmd("info", "s3://s3cmd-default/a.txt"), "MD5 sum:")
		s3cmd("del", "s3://s3cmd-default/a.txt")
		s3cmd("rb", "s3://s3cmd-default")
	})

	// s3cmd signing with Signature V2, multipart included, and the V2
	// presigned URL of its signurl.
	t.Run("s3cmd-v2", func(t *testing.T) {
		s3cmd := s3cmdWith(t, c, home, base, "s3cfg-v2", "signature_v2 = True\nmultipart_chunk_size_mb = 5\n")
		s3cmd("mb", "s3://s3cmd-v2")
		s3cmd("put", filepath.Join(src, "big.bin"), "s3://s3cmd-v2/big.bin")
		requireMultipartETag(t, head(t, "s3cmd-v2", "big.bin"), 3)
		s3cmd("put", filepath.Join(src, "a.txt"), "s3://s3cmd-v2/a b.txt")
		require.Contains(t, s3cmd("ls", "s3://s3cmd-v2/"), "s3://s3cmd-v2/a b.txt")
		require.True(t, bytes.Equal(files["big.bin"], s3cmdGet(t, s3cmd, "s3://s3cmd-v2/big.bin")), "big.bin is byte-exact")
		signed := strings.TrimSpace(s3cmd("signurl", "s3://s3cmd-v2/a b.txt", "+300"))
		require.Contains(t, signed, "AWSAccessKeyId=")
		resp, err := http.Get(signed)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", signed, body)
		require.Equal(t, files["a.txt"], body)
		tampered := strings.Replace(signed, "a%20b.txt", "big.bin", 1)
		resp, err = http.Get(tampered)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "a V2 URL signed for another key: %s", tampered)
		s3cmd("del", "--recursive", "--force", "s3://s3cmd-v2/")
		s3cmd("rb", "s3://s3cmd-v2")
	})

	t.Run("rclone", func(t *testing.T) {
		rc := tool{t, append(base, "RCLONE_CONFIG_DFS_TYPE=s3", "RCLONE_CONFIG_DFS_PROVIDER=Other", "RCLONE_CONFIG_DFS_ACCESS_KEY_ID="+rootKey, "RCLONE_CONFIG_DFS_SECRET_ACCESS_KEY="+rootSecret,
			"RCLONE_CONFIG_DFS_ENDPOINT="+c.s3URL, "RCLONE_CONFIG_DFS_REGION="+region, "RCLONE_S3_UPLOAD_CUTOFF=5M", "RCLONE_S3_CHUNK_SIZE=5M")}
		rclone := func(args ...string) string {
			return rc.run("rclone", append([]string{"--config", filepath.Join(home, "none.conf")}, args...)...)
		}
		rclone("mkdir", "dfs:rclone-bucket")
		rclone("sync", src, "dfs:rclone-bucket/tree")
		rclone("check", src, "dfs:rclone-bucket/tree")
		requireMultipartETag(t, head(t, "rclone-bucket", "tree/big.bin"), 3)
		again := rc.logOf("rclone", "--config", filepath.Join(home, "none.conf"), "sync", "-v", src, "dfs:rclone-bucket/tree")
		require.NotContains(t, again, "Copied", "a second sync moves nothing:\n%s", again)
		require.Equal(t, "a.txt\nbig.bin\nsub/\n", rclone("lsf", "dfs:rclone-bucket/tree"))
		down := t.TempDir()
		rclone("copy", "dfs:rclone-bucket/tree", down)
		requireSameFiles(t, down, files)
		require.Equal(t, string(files["a.txt"][6:10]), rclone("cat", "--offset", "6", "--count", "4", "dfs:rclone-bucket/tree/a.txt"))
		rclone("copyto", "dfs:rclone-bucket/tree/a.txt", "dfs:rclone-bucket/copied.txt")
		require.Equal(t, string(files["a.txt"]), rclone("cat", "dfs:rclone-bucket/copied.txt"))
		rclone("purge", "dfs:rclone-bucket")
		out, _, err := rc.try("rclone", "--config", filepath.Join(home, "none.conf"), "lsf", "dfs:rclone-bucket")
		require.Error(t, err, "the bucket is gone: %s", out)
	})

	t.Run("restic", func(t *testing.T) {
		rs := tool{t, append(base, "RESTIC_REPOSITORY=s3:"+c.s3URL+"/restic-bucket", "RESTIC_PASSWORD=correct horse battery staple",
			"RESTIC_CACHE_DIR="+filepath.Join(home, "restic-cache"))}
		rs.run("restic", "init")
		rs.run("restic", "backup", "--host", "test", src)
		rs.run("restic", "check", "--read-data")
		target := t.TempDir()
		rs.run("restic", "restore", "latest", "--target", target)
		requireSameFiles(t, filepath.Join(target, src), files)
	})
}

// s3cmdWith writes an s3cmd configuration for the cluster under home, with
// settings (lines of key = value) beyond the endpoint and the root key, and
// returns s3cmd run with it.
func s3cmdWith(t *testing.T, c *cluster, home string, env []string, name, settings string) func(args ...string) string {
	host := strings.TrimPrefix(c.s3URL, "http://")
	cfg := filepath.Join(home, name)
	require.NoError(t, os.WriteFile(cfg, []byte("[default]\naccess_key = "+rootKey+"\nsecret_key = "+rootSecret+
		"\nhost_base = "+host+"\nhost_bucket = "+host+"\nuse_https = False\n"+settings), 0o600))
	return func(args ...string) string {
		return tool{t, env}.run("s3cmd", append([]string{"-c", cfg}, args...)...)
	}
}

// s3cmdGet downloads an object with s3cmd and returns its bytes.
func s3cmdGet(t *testing.T, s3cmd func(args ...string) string, object string) []byte {
	got := filepath.Join(t.TempDir(), "got")
	s3cmd("get", object, got)
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	return b
}

// requireMultipartETag checks that head-object's JSON answer carries the
// ETag of a multipart upload of parts parts: hex MD5, a dash, the count.
func requireMultipartETag(t *testing.T, headObject string, parts int) {
	t.Helper()
	var head struct{ ETag string }
	require.NoError(t, json.Unmarshal([]byte(headObject), &head), headObject)
	require.Regexp(t, fmt.Sprintf(`^"[0-9a-f]{32}-%d"$`, parts), head.ETag)
}
