//go:build linux

package s3e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
)

// TestNamesThroughTheCLI stores and reads objects by name with the dfs
// command (through the REST API, authenticated by HTTP Basic) and checks
// that the S3 API serves the same objects, and the other way round; and
// makes, lists and revokes a key with dfs keys.
func TestNamesThroughTheCLI(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dfs := tool{t, []string{"HOME=" + t.TempDir(), "DFS_URL=" + c.lc.CoordinatorURL(), "DFS_ACCESS_KEY=" + rootKey, "DFS_SECRET_KEY=" + rootSecret}}
	bin := filepath.Join(binDir, localcluster.CLIBinary)
	src, files := tree(t)

	dfs.run(bin, "mb", "names")
	dfs.run(bin, "put", filepath.Join(src, "a.txt"), "names/docs/a.txt")
	dfs.run(bin, "put", "-r", src, "names/tree")
	ls := dfs.run(bin, "ls", "names/tree/")
	require.Regexp(t, `(?m)^PRE\s+tree/sub/\s*$`, ls, "one level, the deeper keys rolled up")
	require.Contains(t, ls, "tree/a.txt")
	require.NotContains(t, ls, "tree/sub/b.bin")
	require.Contains(t, dfs.run(bin, "ls", "-r", "names/tree/"), "tree/sub/c/d.txt")
	require.Contains(t, dfs.run(bin, "ls", "-buckets"), "names")

	out := filepath.Join(t.TempDir(), "big.bin")
	dfs.run(bin, "get", "names/tree/big.bin", "-o", out)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, files["big.bin"], got, "the bytes come back by name, SHA-256 verified")

	// The S3 API serves what the CLI stored, and the CLI what S3 stored.
	root := c.sdk(rootKey, rootSecret)
	obj, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("names"), Key: aws.String("tree/sub/c/d.txt")})
	require.Equal(t, files["sub/c/d.txt"], readAll(t, obj, err))
	_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("names"), Key: aws.String("from-s3.txt"), Body: strings.NewReader("via s3")})
	require.NoError(t, err)
	require.Equal(t, "via s3", dfs.run(bin, "get", "names/from-s3.txt", "-o", "-"))

	dfs.run(bin, "rm", "names/docs/a.txt")
	_, err = root.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("names"), Key: aws.String("docs/a.txt")})
	require.Error(t, err, "deleted by name")
	_, _, err = dfs.try(bin, "get", "names/docs/a.txt", "-o", "-")
	require.Error(t, err)

	// Another non-admin key may not use the bucket through REST either.
	// It is made, listed and revoked with dfs keys.
	created := dfs.run(bin, "keys", "create", "reader")
	m := regexp.MustCompile(`(?m)^access key  (\S+)\nsecret key  (\S+)$`).FindStringSubmatch(created)
	require.NotNil(t, m, created)
	ak, sk := m[1], m[2]
	require.Regexp(t, `(?m)^`+regexp.QuoteMeta(ak)+`\s+reader\s+false\s`, dfs.run(bin, "keys", "ls"))
	status, body := c.rest(http.MethodGet, "/api/buckets/names/objects", nil, ak, sk)
	require.Equal(t, http.StatusForbidden, status, string(body))
	status, _ = c.rest(http.MethodGet, "/api/buckets/names/object?key=from-s3.txt", nil, ak, sk)
	require.Equal(t, http.StatusForbidden, status)
	status, body = c.rest(http.MethodGet, "/api/buckets", nil, ak, sk)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "[]\n", string(body), "a key sees only its own buckets")
	require.Contains(t, dfs.run(bin, "keys", "rm", ak), "access key "+ak+" revoked")
	require.NotContains(t, dfs.run(bin, "keys", "ls"), ak)
	status, _ = c.rest(http.MethodGet, "/api/buckets", nil, ak, sk)
	require.Equal(t, http.StatusUnauthorized, status, "a revoked key is refused")
}
