package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/dfs-project/dfs/load-test/harness"
)

// Figure keys of the dfs measurements.
const (
	dfsUpload      = "dfs.upload4k.rate"
	dfsUploadP     = "dfs.upload4k.p"
	dfsDownload    = "dfs.download4k.rate"
	dfsDownloadP   = "dfs.download4k.p"
	dfsCached      = "dfs.download4k-cached.rate"
	dfsCachedP     = "dfs.download4k-cached.p"
	dfsBigUp       = "dfs.upload-large.mbps"
	dfsBigDown     = "dfs.download-large.mbps"
	dfsBigParts    = "dfs.upload-large-4parts.mbps"
	dfsRSSCoord    = "dfs.rss.coordinator"
	dfsRSSNode     = "dfs.rss.node"
	dfsRSSUpload   = "dfs.rss.upload.mbps"
	dfsCLICoord    = "dfs.rss-cli.coordinator"
	dfsCLISelf     = "dfs.rss-cli.dfs"
	dfsCLIUpload   = "dfs.rss-cli.upload.mbps"
	dfsReb         = "dfs.rebalance"
	dfsRebPaced    = "dfs.rebalance-throttled" // the same, at REBALANCE_BANDWIDTH (-rebalance-bandwidth)
	dfsRebFiles    = dfsReb + rebFiles
	dfsRebMBps     = dfsReb + rebMBps
	dfsRebMoved    = dfsReb + rebMoved
	dfsRebPredict  = dfsReb + rebPredict
	dfsRebWall     = dfsReb + rebWall
	rebFiles       = ".files-per-s"
	rebMBps        = ".mbps"
	rebMoved       = ".moved-fraction"
	rebPredict     = ".predicted-fraction"
	rebWall        = ".wall"
	rebClientP     = ".client-download.p" // + 50 or 99
	dfsCPU         = "dfs.cpu."           // + phase + "." + coordinator|nodes|machine
	requestTimeout = 30 * time.Second
)

// small measures 4 KiB uploads, then downloads of the files uploaded, each
// over b.runs windows, at b.clients concurrent clients, on nodes in the
// files layout.
func (b *bench) small(ctx context.Context) error { return b.smallLayout(ctx, "files") }

// smallVolumes is small on nodes in the volumes layout (STORAGE_LAYOUT),
// its figures keyed with layoutSuffix.
func (b *bench) smallVolumes(ctx context.Context) error { return b.smallLayout(ctx, "volumes") }

// layoutSuffix is what the figure keys' phases and the figure names of a
// layout other than the default one carry: dfs.upload4k-volumes.rate, for
// example.
func layoutSuffix(layout string) (key, name string) {
	if layout == "files" {
		return "", ""
	}
	return "-" + layout, " (" + layout + ")"
}

// layoutKey is a 4 KiB figure key of the files layout made the same
// figure's key for the layout whose suffix is sfx.
func layoutKey(key, sfx string) string {
	return strings.Replace(key, "4k.", "4k"+sfx+".", 1)
}

func (b *bench) smallLayout(ctx context.Context, layout string) error {
	sfx, nameSfx := layoutSuffix(layout)
	bc, err := b.startClusterWith(ctx, "small-"+layout, 3, []string{"STORAGE_LAYOUT=" + layout})
	if err != nil {
		return err
	}
	bc.keepData = true
	defer bc.stop()
	s := newSeries()
	var (
		mu       sync.Mutex
		ids      []string
		degraded int
	)
	const size = 4 << 10
	for run := range b.runs {
		b.logf("4 KiB uploads, %s layout, run %d of %d (%d clients, %s)", layout, run+1, b.runs, b.clients, b.window)
		var perfDone func()
		if run == 0 && b.perf && layout == "files" {
			perfDone = b.startPerf(ctx, bc.PID(localcluster.CoordinatorName), "coordinator-upload4k")
		}
		profDone := func() {}
		if run == 0 {
			profDone = b.startProfiles(ctx, bc, "coordinator-upload4k"+sfx)
		}
		cpu := meterCPU(clusterPIDs(bc), b.warm, b.window)
		r := closedLoop(ctx, b.clients, b.warm, b.window, func(ctx context.Context, w, i int) error {
			c := harness.Content{Seed: uint64(run)<<48 | uint64(w)<<32 | uint64(i), Size: size}
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			res, err := bc.api.Upload(rctx, "bench.bin", c.Reader(), size, client.UploadOptions{})
			if err != nil {
				return err
			}
			mu.Lock()
			ids = append(ids, res.FileID)
			if res.Status != client.FileActive {
				degraded++
			}
			mu.Unlock()
			return nil
		})
		if perfDone != nil {
			perfDone()
		}
		profDone()
		b.loopFailures("4 KiB upload", r)
		addRate(s, layoutKey(dfsUpload, sfx), r)
		addCPU(s, "upload4k"+sfx, r, cpu)

		b.logf("4 KiB downloads, %s layout, run %d of %d", layout, run+1, b.runs)
		mu.Lock()
		pool := append([]string(nil), ids...)
		mu.Unlock()
		if len(pool) == 0 {
			return fmt.Errorf("no 4 KiB upload succeeded: %v", r.firstErr)
		}
		b.downloads(ctx, bc, pool, s, layoutKey(dfsDownload, sfx), "download4k"+sfx, run == 0)
		if err := b.runPeerSmall(ctx, run); err != nil {
			return fmt.Errorf("SeaweedFS: %w", err)
		}
	}
	if degraded > 0 {
		b.res.Notes = append(b.res.Notes, fmt.Sprintf("%d of %d 4 KiB uploads were acknowledged DEGRADED", degraded, len(ids)))
	}
	figs := s.figures()
	rename(figs, layoutKey(dfsUpload, sfx), fmt.Sprintf("4 KiB upload ×%d%s", b.clients, nameSfx))
	rename(figs, layoutKey(dfsUploadP, sfx)+"50", "4 KiB upload p50"+nameSfx)
	rename(figs, layoutKey(dfsUploadP, sfx)+"99", "4 KiB upload p99"+nameSfx)
	rename(figs, layoutKey(dfsDownload, sfx), fmt.Sprintf("4 KiB download ×%d%s", b.clients, nameSfx))
	rename(figs, layoutKey(dfsDownloadP, sfx)+"50", "4 KiB download p50"+nameSfx)
	rename(figs, layoutKey(dfsDownloadP, sfx)+"99", "4 KiB download p99"+nameSfx)
	renameCPU(figs, "upload4k"+sfx, "4 KiB uploads"+nameSfx)
	renameCPU(figs, "download4k"+sfx, "4 KiB downloads"+nameSfx)
	renameDownloads(figs, "download4k"+sfx, "4 KiB downloads"+nameSfx)
	b.res.addFigures(figs)
	return nil
}

// loadGenerator names this process among those whose CPU is measured.
const loadGenerator = "bench"

// clusterPIDs names the running processes of a cluster, and this one.
func clusterPIDs(bc *benchCluster) map[string]int {
	pids := map[string]int{loadGenerator: os.Getpid()}
	for _, n := range append([]string{localcluster.CoordinatorName}, bc.Nodes()...) {
		if pid := bc.PID(n); pid != 0 {
			pids[n] = pid
		}
	}
	return pids
}

// cpuWho names, in figure keys, the processes whose CPU is reported: the
// coordinator, the nodes together, this process (the load generator), and
// everything else on the machine (the kernel's own threads, and other work
// sharing it, which makes the figures of that run less trustworthy).
var cpuWho = []string{"coordinator", "nodes", "bench", "other"}

// usPerOp is the suffix of a CPU figure's key that gives it per operation.
const usPerOp = ".us-per-op"

// renameCPU names the CPU figures of phase, which measured what.
func renameCPU(figs map[string]Figure, phase, what string) {
	names := map[string]string{
		"coordinator": "coordinator CPU",
		"nodes":       "3 nodes' CPU",
		"bench":       "load generator's CPU",
		"other":       "all other CPU (kernel threads, other work)",
	}
	for _, who := range cpuWho {
		rename(figs, dfsCPU+phase+"."+who, names[who]+" during "+what)
		rename(figs, dfsCPU+phase+"."+who+usPerOp, names[who]+" per operation, "+what)
	}
	rename(figs, dfsCPU+phase+servers+usPerOp, "coordinator and nodes' CPU per operation, "+what)
}

// servers is the key part of the figure that adds the coordinator's and the
// nodes' CPU per operation: what dfs itself spent, to set beside what the
// peer's processes spent.
const servers = ".servers"

// addCPU adds what a meterCPU measured over the window of r: in cores for
// each of cpuWho, and in CPU microseconds per operation (cores over the
// window divided by r's rate), which stays steadier than the rate itself
// when other work shares the machine. A window without a successful
// operation has no per-operation figure.
func addCPU(s *series, phase string, r loopResult, wait func() (map[string]float64, float64)) {
	byProc, busy := wait()
	nodes, ours := 0.0, 0.0
	for name, c := range byProc {
		ours += c
		if name != localcluster.CoordinatorName && name != loadGenerator {
			nodes += c
		}
	}
	used := map[string]float64{
		"coordinator": byProc[localcluster.CoordinatorName],
		"nodes":       nodes,
		"bench":       byProc[loadGenerator],
		"other":       max(0, busy*float64(runtime.NumCPU())-ours),
	}
	rate := r.rate()
	for _, who := range cpuWho {
		s.add(dfsCPU+phase+"."+who, "cores", used[who])
		if rate > 0 {
			s.add(dfsCPU+phase+"."+who+usPerOp, "µs/op", cpuMicros(used[who], rate))
		}
	}
	if rate > 0 {
		s.add(dfsCPU+phase+servers+usPerOp, "µs/op", cpuMicros(used["coordinator"]+used["nodes"], rate))
	}
}

// cpuMicros is the CPU microseconds each operation took when cores were
// kept busy at rate operations a second.
func cpuMicros(cores, rate float64) float64 { return cores / rate * 1e6 }

func (b *bench) loopFailures(what string, r loopResult) {
	if r.failures > 0 {
		b.res.fail("%s: %d of %d requests failed; first: %v", what, r.failures, r.failures+r.ops, r.firstErr)
	}
}

// repeatReader yields its buffer over and over.
type repeatReader struct {
	buf []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.buf[r.off:])
	r.off = (r.off + n) % len(r.buf)
	return n, nil
}

// downloads measures one window of random downloads from pool into s under
// key, with the CPU of phase, fetching the coordinator's profiles if profile.
func (b *bench) downloads(ctx context.Context, bc *benchCluster, pool []string, s *series, key, phase string, profile bool) {
	profDone := func() {}
	if profile {
		profDone = b.startProfiles(ctx, bc, "coordinator-"+phase)
	}
	hits, misses, countErr := recordCacheLookups(ctx, bc)
	cpu := meterCPU(clusterPIDs(bc), b.warm, b.window)
	r := closedLoop(ctx, b.clients, b.warm, b.window, func(ctx context.Context, w, i int) error {
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		_, err := bc.api.Download(rctx, pool[rand.IntN(len(pool))], io.Discard, client.DownloadOptions{})
		return err
	})
	profDone()
	b.loopFailures("4 KiB download", r)
	addRate(s, key, r)
	addCPU(s, phase, r, cpu)
	s.add(dfsPrefix+phase+poolFiles, "files", float64(len(pool)))
	hitsAfter, missesAfter, err := recordCacheLookups(ctx, bc)
	switch lookups := hitsAfter - hits + missesAfter - misses; {
	case errors.Join(countErr, err) != nil:
		b.logf("%s: the record cache's counters could not be read: %v", phase, errors.Join(countErr, err))
	case lookups > 0: // none when the cache is off (PostgreSQL, LOCAL_CACHE_ENTRIES=0)
		s.add(dfsPrefix+phase+cacheMisses, "%", 100*(missesAfter-misses)/lookups)
	}
}

// Key suffixes of a download phase's figures: how many files the downloads
// drew from at random, and the share of its record lookups (warm-up
// included) that the coordinator's record cache (LOCAL_CACHE_ENTRIES)
// missed and read from the metadata store.
const (
	dfsPrefix   = "dfs."
	poolFiles   = ".files"
	cacheMisses = ".record-cache-misses"
)

// recordCacheLookups reads the coordinator's record-cache counters.
func recordCacheLookups(ctx context.Context, bc *benchCluster) (hits, misses float64, err error) {
	v, err := metrics(ctx, bc.CoordinatorURL(), "dfs_local_cache_hits_total", "dfs_local_cache_misses_total")
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// renameDownloads names the figures downloads added for phase beside its
// rate, which measured what.
func renameDownloads(figs map[string]Figure, phase, what string) {
	rename(figs, dfsPrefix+phase+poolFiles, "files drawn from at random, "+what)
	rename(figs, dfsPrefix+phase+cacheMisses, "record lookups the cache missed (read from SQLite), "+what)
}

// cachedFiles is how many 4 KiB files the cached phase reads from.
const cachedFiles = 2000

// cached measures 4 KiB downloads with the coordinator's content cache on
// (CONTENT_CACHE_SIZE, off by default), reading at random from cachedFiles
// files uploaded first, which the uploads put in the cache.
func (b *bench) cached(ctx context.Context) error {
	bc, err := b.startCluster(ctx, "cached", 3, "CONTENT_CACHE_SIZE=64MiB")
	if err != nil {
		return err
	}
	bc.keepData = true
	defer bc.stop()
	b.logf("content cache: uploading %d files of 4 KiB", cachedFiles)
	const size = 4 << 10
	pool := make([]string, cachedFiles)
	var wg sync.WaitGroup
	failed := make(chan error, b.clients)
	for w := range b.clients {
		wg.Go(func() {
			for i := w; i < cachedFiles && ctx.Err() == nil; i += b.clients {
				c := harness.Content{Seed: 1<<62 | uint64(i), Size: size}
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				res, err := bc.api.Upload(rctx, "cached.bin", c.Reader(), size, client.UploadOptions{})
				cancel()
				if err != nil {
					failed <- err
					return
				}
				pool[i] = res.FileID
			}
		})
	}
	wg.Wait()
	close(failed)
	if err := <-failed; err != nil {
		return fmt.Errorf("upload the files to read: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err // interrupted: the pool is not complete
	}
	s := newSeries()
	for run := range b.runs {
		b.logf("4 KiB downloads with the content cache, run %d of %d", run+1, b.runs)
		b.downloads(ctx, bc, pool, s, dfsCached, "download4k-cached", false)
	}
	figs := s.figures()
	rename(figs, dfsCached, fmt.Sprintf("4 KiB download ×%d, CONTENT_CACHE_SIZE=64MiB", b.clients))
	rename(figs, dfsCachedP+"50", "4 KiB download p50, content cache")
	rename(figs, dfsCachedP+"99", "4 KiB download p99, content cache")
	renameCPU(figs, "download4k-cached", "4 KiB downloads with the content cache")
	renameDownloads(figs, "download4k-cached", "4 KiB downloads with the content cache")
	b.res.addFigures(figs)
	return nil
}

// large measures one upload and one download of b.largeSize bytes per run,
// and the peak memory of every process while b.rssSize bytes stream
// through. Each file is deleted after its run, to spare the disk.
func (b *bench) large(ctx context.Context, do largePhases) error {
	bc, err := b.startCluster(ctx, "large", 3)
	if err != nil {
		return err
	}
	defer bc.stop()
	s := newSeries()
	block := make([]byte, 4<<20)
	if _, err := io.ReadFull(harness.Content{Seed: 42, Size: int64(len(block))}.Reader(), block); err != nil {
		return err
	}
	hc := httpClient(1)
	for run := range b.runs {
		if !do.large {
			break
		}
		b.logf("%s upload and download, run %d of %d", sizeText(b.largeSize), run+1, b.runs)
		block[0] = byte(run) // a different file each run
		var res client.UploadResult
		mbps, err := timedBytes(b.largeSize, func() error {
			var err error
			res, err = bc.api.Upload(ctx, "large.bin", io.LimitReader(&repeatReader{buf: block}, b.largeSize), b.largeSize, client.UploadOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("upload %s: %w", sizeText(b.largeSize), err)
		}
		s.add(dfsBigUp, "MB/s", mbps)
		// A plain GET to io.Discard: the client does not re-hash, so that
		// its hashing does not take CPU from the cluster on a small machine;
		// the coordinator verifies the bytes as they stream.
		mbps, err = timedBytes(b.largeSize, func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, bc.CoordinatorURL()+"/api/files/"+res.FileID, nil)
			if err != nil {
				return err
			}
			return drainExact(hc.Do(req))(b.largeSize)
		})
		if err != nil {
			return fmt.Errorf("download %s: %w", sizeText(b.largeSize), err)
		}
		s.add(dfsBigDown, "MB/s", mbps)
		if _, err := bc.api.Delete(ctx, res.FileID); err != nil {
			return err
		}
		block[0] = byte(run) + 128
		mbps, err = timedBytes(b.largeSize, func() error {
			var err error
			res, err = parallelParts(ctx, bc.api, block, b.largeSize, 4)
			return err
		})
		if err != nil {
			return fmt.Errorf("4-part upload of %s: %w", sizeText(b.largeSize), err)
		}
		s.add(dfsBigParts, "MB/s", mbps)
		if _, err := bc.api.Delete(ctx, res.FileID); err != nil {
			return err
		}
		if err := b.runPeerLarge(ctx, run); err != nil {
			return fmt.Errorf("SeaweedFS: %w", err)
		}
	}
	// The library's and the CLI's uploads alternate, run by run.
	for run := range b.runs {
		if do.rss {
			b.logf("peak memory during a %s upload, run %d of %d", sizeText(b.rssSize), run+1, b.runs)
			if err := b.rssRun(ctx, bc, s, block); err != nil {
				return err
			}
		}
		if do.cli {
			b.logf("peak memory during a %s `dfs put`, run %d of %d", sizeText(b.rssSize), run+1, b.runs)
			if err := b.rssCLIRun(ctx, bc, s, block); err != nil {
				return err
			}
		}
	}
	figs := s.figures()
	rename(figs, dfsBigUp, sizeText(b.largeSize)+" upload")
	rename(figs, dfsBigDown, sizeText(b.largeSize)+" download")
	rename(figs, dfsBigParts, sizeText(b.largeSize)+" upload, 4 session parts at once")
	rename(figs, dfsRSSCoord, "coordinator peak RSS, "+sizeText(b.rssSize)+" upload")
	rename(figs, dfsRSSNode, "largest node peak RSS, same upload")
	rename(figs, dfsRSSUpload, sizeText(b.rssSize)+" upload")
	rename(figs, dfsCLICoord, "coordinator peak RSS, "+sizeText(b.rssSize)+" `dfs put`")
	rename(figs, dfsCLISelf, "dfs peak RSS, same put")
	rename(figs, dfsCLIUpload, sizeText(b.rssSize)+" `dfs put`")
	b.res.addFigures(figs)
	return nil
}

// parallelParts uploads size bytes of the repeated block as an upload
// session of n equal parts sent at once, then completes it.
func parallelParts(ctx context.Context, api *client.Client, block []byte, size int64, n int) (client.UploadResult, error) {
	sess, err := api.CreateUpload(ctx, "parts.bin", "", "")
	if err != nil {
		return client.UploadResult{}, err
	}
	part := (size + int64(n) - 1) / int64(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			length := min(part, size-int64(i)*part)
			// Each part starts where its bytes start in the repeated block.
			r := &repeatReader{buf: block, off: int((int64(i) * part) % int64(len(block)))}
			_, errs[i] = api.PutPartWith(ctx, sess.UploadID, i+1, io.LimitReader(r, length), length, client.PartOptions{SkipMD5: true})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return client.UploadResult{}, err
	}
	return api.CompleteUpload(ctx, sess.UploadID)
}

// rssRun uploads b.rssSize bytes and records the peak RSS (VmHWM, reset
// before the upload) of the coordinator and of the largest node.
func (b *bench) rssRun(ctx context.Context, bc *benchCluster, s *series, block []byte) error {
	names := append([]string{localcluster.CoordinatorName}, bc.Nodes()...)
	pids := map[string]int{}
	for _, n := range names {
		pid := bc.PID(n)
		if pid == 0 {
			return fmt.Errorf("%s is not running", n)
		}
		if err := resetPeakRSS(pid); err != nil {
			return fmt.Errorf("reset the peak RSS of %s: %w", n, err)
		}
		pids[n] = pid
	}
	block[1]++
	var res client.UploadResult
	mbps, err := timedBytes(b.rssSize, func() error {
		var err error
		res, err = bc.api.Upload(ctx, "rss.bin", io.LimitReader(&repeatReader{buf: block}, b.rssSize), b.rssSize, client.UploadOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("upload %s: %w", sizeText(b.rssSize), err)
	}
	var nodeMax int64
	for _, n := range names {
		kib, err := procStatus(pids[n], "VmHWM")
		if err != nil {
			return err
		}
		if n == localcluster.CoordinatorName {
			s.add(dfsRSSCoord, "MiB", float64(kib)/1024)
		} else {
			nodeMax = max(nodeMax, kib)
		}
	}
	s.add(dfsRSSNode, "MiB", float64(nodeMax)/1024)
	s.add(dfsRSSUpload, "MB/s", mbps)
	_, err = bc.api.Delete(ctx, res.FileID)
	return err
}

// rebalance measures, per run on a fresh cluster of 3 nodes holding
// b.rebFiles files, the rebalance that a 4th node's join sets off: its
// speed, the files it moved against the ring's prediction, and the latency
// of b.joinClients clients downloading those files while it runs. With
// -rebalance-bandwidth it does it all again with REBALANCE_BANDWIDTH set,
// so the clients' latency can be compared with and without the limit.
func (b *bench) rebalance(ctx context.Context) error {
	variants := []struct{ key, what string }{{dfsReb, "rebalance on join"}}
	if b.rebBandwidth > 0 {
		variants = append(variants, struct{ key, what string }{dfsRebPaced,
			fmt.Sprintf("rebalance on join at REBALANCE_BANDWIDTH=%s/s", sizeText(b.rebBandwidth))})
	}
	for _, v := range variants {
		var extra []string
		if v.key == dfsRebPaced {
			extra = append(extra, "REBALANCE_BANDWIDTH="+strconv.FormatInt(b.rebBandwidth, 10))
		}
		s := newSeries()
		for run := range b.runs {
			b.logf("%s, run %d of %d: uploading %d files of %s", v.what, run+1, b.runs, b.rebFiles, sizeText(b.rebSize))
			if err := b.rebalanceRun(ctx, run, s, v.key, extra...); err != nil {
				return err
			}
		}
		figs := s.figures()
		rename(figs, v.key+rebFiles, v.what+": files moved/s")
		rename(figs, v.key+rebMBps, v.what+": MB/s copied")
		rename(figs, v.key+rebMoved, v.what+": fraction of files moved")
		rename(figs, v.key+rebPredict, "ring's prediction (pref. list of 3 names node-4)")
		rename(figs, v.key+rebWall, v.what+": node start to run's end")
		for _, p := range []string{"50", "99"} {
			rename(figs, v.key+rebClientP+p, fmt.Sprintf("%s: p%s of %d clients' downloads meanwhile", v.what, p, b.joinClients))
		}
		b.res.addFigures(figs)
	}
	return nil
}

// joinLoad downloads files of ids at random from n clients until stop is
// closed, and returns the latency of the downloads that succeeded and how
// many failed.
func (b *bench) joinLoad(ctx context.Context, bc *benchCluster, ids []string, n int, stop <-chan struct{}) func() (*harness.Histogram, int) {
	hist := harness.NewHistogram()
	var mu sync.Mutex
	var wg sync.WaitGroup
	failures := 0
	for range n {
		wg.Go(func() {
			h := harness.NewHistogram()
			fails := 0
			for {
				select {
				case <-stop:
					mu.Lock()
					defer mu.Unlock()
					hist.Merge(h)
					failures += fails
					return
				default:
				}
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				start := time.Now()
				_, err := bc.api.Download(rctx, ids[rand.IntN(len(ids))], io.Discard, client.DownloadOptions{})
				cancel()
				if err != nil {
					fails++
					continue
				}
				h.Record(time.Since(start))
			}
		})
	}
	return func() (*harness.Histogram, int) {
		wg.Wait()
		return hist, failures
	}
}

func (b *bench) rebalanceRun(ctx context.Context, run int, s *series, key string, extra ...string) error {
	// The repair loop is pushed out of the way so that only the join's
	// run moves data.
	bc, err := b.startCluster(ctx, strings.TrimPrefix(key, "dfs.")+"-"+strconv.Itoa(run), 3, append([]string{"REPAIR_INTERVAL=1h"}, extra...)...)
	if err != nil {
		return err
	}
	bc.keepData = true
	defer bc.stop()

	var mu sync.Mutex
	var ids []string
	work := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	for range b.clients {
		wg.Go(func() {
			for i := range work {
				c := harness.Content{Seed: uint64(run)<<40 | uint64(i), Size: b.rebSize}
				rctx, cancel := context.WithTimeout(ctx, requestTimeout)
				res, err := bc.api.Upload(rctx, "r.bin", c.Reader(), c.Size, client.UploadOptions{})
				cancel()
				mu.Lock()
				if err == nil && res.Status == client.FileActive {
					ids = append(ids, res.FileID)
				} else if firstErr == nil {
					firstErr = fmt.Errorf("upload %d: status %s, %v", i, res.Status, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range b.rebFiles {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}

	newNode := localcluster.NodeName(len(bc.Nodes()) + 1)
	after := ring.New(ring.DefaultVNodes, append(bc.Nodes(), newNode)...)
	predicted := map[string]bool{}
	for _, id := range ids {
		for _, n := range after.Preference(id, 3) {
			if n == newNode {
				predicted[id] = true
			}
		}
	}

	const joined = `{trigger="JOINED"}`
	base := bc.CoordinatorURL()
	runsBefore, err := metric(ctx, base, "dfs_rebalance_runs_total"+joined)
	if err != nil {
		return err
	}
	b.logf("%s run %d of %d: adding %s; the ring predicts %d of %d files gain a copy there", key, run+1, b.runs, newNode, len(predicted), len(ids))
	stopLoad := make(chan struct{})
	loadDone := b.joinLoad(ctx, bc, ids, b.joinClients, stopLoad)
	start := time.Now()
	err = b.awaitJoinRebalance(ctx, bc, newNode, runsBefore, start.Add(30*time.Minute))
	wall := time.Since(start)
	close(stopLoad)
	lat, loadFailures := loadDone()
	if err != nil {
		return err
	}
	if loadFailures > 0 {
		b.res.fail("%s run %d: %d of the clients' downloads failed during the join", key, run+1, loadFailures)
	}
	dur, err := metric(ctx, base, "dfs_rebalance_duration_seconds_sum"+joined)
	if err != nil {
		return err
	}
	created, err := metric(ctx, base, "dfs_rebalance_copies_created_total"+joined)
	if err != nil {
		return err
	}
	failures, err := metric(ctx, base, "dfs_rebalance_failures_total"+joined)
	if err != nil {
		return err
	}
	held, err := blobIDs(bc.DataDir(newNode))
	if err != nil {
		return err
	}
	missing, unpredicted := 0, 0
	for id := range predicted {
		if !held[id] {
			missing++
		}
	}
	for id := range held {
		if !predicted[id] {
			unpredicted++
		}
	}
	if failures > 0 || missing > 0 || unpredicted > 0 {
		b.res.fail("%s run %d: %v failures; %s lacks %d predicted files and holds %d unpredicted ones", key, run+1, failures, newNode, missing, unpredicted)
	}
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("%s run %d: %d files; %d copies created on join in %.2fs (run's own duration); %s holds exactly the predicted set: %v; %d downloads by %d clients meanwhile",
		key, run+1, len(ids), int(created), dur, newNode, missing == 0 && unpredicted == 0, lat.Count(), b.joinClients))
	s.add(key+rebFiles, "/s", created/dur)
	s.add(key+rebMBps, "MB/s", created*float64(b.rebSize)/1e6/dur)
	s.add(key+rebMoved, "", created/float64(len(ids)))
	s.add(key+rebPredict, "", float64(len(predicted))/float64(len(ids)))
	s.add(key+rebWall, "s", wall.Seconds())
	s.add(key+rebClientP+"50", "ms", msOf(lat.Quantile(0.50)))
	s.add(key+rebClientP+"99", "ms", msOf(lat.Quantile(0.99)))
	return nil
}

// awaitJoinRebalance adds newNode and waits until a JOINED rebalance has
// finished since runsBefore of them had.
func (b *bench) awaitJoinRebalance(ctx context.Context, bc *benchCluster, newNode string, runsBefore float64, deadline time.Time) error {
	if _, err := bc.AddNode(ctx); err != nil {
		return err
	}
	for {
		n, err := metric(ctx, bc.CoordinatorURL(), `dfs_rebalance_runs_total{trigger="JOINED"}`)
		if err != nil {
			return err
		}
		if n > runsBefore {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no JOINED rebalance finished by %s after %s's start", deadline.Format(time.TimeOnly), newNode)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startPerf samples the CPU of pid with perf for the warm-up and window of
// one measurement, and returns a function that waits for perf and writes
// its report beside the JSON results. Without perf it notes the gap.
func (b *bench) startPerf(ctx context.Context, pid int, name string) func() {
	if _, err := exec.LookPath("perf"); err != nil {
		b.res.Notes = append(b.res.Notes, "no CPU profile: perf is not on PATH")
		return nil
	}
	dir := filepath.Dir(b.jsonPath)
	data := filepath.Join(b.root, name+".perf.data")
	secs := strconv.FormatFloat((b.warm + b.window).Seconds(), 'f', 1, 64)
	rec := exec.CommandContext(ctx, "perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(pid), "-o", data, "--", "sleep", secs)
	var out bytes.Buffer
	rec.Stdout, rec.Stderr = &out, &out
	if err := rec.Start(); err != nil {
		b.res.Notes = append(b.res.Notes, "no CPU profile: "+err.Error())
		return nil
	}
	return func() {
		if err := rec.Wait(); err != nil {
			b.res.Notes = append(b.res.Notes, fmt.Sprintf("no CPU profile: perf record: %v: %s", err, out.String()))
			return
		}
		report := filepath.Join(dir, name+".perf.txt")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.res.Notes = append(b.res.Notes, "no CPU profile report: "+err.Error())
			return
		}
		f, err := os.Create(report)
		if err != nil {
			b.res.Notes = append(b.res.Notes, "no CPU profile report: "+err.Error())
			return
		}
		defer f.Close()
		var flat bytes.Buffer
		rep := exec.CommandContext(ctx, "perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none", "--sort", "symbol", "--percent-limit", "0")
		rep.Stdout = &flat
		if err := rep.Run(); err != nil {
			b.res.Notes = append(b.res.Notes, "no CPU profile report: "+err.Error())
			return
		}
		shares, err := perfShares(bytes.NewReader(flat.Bytes()))
		if err != nil {
			b.res.Notes = append(b.res.Notes, "no CPU profile report: "+err.Error())
			return
		}
		fmt.Fprintf(f, "# coordinator CPU samples by package (kernel = system calls, scheduling, TCP, file system)\n")
		writeShares(f, shares)
		fmt.Fprintf(f, "\n# flat profile by symbol\n")
		_, _ = f.Write(flat.Bytes())
		b.res.Notes = append(b.res.Notes, "coordinator CPU profile during the first 4 KiB upload run (perf, flat, by symbol): "+report)
	}
}

// largePhases says which parts of the large phase run.
type largePhases struct{ large, rss, cli bool }

// rssCLIRun writes b.rssSize bytes to a file, sends it with the dfs binary
// (`dfs put`, as a person would: session parts, -parallel 4) and records the
// peak RSS of the coordinator (VmHWM, reset before) and of dfs itself. The
// file and the stored copy are removed after.
func (b *bench) rssCLIRun(ctx context.Context, bc *benchCluster, s *series, block []byte) error {
	block[1]++
	path := filepath.Join(b.root, "rss-cli.bin")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	_, err = io.Copy(f, io.LimitReader(&repeatReader{buf: block}, b.rssSize))
	if err = errors.Join(err, f.Close()); err != nil {
		return fmt.Errorf("write the %s file: %w", sizeText(b.rssSize), err)
	}
	pid := bc.PID(localcluster.CoordinatorName)
	if pid == 0 {
		return errors.New("the coordinator is not running")
	}
	if err := resetPeakRSS(pid); err != nil {
		return fmt.Errorf("reset the coordinator's peak RSS: %w", err)
	}
	var out, stderr strings.Builder
	cmd := exec.CommandContext(ctx, filepath.Join(b.binDir, "dfs"), "put", "-url", bc.CoordinatorURL(), path)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	mbps, err := timedBytes(b.rssSize, cmd.Run)
	if err != nil {
		return fmt.Errorf("dfs put of %s: %w: %s", sizeText(b.rssSize), err, stderr.String())
	}
	kib, err := procStatus(pid, "VmHWM")
	if err != nil {
		return err
	}
	s.add(dfsCLICoord, "MiB", float64(kib)/1024)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.add(dfsCLISelf, "MiB", float64(ru.Maxrss)/1024) // KiB on Linux
	}
	s.add(dfsCLIUpload, "MB/s", mbps)
	id, _, _ := strings.Cut(strings.TrimSpace(out.String()), " ")
	if id == "" {
		return fmt.Errorf("dfs put printed no file id: %q", out.String())
	}
	_, err = bc.api.Delete(ctx, id)
	return err
}
