package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/load-test/harness"
)

// Figure keys of the S3 measurements, set beside the REST ones.
const (
	dfsS3Upload    = "dfs.s3-put4k.rate"
	dfsS3UploadP   = "dfs.s3-put4k.p"
	dfsS3Download  = "dfs.s3-get4k.rate"
	dfsS3DownloadP = "dfs.s3-get4k.p"
)

const (
	benchKey    = "DFSBENCHROOTKEY"
	benchSecret = "bench-root-secret"
)

// s3Small measures 4 KiB PutObject, then GetObject of the keys written,
// over the S3 API with aws-sdk-go-v2 (Signature V4, payload hashed), as
// small does over REST, on a cluster of its own.
func (b *bench) s3Small(ctx context.Context) error {
	ports, err := localcluster.FreePorts("127.0.0.1", 1)
	if err != nil {
		return err
	}
	bc, err := b.startCluster(ctx, "s3", 3, "S3_PORT="+strconv.Itoa(ports[0]), "ROOT_ACCESS_KEY="+benchKey,
		"ROOT_SECRET_KEY="+benchSecret, "API_AUTH=open")
	if err != nil {
		return err
	}
	defer bc.stop()
	cl := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:" + strconv.Itoa(ports[0])), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(benchKey, benchSecret, ""),
		HTTPClient:  httpClient(b.clients), RetryMaxAttempts: 1,
	})
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return err
	}
	s := newSeries()
	var (
		mu   sync.Mutex
		keys []string
	)
	const size = 4 << 10
	for run := range b.runs {
		b.logf("S3 4 KiB PutObject, run %d of %d (%d clients, %s)", run+1, b.runs, b.clients, b.window)
		putCPU := meterCPU(clusterPIDs(bc), b.warm, b.window)
		r := closedLoop(ctx, b.clients, b.warm, b.window, func(ctx context.Context, w, i int) error {
			c := harness.Content{Seed: uint64(run)<<48 | uint64(w)<<32 | uint64(i), Size: size}
			body, err := io.ReadAll(c.Reader())
			if err != nil {
				return err
			}
			key := fmt.Sprintf("r%d/w%d/%d", run, w, i)
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			if _, err := cl.PutObject(rctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(key),
				Body: bytes.NewReader(body), ContentLength: aws.Int64(size)}); err != nil {
				return err
			}
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
			return nil
		})
		b.loopFailures("S3 4 KiB PutObject", r)
		addRate(s, dfsS3Upload, r)
		addCPU(s, "s3-upload4k", r, putCPU)

		mu.Lock()
		pool := append([]string(nil), keys...)
		mu.Unlock()
		if len(pool) == 0 {
			return fmt.Errorf("no S3 4 KiB PutObject succeeded: %v", r.firstErr)
		}
		b.logf("S3 4 KiB GetObject, run %d of %d", run+1, b.runs)
		profDone := func() {}
		if run == 0 {
			profDone = b.startProfiles(ctx, bc, "coordinator-s3-download4k")
		}
		cpu := meterCPU(clusterPIDs(bc), b.warm, b.window)
		r = closedLoop(ctx, b.clients, b.warm, b.window, func(ctx context.Context, w, i int) error {
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			out, err := cl.GetObject(rctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String(pool[(w*7919+i)%len(pool)])})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			n, err := io.Copy(io.Discard, out.Body)
			if err == nil && n != size {
				err = fmt.Errorf("read %d bytes, want %d", n, size)
			}
			return err
		})
		profDone()
		b.loopFailures("S3 4 KiB GetObject", r)
		addRate(s, dfsS3Download, r)
		addCPU(s, "s3-download4k", r, cpu)
	}
	figs := s.figures()
	rename(figs, dfsS3Upload, fmt.Sprintf("S3 4 KiB PutObject ×%d", b.clients))
	rename(figs, dfsS3UploadP+"50", "S3 4 KiB PutObject p50")
	rename(figs, dfsS3UploadP+"99", "S3 4 KiB PutObject p99")
	rename(figs, dfsS3Download, fmt.Sprintf("S3 4 KiB GetObject ×%d", b.clients))
	rename(figs, dfsS3DownloadP+"50", "S3 4 KiB GetObject p50")
	rename(figs, dfsS3DownloadP+"99", "S3 4 KiB GetObject p99")
	renameCPU(figs, "s3-upload4k", "S3 4 KiB PutObject")
	renameCPU(figs, "s3-download4k", "S3 4 KiB GetObject")
	b.res.addFigures(figs)
	return nil
}

// s3Rows sets the S3 figures beside the REST API's: the ratio is what the
// S3 path costs (or saves) on the same operation.
func (b *bench) s3Rows() {
	r := b.res
	r.row(dfsS3Upload, dfsUpload, 0, "vs REST upload")
	r.row(dfsS3UploadP+"50", dfsUploadP+"50", 0, "vs REST upload")
	r.row(dfsS3UploadP+"99", dfsUploadP+"99", 0, "vs REST upload")
	r.row(dfsS3Download, dfsDownload, 0, "vs REST download")
	r.row(dfsS3DownloadP+"50", dfsDownloadP+"50", 0, "vs REST download")
	r.row(dfsS3DownloadP+"99", dfsDownloadP+"99", 0, "vs REST download")
	r.cpuRows("s3-upload4k", "s3-download4k")
}
