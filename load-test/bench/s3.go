package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dfs-project/dfs/internal/client"
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
		if err := b.s3Paced(ctx, bc, cl, pool, run, s); err != nil {
			return err
		}
	}
	figs := s.figures()
	rename(figs, dfsS3Upload, fmt.Sprintf("S3 4 KiB PutObject ×%d", b.clients))
	rename(figs, dfsS3UploadP+"50", "S3 4 KiB PutObject p50")
	rename(figs, dfsS3UploadP+"99", "S3 4 KiB PutObject p99")
	rename(figs, dfsS3Download, fmt.Sprintf("S3 4 KiB GetObject ×%d", b.clients))
	rename(figs, dfsS3DownloadP+"50", "S3 4 KiB GetObject p50")
	rename(figs, dfsS3DownloadP+"99", "S3 4 KiB GetObject p99")
	for _, f := range pacedFigures {
		rename(figs, f.key, f.name)
	}
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
	r.row(pacedS3Put+"us", pacedRESTUp+"us", 0, "vs REST upload, same cluster and rate")
	r.row(pacedS3Put+"p50", pacedRESTUp+"p50", 0, "vs REST upload, same cluster and rate")
	r.row(pacedS3Get+"us", pacedRESTDown+"us", 0, "vs REST download, same cluster and rate")
	r.row(pacedS3Get+"p50", pacedRESTDown+"p50", 0, "vs REST download, same cluster and rate")
	r.cpuRows("s3-upload4k", "s3-download4k")
}

// The paced comparison: S3 and REST requests at one fixed rate on the same
// cluster. A closed loop's CPU per request depends on the rate it reaches
// (a slower loop pays more wake-ups per request), and the S3 client's own
// cost slows its loop, so only at equal rates does the coordinator's CPU
// per request measure what the S3 path itself adds.
const (
	pacedGetRate  = 250 // per second, below what either API reaches on 2 shared cores
	pacedPutRate  = 80
	pacedS3Get    = "dfs.paced.s3-get4k."
	pacedRESTDown = "dfs.paced.rest-download4k."
	pacedS3Put    = "dfs.paced.s3-put4k."
	pacedRESTUp   = "dfs.paced.rest-upload4k."
)

var pacedFigures = []struct{ key, name string }{
	{pacedS3Get + "us", fmt.Sprintf("coordinator µs per S3 GetObject at %d/s", pacedGetRate)},
	{pacedS3Get + "p50", fmt.Sprintf("S3 4 KiB GetObject p50 at %d/s", pacedGetRate)},
	{pacedS3Get + "rate", "S3 4 KiB GetObject rate reached (paced)"},
	{pacedRESTDown + "us", fmt.Sprintf("coordinator µs per REST download at %d/s", pacedGetRate)},
	{pacedRESTDown + "p50", fmt.Sprintf("REST 4 KiB download p50 at %d/s", pacedGetRate)},
	{pacedRESTDown + "rate", "REST 4 KiB download rate reached (paced)"},
	{pacedS3Put + "us", fmt.Sprintf("coordinator µs per S3 PutObject at %d/s", pacedPutRate)},
	{pacedS3Put + "p50", fmt.Sprintf("S3 4 KiB PutObject p50 at %d/s", pacedPutRate)},
	{pacedS3Put + "rate", "S3 4 KiB PutObject rate reached (paced)"},
	{pacedRESTUp + "us", fmt.Sprintf("coordinator µs per REST upload at %d/s", pacedPutRate)},
	{pacedRESTUp + "p50", fmt.Sprintf("REST 4 KiB upload p50 at %d/s", pacedPutRate)},
	{pacedRESTUp + "rate", "REST 4 KiB upload rate reached (paced)"},
}

// s3Paced measures, on the S3 phase's cluster, 4 KiB writes and then reads
// over S3 and over REST at the same fixed rates, with the coordinator's CPU
// per request of each.
func (b *bench) s3Paced(ctx context.Context, bc *benchCluster, cl *s3.Client, keys []string, run int, s *series) error {
	list, err := bc.api.List(ctx, 0, 1000, nil)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(list.Items))
	for _, f := range list.Items {
		ids = append(ids, f.FileID)
	}
	if len(ids) == 0 {
		return fmt.Errorf("no file to download over REST")
	}
	const size = 4 << 10
	body := func(w, i int) []byte {
		c := harness.Content{Seed: uint64(run)<<48 | 1<<47 | uint64(w)<<32 | uint64(i), Size: size}
		p, _ := io.ReadAll(c.Reader())
		return p
	}
	phases := []struct {
		what, key string
		rate      float64
		op        func(ctx context.Context, w, i int) error
	}{
		{"S3 4 KiB PutObject", pacedS3Put, pacedPutRate, func(ctx context.Context, w, i int) error {
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench"), Key: aws.String(fmt.Sprintf("paced/r%d/w%d/%d", run, w, i)),
				Body: bytes.NewReader(body(w, i)), ContentLength: aws.Int64(size)})
			return err
		}},
		{"REST 4 KiB upload", pacedRESTUp, pacedPutRate, func(ctx context.Context, w, i int) error {
			_, err := bc.api.Upload(ctx, "paced.bin", bytes.NewReader(body(w, i)), size, client.UploadOptions{})
			return err
		}},
		{"S3 4 KiB GetObject", pacedS3Get, pacedGetRate, func(ctx context.Context, w, i int) error {
			out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bench"), Key: aws.String(keys[(w*7919+i)%len(keys)])})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			_, err = io.Copy(io.Discard, out.Body)
			return err
		}},
		{"REST 4 KiB download", pacedRESTDown, pacedGetRate, func(ctx context.Context, w, i int) error {
			_, err := bc.api.Download(ctx, ids[(w*7919+i)%len(ids)], io.Discard, client.DownloadOptions{})
			return err
		}},
	}
	for _, p := range phases {
		b.logf("%s at %.0f/s, run %d of %d", p.what, p.rate, run+1, b.runs)
		cpu := meterCPU(clusterPIDs(bc), b.warm, b.window)
		r := pacedLoop(ctx, b.clients, p.rate, b.warm, b.window, func(ctx context.Context, w, i int) error {
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			return p.op(rctx, w, i)
		})
		byProc, _ := cpu()
		b.loopFailures(p.what+" (paced)", r)
		if r.ops == 0 {
			return fmt.Errorf("%s at %.0f/s: nothing succeeded: %v", p.what, p.rate, r.firstErr)
		}
		s.add(p.key+"us", "µs", 1e6*byProc[localcluster.CoordinatorName]/r.rate())
		s.add(p.key+"p50", "ms", msOf(r.hist.Quantile(0.50)))
		s.add(p.key+"rate", "/s", r.rate())
	}
	return nil
}

// pacedLoop starts op rate times a second for warm + window, on up to n
// workers at once; a start that finds every worker busy is skipped, so the
// rate reached (ops / window) is what is reported, not the one asked for.
// As in closedLoop, only calls inside the window count, each timed from
// its own start.
func pacedLoop(ctx context.Context, n int, rate float64, warm, window time.Duration, op func(ctx context.Context, worker, i int) error) loopResult {
	start := time.Now()
	from, to := start.Add(warm), start.Add(warm+window)
	starts := make(chan int)
	go func() {
		defer close(starts)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for i := 0; ; {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if now.After(to) {
					return
				}
				select {
				case starts <- i:
					i++
				default:
				}
			}
		}
	}()
	return runWorkers(ctx, n, window, op, func(int) func() (int, bool) {
		return func() (int, bool) {
			i, ok := <-starts
			return i, ok
		}
	}, func(s, e time.Time) bool { return !s.Before(from) && !e.After(to) })
}
