package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
)

// TestDirectReadsFromTheNodes: the coordinator hands out URLs signed for
// each blob of a file; a client reads the blobs straight from the nodes
// with them, without the cluster token, until SIGNED_URL_TTL has passed;
// an altered URL is refused; a damaged or stopped node costs a try of the
// next URL; `dfs get` reads this way by default.
func TestDirectReadsFromTheNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, options{nodes: 3, token: "direct-reads-token", coordEnv: []string{
		"CHUNK_SIZE=1MiB", "SIGNED_URL_TTL=3s", "REPAIR_INTERVAL=1h",
	}})
	data := randomBytes(5 << 19) // 2.5 MiB: three chunks
	f := c.mustUpload("direct.bin", data)
	ctx, cancel := callCtx()
	defer cancel()

	loc, err := c.api.Locations(ctx, f.res.FileID)
	require.NoError(t, err)
	require.Len(t, loc.Blobs, 3)
	require.NotNil(t, loc.ExpiresAt)
	require.WithinDuration(t, time.Now().Add(3*time.Second), *loc.ExpiresAt, 2*time.Second, "SIGNED_URL_TTL sets the expiry")
	var offset int64
	for _, b := range loc.Blobs {
		require.Equal(t, offset, b.Offset)
		require.Len(t, b.URLs, 3, "every holder, in read order")
		offset += b.SizeBytes
	}
	get := func(u string, header http.Header) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	b1 := loc.Blobs[1]
	status, body := get(b1.URLs[0], nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Equal(t, data[b1.Offset:b1.Offset+b1.SizeBytes], body, "a signed URL reads its blob without the token")
	status, body = get(b1.URLs[0], http.Header{"Range": {"bytes=10-19"}})
	require.Equal(t, http.StatusPartialContent, status)
	require.Equal(t, data[b1.Offset+10:b1.Offset+20], body)
	other := loc.Blobs[0].URLs[0]
	forged := other[:strings.Index(other, "?")] + b1.URLs[0][strings.Index(b1.URLs[0], "?"):]
	status, body = get(forged, nil)
	require.Equal(t, http.StatusForbidden, status, "another blob's signature: %s", body)
	status, _ = get(b1.URLs[0][:strings.Index(b1.URLs[0], "?")], nil)
	require.Equal(t, http.StatusUnauthorized, status, "no signature, no token")

	// A flipped byte in the copy of the first URL: the client checks the
	// blob and takes the next URL.
	first := loc.Blobs[0]
	var damaged string
	for name := range c.nodes() {
		if strings.Contains(first.URLs[0], strings.TrimPrefix(c.nodeURL(name), "http://")) {
			damaged = name
		}
	}
	require.NotEmpty(t, damaged)
	md := c.metadata(f.res.FileID)
	blobfault.FlipByteAt(t, c.dataDir(damaged), md.Chunks[0].ChunkID, 1234)
	var out bytes.Buffer
	info, err := c.api.DownloadDirect(ctx, f.res.FileID, &out)
	require.NoError(t, err)
	require.True(t, info.Verified)
	require.True(t, info.Direct, "%+v", info)
	require.Equal(t, data, out.Bytes())

	// dfs get reads from the nodes directly by default.
	dest := filepath.Join(t.TempDir(), "got.bin")
	cmd := exec.Command(filepath.Join(binDir, "dfs"), "get", "-url", c.lc.CoordinatorURL(), "-o", dest, f.res.FileID)
	cmd.Env = append(os.Environ(), "DFS_TOKEN=", "DFS_ACCESS_KEY=", "DFS_SECRET_KEY=")
	outb, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", outb)
	require.Contains(t, string(outb), "read from the storage nodes directly")
	got, err := os.ReadFile(dest)
	require.NoError(t, err)
	require.Equal(t, data, got)

	// Past SIGNED_URL_TTL the URLs read nothing.
	time.Sleep(time.Until(*loc.ExpiresAt) + 1100*time.Millisecond)
	status, body = get(b1.URLs[0], nil)
	require.Equal(t, http.StatusForbidden, status, "%s", body)
	require.Contains(t, string(body), "expired")
}
