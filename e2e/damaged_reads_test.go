package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob/blobfault"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/ring"
)

const (
	damagedReadsKey    = "DFSDAMAGEDREADS"
	damagedReadsSecret = "damaged-reads-secret"
)

// TestDamagedCopiesNeverReachTheReader flips one byte in two of the three
// copies of each file (every chunk's, for a chunked file) — in its first
// block, in its middle and at its last byte — and reads it whole and by a
// 201-byte range around the damage, through REST and S3, with the repair
// loop held back. Every read answers the file's exact bytes with a success
// status while the third copy is intact: files under DOWNLOAD_BUFFER_SIZE,
// between it and CHUNK_SIZE, and chunked.
func TestDamagedCopiesNeverReachTheReader(t *testing.T) {
	t.Parallel()
	ports, err := localcluster.FreePorts("127.0.0.1", 1)
	require.NoError(t, err)
	c := startCluster(t, options{nodes: 3, coordEnv: []string{
		"REPAIR_INTERVAL=1h", "CHUNK_SIZE=4MiB", "S3_PORT=" + strconv.Itoa(ports[0]),
		"ROOT_ACCESS_KEY=" + damagedReadsKey, "ROOT_SECRET_KEY=" + damagedReadsSecret, "API_AUTH=open",
	}})
	sdk := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:" + strconv.Itoa(ports[0])), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(damagedReadsKey, damagedReadsSecret, ""),
		HTTPClient:  c.http, RetryMaxAttempts: 1,
	})
	nodes := c.lc.Nodes()
	rg := ring.New(100, nodes...)
	sizes := map[string]int{"40 KB": 40 << 10, "2.5 MB": 5 << 19, "6 MB (chunked)": 6 << 20}
	offsets := map[string]func(size int) int{
		"first block": func(int) int { return 17 },
		"middle":      func(size int) int { return size / 2 },
		"last byte":   func(size int) int { return size - 1 },
	}
	reads := []string{"REST whole", "REST range", "S3 whole", "S3 range"}
	n := 0
	for sname, size := range sizes {
		for oname, offset := range offsets {
			for _, read := range reads {
				n++
				key := fmt.Sprintf("damaged-%d", n)
				t.Run(fmt.Sprintf("%s/%s/%s", sname, oname, read), func(t *testing.T) {
					c := c.with(t)
					data := randomBytes(size)
					id := c.putObject("damaged", key, data)
					off := offset(size)
					// Two of the three copies of the blob holding off, the
					// two a read tries first, are damaged there.
					md := c.metadata(id)
					blobID, within := id, int64(off)
					for _, ch := range md.Chunks {
						if int64(off) >= ch.Offset && int64(off) < ch.Offset+ch.SizeBytes {
							blobID, within = ch.ChunkID, int64(off)-ch.Offset
						}
					}
					for _, node := range rg.Preference(blobID, len(nodes))[:2] {
						blobfault.FlipByteAt(t, c.dataDir(node), blobID, within)
					}
					from, to := 0, size
					if read == "REST range" || read == "S3 range" {
						from, to = max(0, off-100), min(size, off+101)
					}
					var got []byte
					switch read {
					case "REST whole", "REST range":
						req, err := http.NewRequest(http.MethodGet, c.lc.CoordinatorURL()+"/api/files/"+id, nil)
						require.NoError(t, err)
						want := http.StatusOK
						if to-from != size {
							req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, to-1))
							want = http.StatusPartialContent
						}
						resp, err := c.http.Do(req)
						require.NoError(t, err)
						got, err = io.ReadAll(resp.Body)
						resp.Body.Close()
						require.NoError(t, err, "the transfer completes")
						require.Equal(t, want, resp.StatusCode)
					default:
						in := &s3.GetObjectInput{Bucket: aws.String("damaged"), Key: aws.String(key)}
						if to-from != size {
							in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", from, to-1))
						}
						out, err := sdk.GetObject(context.Background(), in)
						require.NoError(t, err)
						got, err = io.ReadAll(out.Body)
						out.Body.Close()
						require.NoError(t, err, "the transfer completes")
					}
					require.Equal(t, to-from, len(got))
					require.True(t, bytes.Equal(data[from:to], got), "the bytes are the file's")
				})
			}
		}
	}
}
