package storagenode_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/storagenode/nodetest"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// BenchmarkGetVerified measures what checking costs a whole 8 MiB GET (a
// chunk of a large file) over loopback: the blob checked block by block
// against its sums, plain and in CRC-32C frames, beside the same blob with
// its sums removed, which the node sends unchecked as it did before block
// sums existed (by sendfile where the connection allows it).
func BenchmarkGetVerified(b *testing.B) {
	const size = 8 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, layout := range []string{"files", "volumes"} {
		b.Run(layout, func(b *testing.B) {
			n := nodetest.Start(b, nodetest.Options{Env: map[string]string{"STORAGE_LAYOUT": layout}})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			b.Cleanup(client.CloseIdleConnections)
			do := func(req *http.Request) *http.Response {
				if n.Config.ClusterToken != "" {
					req.Header.Set("Authorization", "Bearer "+n.Config.ClusterToken)
				}
				resp, err := client.Do(req)
				require.NoError(b, err)
				return resp
			}
			put := func(id string) {
				req, err := http.NewRequest(http.MethodPut, n.URL+"/internal/blobs/"+id, bytes.NewReader(data))
				require.NoError(b, err)
				req.Header.Set("X-Checksum-Sha256", checksum(data))
				resp := do(req)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Contains(b, []int{http.StatusCreated, http.StatusOK}, resp.StatusCode)
			}
			verified, legacy := uuid.NewString(), uuid.NewString()
			put(verified)
			put(legacy)
			require.NoError(b, os.Remove(blobfault.Locate(b, n.DataDir, legacy).Path+".blk"))

			for _, c := range []struct {
				name, id, accept, want string
			}{
				{"verified", verified, "", wire.BlocksVerifiedCRC32C},
				{"verified-frames", verified, wire.ContentTypeFrames, wire.BlocksVerifiedCRC32C},
				{"unverified", legacy, "", ""},
			} {
				b.Run(c.name, func(b *testing.B) {
					b.SetBytes(size)
					for b.Loop() {
						req, err := http.NewRequest(http.MethodGet, n.URL+"/internal/blobs/"+c.id, nil)
						require.NoError(b, err)
						if c.accept != "" {
							req.Header.Set("Accept", c.accept)
						}
						resp := do(req)
						got, err := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						require.NoError(b, err)
						require.Equal(b, http.StatusOK, resp.StatusCode)
						require.Equal(b, c.want, resp.Header.Get(wire.HeaderBlocksVerified))
						require.GreaterOrEqual(b, got, int64(size))
					}
				})
			}
		})
	}
}
