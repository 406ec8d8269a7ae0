//go:build linux

package s3e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/testenv"
)

// peer is a second coordinator over the cluster's PostgreSQL, with an S3
// endpoint of its own; the storage nodes register with the first, and it
// learns them from the store.
type peer struct {
	api, s3URL string
}

func (c *cluster) startPeer(t *testing.T, env ...string) peer {
	t.Helper()
	ports, err := localcluster.FreePorts("127.0.0.1", 2)
	require.NoError(t, err)
	p := peer{api: "http://127.0.0.1:" + strconv.Itoa(ports[0]), s3URL: "http://127.0.0.1:" + strconv.Itoa(ports[1])}
	logPath := filepath.Join(t.TempDir(), "peer.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(binDir, localcluster.CoordinatorBinary))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir(),
		"HEALTH_CHECK_INTERVAL=500ms", "HEALTH_PROBE_TIMEOUT=300ms", "REPAIR_INTERVAL=1s", "REPLICATION_FACTOR=2", "MAX_FILE_SIZE=16MiB",
		"LOG_FORMAT=json", "ROOT_ACCESS_KEY=" + rootKey, "ROOT_SECRET_KEY=" + rootSecret}, env...)
	cmd.Env = append(cmd.Env, "DATA_DIRECTORY="+t.TempDir(), "SERVER_HOST=127.0.0.1", "SERVER_PORT="+strconv.Itoa(ports[0]),
		"S3_PORT="+strconv.Itoa(ports[1]))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- peer coordinator log (end) ---\n%s", tail(string(b), 4000))
		}
	})
	// Ready, and every node healthy in its own eyes: its failure detector
	// admits them from the store.
	deadline := time.Now().Add(45 * time.Second)
	for {
		req, err := http.NewRequest(http.MethodGet, p.api+"/api/health", nil)
		require.NoError(t, err)
		req.SetBasicAuth(rootKey, rootSecret)
		var h struct{ Status string }
		if resp, err := c.http.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
		}
		if h.Status == "UP" {
			return p
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("the peer coordinator exited:\n%s", b)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the peer coordinator did not become healthy (last status %q)", h.Status)
		time.Sleep(100 * time.Millisecond)
	}
}

// sdkAt is an aws-sdk-go-v2 client of the S3 endpoint at url.
func (c *cluster) sdkAt(url string) *s3.Client {
	return s3.New(s3.Options{
		Region: region, BaseEndpoint: aws.String(url), UsePathStyle: true,
		Credentials: c.sdk(rootKey, rootSecret).Options().Credentials,
		HTTPClient:  c.http, RetryMaxAttempts: 1,
	})
}

// liveFiles is the number of files the REST API lists in any status but
// DELETED: a refused conditional write must leave none of its own.
func (c *cluster) liveFiles(t *testing.T) int {
	t.Helper()
	status, body := c.rest(http.MethodGet, "/api/files?size=1000&status=PENDING,ACTIVE,DEGRADED,REBALANCING,FAILED", nil, rootKey, rootSecret)
	require.Equal(t, http.StatusOK, status, string(body))
	var page struct{ Total int }
	require.NoError(t, json.Unmarshal(body, &page))
	return page.Total
}

// TestConditionalWrites drives S3's conditional writes through two
// coordinators sharing PostgreSQL, with aws-sdk-go-v2 (Debian's awscli 2.9
// and python3-boto3 1.26 predate the If-None-Match and If-Match
// parameters): a lock that many writers race to take with
// If-None-Match: * — whole files and files stored as chunks, on both
// coordinators — is taken by exactly one, the others get 412 and leave no
// file behind; then If-Match on PutObject, CompleteMultipartUpload and
// DeleteObject.
func TestConditionalWrites(t *testing.T) {
	db := testenv.NewPostgresDB(t)
	shared := []string{"DATABASE_URL=" + db, "CHUNK_SIZE=1MiB"}
	c := startCluster(t, shared...)
	p := c.startPeer(t, shared...)
	clients := []*s3.Client{c.sdk(rootKey, rootSecret), c.sdkAt(p.s3URL)}
	ctx := context.Background()
	_, err := clients[0].CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("locks")})
	require.NoError(t, err)

	t.Run("RaceExactlyOneWins", func(t *testing.T) {
		const writers = 16
		bodies := make([][]byte, writers)
		for i := range bodies {
			size := 2 << 10
			if i%4 >= 2 {
				size = 2 << 20 // over CHUNK_SIZE: stored as chunks, its key moved after
			}
			bodies[i] = append(fmt.Appendf(nil, "writer %d ", i), random(size)...)
		}
		errsOf := make([]error, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				_, errsOf[i] = clients[i%2].PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("state.tflock"),
					Body: bytes.NewReader(bodies[i]), IfNoneMatch: aws.String("*")})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errsOf {
			if err == nil {
				require.Equal(t, -1, winner, "writers %d and %d both took the lock", winner, i)
				winner = i
				continue
			}
			require.Equal(t, "PreconditionFailed", code(t, err), "writer %d", i)
			var re interface{ HTTPStatusCode() int }
			require.True(t, errors.As(err, &re))
			require.Equal(t, http.StatusPreconditionFailed, re.HTTPStatusCode())
		}
		require.NotEqual(t, -1, winner, "one writer took the lock")
		for _, cl := range clients {
			out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("locks"), Key: aws.String("state.tflock")})
			require.True(t, bytes.Equal(bodies[winner], readAll(t, out, err)), "both coordinators serve the winner's bytes")
		}
		deadline := time.Now().Add(20 * time.Second)
		for c.liveFiles(t) != 1 {
			require.True(t, time.Now().Before(deadline), "the losers' files are deleted: %d files live", c.liveFiles(t))
			time.Sleep(100 * time.Millisecond)
		}
		_, err = clients[1].PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("state.tflock"),
			Body: bytes.NewReader([]byte("late")), IfNoneMatch: aws.String("*")})
		require.Equal(t, "PreconditionFailed", code(t, err), "the lock stays taken")
		_, err = clients[1].DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("locks"), Key: aws.String("state.tflock"),
			IfMatch: aws.String(`"` + md5hex([]byte("late")) + `"`)})
		require.Equal(t, "PreconditionFailed", code(t, err), "a release naming another's lock is refused")
		_, err = clients[0].DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("locks"), Key: aws.String("state.tflock"),
			IfMatch: aws.String(`"` + md5hex(bodies[winner]) + `"`)})
		require.NoError(t, err, "the holder releases the lock")
		_, err = clients[1].PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("state.tflock"),
			Body: bytes.NewReader([]byte("next")), IfNoneMatch: aws.String("*")})
		require.NoError(t, err, "and the next takes it")
	})

	t.Run("IfMatch", func(t *testing.T) {
		a, b := clients[0], clients[1]
		_, err := a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("doc"), Body: bytes.NewReader([]byte("v1")),
			IfMatch: aws.String(`"` + md5hex([]byte("v1")) + `"`)})
		require.Equal(t, "NoSuchKey", code(t, err), "If-Match on a key that holds nothing")
		first, err := a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("doc"), Body: bytes.NewReader([]byte("v1"))})
		require.NoError(t, err)
		_, err = b.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("doc"), Body: bytes.NewReader([]byte("v2")),
			IfMatch: first.ETag})
		require.NoError(t, err, "a compare-and-swap from the other coordinator")
		_, err = a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("doc"), Body: bytes.NewReader(random(1 << 20)),
			IfMatch: first.ETag})
		require.Equal(t, "PreconditionFailed", code(t, err), "a swap from a stale read")

		// A multipart upload completed only over the object it read.
		create, err := a.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("locks"), Key: aws.String("doc")})
		require.NoError(t, err)
		part, err := a.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("locks"), Key: aws.String("doc"), UploadId: create.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("v3 in one part"))})
		require.NoError(t, err)
		complete := func(cl *s3.Client, ifMatch, ifNoneMatch *string) error {
			_, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("locks"), Key: aws.String("doc"),
				UploadId: create.UploadId, IfMatch: ifMatch, IfNoneMatch: ifNoneMatch,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
			return err
		}
		require.Equal(t, "PreconditionFailed", code(t, complete(b, nil, aws.String("*"))))
		require.Equal(t, "PreconditionFailed", code(t, complete(b, first.ETag, nil)))
		require.NoError(t, complete(b, aws.String(`"`+md5hex([]byte("v2"))+`"`), nil), "the upload outlived the refusals")
		out, err := a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("locks"), Key: aws.String("doc")})
		require.Equal(t, "v3 in one part", string(readAll(t, out, err)))
	})
}
