package storagenode_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// getRaw reads a GET answer as far as it comes, keeping the error of a body
// cut short.
func getRaw(t *testing.T, n *node, id string, header map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, n.URL+"/internal/blobs/"+id, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestReadsSendOnlyCheckedBytes flips one byte of a stored blob, large
// (block sums) and small (its SHA-256), in both layouts: a read never
// carries a damaged byte; it is refused with BLOB_CORRUPT when the damage
// is in the first block it sends, cut short before the damaged block
// otherwise, and the node refuses the blob from then on until it is
// written again.
func TestReadsSendOnlyCheckedBytes(t *testing.T) {
	const big = 3*blob.WholeCheckMax + 1000 // 49 blocks, the last short
	for _, layout := range []string{"files", "volumes"} {
		t.Run(layout, func(t *testing.T) {
			n := startNode(t, map[string]string{"STORAGE_LAYOUT": layout})
			data := bytes.Repeat([]byte("checked bytes "), big/14+1)[:big]
			store := func(id string, b []byte) {
				resp, body := n.put(t, id, b)
				require.Contains(t, []int{http.StatusCreated, http.StatusOK}, resp.StatusCode, "%s", body)
			}

			// Intact: verified, plain or in frames.
			id := uuid.NewString()
			store(id, data)
			resp, body, err := getRaw(t, n, id, nil)
			require.NoError(t, err)
			require.Equal(t, data, body)
			require.Equal(t, wire.BlocksVerifiedCRC32C, resp.Header.Get(wire.HeaderBlocksVerified))
			resp, body, err = getRaw(t, n, id, map[string]string{"Accept": wire.ContentTypeFrames, "Range": "bytes=65000-200000"})
			require.NoError(t, err)
			require.Equal(t, http.StatusPartialContent, resp.StatusCode)
			require.Equal(t, wire.ContentTypeFrames, resp.Header.Get("Content-Type"))
			require.Equal(t, strconv.FormatInt(wire.FramedLength(65000, 135001, blob.BlockSize), 10), resp.Header.Get("Content-Length"))
			got, err := io.ReadAll(wire.NewFrameReader(bytes.NewReader(body)))
			require.NoError(t, err)
			require.Equal(t, data[65000:200001], got)

			// Damage in block 5: a range before it is whole, the whole read
			// stops before it, and then the blob is refused.
			blobfault.FlipByteAt(t, n.DataDir, id, 5*blob.BlockSize+123)
			resp, body, err = getRaw(t, n, id, map[string]string{"Range": "bytes=0-1000"})
			require.NoError(t, err)
			require.Equal(t, data[:1001], body, "blocks before the damage still read")
			_, body, err = getRaw(t, n, id, nil)
			require.Error(t, err, "the answer breaks off")
			require.Equal(t, data[:5*blob.BlockSize], body, "every byte sent is good, up to the damaged block")
			resp, body, _ = getRaw(t, n, id, map[string]string{"Range": "bytes=0-1000"})
			requireError(t, resp, body, http.StatusUnprocessableEntity, "BLOB_CORRUPT")
			resp, body = n.request(t, http.MethodHead, "/internal/blobs/"+id, nil, nil)
			requireError(t, resp, body, http.StatusUnprocessableEntity, "BLOB_CORRUPT")
			store(id, data) // a good copy written over it
			_, body, err = getRaw(t, n, id, nil)
			require.NoError(t, err)
			require.Equal(t, data, body, "the rewritten blob reads again")

			// Damage in the first block of the answer: refused before any
			// byte.
			first := uuid.NewString()
			store(first, data)
			blobfault.FlipByteAt(t, n.DataDir, first, 2*blob.BlockSize+7)
			resp, body, _ = getRaw(t, n, first, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", 2*blob.BlockSize, 2*blob.BlockSize+99)})
			requireError(t, resp, body, http.StatusUnprocessableEntity, "BLOB_CORRUPT")

			// A small blob is checked against its SHA-256.
			small := uuid.NewString()
			store(small, data[:40000])
			resp, body, err = getRaw(t, n, small, map[string]string{"Range": "bytes=10-19"})
			require.NoError(t, err)
			require.Equal(t, data[10:20], body)
			require.Equal(t, wire.BlocksVerifiedCRC32C, resp.Header.Get(wire.HeaderBlocksVerified))
			blobfault.FlipByteAt(t, n.DataDir, small, 39000)
			resp, body, _ = getRaw(t, n, small, map[string]string{"Range": "bytes=10-19"})
			requireError(t, resp, body, http.StatusUnprocessableEntity, "BLOB_CORRUPT")

			// A large blob without block sums (written before they existed)
			// is sent as stored, without the header, for its reader to hash.
			legacy := uuid.NewString()
			store(legacy, data)
			loc := blobfault.Locate(t, n.DataDir, legacy)
			require.NoError(t, os.Remove(loc.Path+".blk"))
			resp, body, err = getRaw(t, n, legacy, nil)
			require.NoError(t, err)
			require.Equal(t, data, body)
			require.Empty(t, resp.Header.Get(wire.HeaderBlocksVerified))
			require.FileExists(t, filepath.Clean(loc.Path))
		})
	}
}

// TestLargeRecordsAreCheckedWhole raises STORAGE_INLINE_MAX past
// blob.WholeCheckMax: a record in a volume carries no block sums, so the
// node reads it whole and checks its SHA-256 before sending any of it, and a
// flipped byte anywhere in it refuses even a range far from the damage.
func TestLargeRecordsAreCheckedWhole(t *testing.T) {
	n := startNode(t, map[string]string{"STORAGE_LAYOUT": "volumes", "STORAGE_INLINE_MAX": "4MiB", "STORAGE_VOLUME_SIZE": "64MiB"})
	data := bytes.Repeat([]byte("a record of three mebibytes "), (3<<20)/28+1)[:3<<20]
	id := uuid.NewString()
	resp, body := n.put(t, id, data)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	require.Empty(t, blobfault.Locate(t, n.DataDir, id).Sidecar, "the blob is a record in a volume")

	resp, body, err := getRaw(t, n, id, map[string]string{"Range": "bytes=100-199"})
	require.NoError(t, err)
	require.Equal(t, data[100:200], body)
	require.Equal(t, wire.BlocksVerifiedCRC32C, resp.Header.Get(wire.HeaderBlocksVerified))

	blobfault.FlipByteAt(t, n.DataDir, id, 40*blob.BlockSize+3)
	resp, body, _ = getRaw(t, n, id, map[string]string{"Range": "bytes=100-199"})
	requireError(t, resp, body, http.StatusUnprocessableEntity, "BLOB_CORRUPT")
	resp, body = n.request(t, http.MethodHead, "/internal/blobs/"+id, nil, nil)
	requireError(t, resp, body, http.StatusUnprocessableEntity, "BLOB_CORRUPT")
}
