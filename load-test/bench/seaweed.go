package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/localcluster"
	"github.com/dfs-project/dfs/load-test/harness"
)

// The peer's figures: SeaweedFS (a weed binary given as WEED=path) measured
// through its filer with the same load generator as dfs, in the same run.
const (
	peerUploadSynced   = "peer.upload4k-synced.rate"
	peerUploadSyncedP  = "peer.upload4k-synced.p"
	peerUpload         = "peer.upload4k.rate"
	peerUploadP        = "peer.upload4k.p"
	peerDownload       = "peer.download4k.rate"
	peerDownloadP      = "peer.download4k.p"
	peerBigUp          = "peer.upload-large.mbps"
	peerBigDown        = "peer.download-large.mbps"
	peerBigUpSynced    = "peer.upload-large-synced.mbps"
	peerReplication    = "002" // 2 more copies on other servers of the same rack: 3 in all
	peerVolumeServers  = 3
	peerSyncedPrefix   = "/synced/"
	peerUnsyncedPrefix = "/unsynced/"
)

// weedPorts are the loopback ports of one SeaweedFS cluster: HTTP and gRPC
// of the master, of each volume server and of the filer.
type weedPorts struct {
	master, masterGRPC int
	volume, volumeGRPC [peerVolumeServers]int
	filer, filerGRPC   int
}

// weedArgs are the command lines of a SeaweedFS cluster like the dfs
// cluster the bench starts: one master whose default replication keeps 3
// copies on 3 volume servers of one rack, the 3 volume servers, each on its
// own directory, and one filer, all on 127.0.0.1 and under dir. Logs go to
// dir/logs; -config_dir points at an empty directory so that no toml file
// of the user's changes the cluster.
func weedArgs(dir string, p weedPorts) (master []string, volumes [][]string, filer []string) {
	global := func(cmd string) []string {
		return []string{"-logdir=" + filepath.Join(dir, "logs"), "-config_dir=" + filepath.Join(dir, "config"), cmd}
	}
	masterAddr := "127.0.0.1:" + strconv.Itoa(p.master) + "." + strconv.Itoa(p.masterGRPC)
	master = append(global("master"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-port="+strconv.Itoa(p.master), "-port.grpc="+strconv.Itoa(p.masterGRPC),
		"-mdir="+filepath.Join(dir, "master"),
		"-peers=none",
		"-defaultReplication="+peerReplication,
	)
	for i := range peerVolumeServers {
		volumes = append(volumes, append(global("volume"),
			"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
			"-port="+strconv.Itoa(p.volume[i]), "-port.grpc="+strconv.Itoa(p.volumeGRPC[i]),
			"-dir="+weedVolumeDir(dir, i),
			"-master="+masterAddr,
			"-dataCenter=dc1", "-rack=rack1",
			// Stop at once on SIGTERM instead of the default 10 s wait.
			"-preStopSeconds=0",
		))
	}
	filer = append(global("filer"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-port="+strconv.Itoa(p.filer), "-port.grpc="+strconv.Itoa(p.filerGRPC),
		"-master="+masterAddr,
		"-defaultStoreDir="+filepath.Join(dir, "filer"),
		"-localSocket="+filepath.Join(dir, "filer.sock"),
	)
	return master, volumes, filer
}

func weedVolumeDir(dir string, i int) string {
	return filepath.Join(dir, "volume-"+strconv.Itoa(i+1))
}

// weedShellScript configures the synced prefix: every write under it is
// fsync'd by each volume server holding a copy before the answer (the
// filer asks for it with fsync=true on the upload to the volume server,
// which passes it on to the replicas).
func weedShellScript() string {
	return "fs.configure -locationPrefix=" + peerSyncedPrefix + " -fsync=true -apply\n"
}

// filerConfHasFsync reports whether the output of fs.configure shows a rule
// for prefix with fsync on. ToText writes the filer configuration as
// protobuf JSON: {"locations": [{"locationPrefix": "/synced/", "fsync": true}]}.
func filerConfHasFsync(out, prefix string) bool {
	start := strings.Index(out, "{")
	end := strings.LastIndex(out, "}")
	if start < 0 || end < start {
		return false
	}
	var conf struct {
		Locations []struct {
			LocationPrefix string `json:"locationPrefix"`
			Fsync          *bool  `json:"fsync"`
		} `json:"locations"`
	}
	if json.Unmarshal([]byte(out[start:end+1]), &conf) != nil {
		return false
	}
	for _, l := range conf.Locations {
		if l.LocationPrefix == prefix && l.Fsync != nil && *l.Fsync {
			return true
		}
	}
	return false
}

// topologyDataNodes counts the volume servers in the master's /dir/status.
func topologyDataNodes(r io.Reader) (int, error) {
	var st struct {
		Topology struct {
			DataCenters []struct {
				Racks []struct {
					DataNodes []json.RawMessage
				}
			}
		}
	}
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return 0, fmt.Errorf("decode /dir/status: %w", err)
	}
	n := 0
	for _, dc := range st.Topology.DataCenters {
		for _, rack := range dc.Racks {
			n += len(rack.DataNodes)
		}
	}
	return n, nil
}

// weedProc is one running weed process.
type weedProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// weedCluster is a running SeaweedFS cluster and its directory.
type weedCluster struct {
	dir   string
	ports weedPorts
	procs []*weedProc
	hc    *http.Client
}

func (w *weedCluster) masterURL() string { return "http://127.0.0.1:" + strconv.Itoa(w.ports.master) }
func (w *weedCluster) filerURL() string  { return "http://127.0.0.1:" + strconv.Itoa(w.ports.filer) }

// startWeed starts the peer's cluster under b.root and waits until the
// filer answers and every volume server has joined the master.
func (b *bench) startWeed(ctx context.Context, bin string) (*weedCluster, error) {
	dir := filepath.Join(b.root, "seaweedfs")
	for _, d := range []string{"logs", "config", "master", "filer"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	for i := range peerVolumeServers {
		if err := os.MkdirAll(weedVolumeDir(dir, i), 0o755); err != nil {
			return nil, err
		}
	}
	ps, err := localcluster.FreePorts("127.0.0.1", 4+2*peerVolumeServers)
	if err != nil {
		return nil, err
	}
	var p weedPorts
	p.master, p.masterGRPC, p.filer, p.filerGRPC = ps[0], ps[1], ps[2], ps[3]
	for i := range peerVolumeServers {
		p.volume[i], p.volumeGRPC[i] = ps[4+2*i], ps[5+2*i]
	}
	w := &weedCluster{dir: dir, ports: p, hc: httpClient(b.clients)}
	masterArgs, volumeArgs, filerArgs := weedArgs(dir, p)
	fail := func(err error) (*weedCluster, error) {
		w.stop()
		return nil, err
	}
	if err := w.start(bin, "master", masterArgs); err != nil {
		return fail(err)
	}
	if err := w.await(ctx, "master", func() error { return getOK(ctx, w.hc, w.masterURL()+"/cluster/status") }); err != nil {
		return fail(err)
	}
	for i, args := range volumeArgs {
		if err := w.start(bin, "volume-"+strconv.Itoa(i+1), args); err != nil {
			return fail(err)
		}
	}
	if err := w.await(ctx, "volume servers", func() error {
		resp, err := w.get(ctx, w.masterURL()+"/dir/status")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := topologyDataNodes(resp.Body)
		if err == nil && n != peerVolumeServers {
			err = fmt.Errorf("%d of %d volume servers joined", n, peerVolumeServers)
		}
		return err
	}); err != nil {
		return fail(err)
	}
	if err := w.start(bin, "filer", filerArgs); err != nil {
		return fail(err)
	}
	if err := w.await(ctx, "filer", func() error { return getOK(ctx, w.hc, w.filerURL()+"/") }); err != nil {
		return fail(err)
	}
	// Apply the rule, then read the stored configuration back in a second
	// shell and check that it holds the rule.
	var out []byte
	for _, script := range []string{weedShellScript(), "fs.configure\n"} {
		shell := exec.CommandContext(ctx, bin, "-logdir="+filepath.Join(dir, "logs"), "-config_dir="+filepath.Join(dir, "config"), "shell",
			"-master=127.0.0.1:"+strconv.Itoa(p.master)+"."+strconv.Itoa(p.masterGRPC),
			"-filer=127.0.0.1:"+strconv.Itoa(p.filer)+"."+strconv.Itoa(p.filerGRPC))
		shell.Dir = dir
		shell.Stdin = strings.NewReader(script)
		if out, err = shell.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("weed shell %q: %w: %s", strings.TrimSpace(script), err, out))
		}
	}
	if !filerConfHasFsync(string(out), peerSyncedPrefix) {
		return fail(fmt.Errorf("weed shell fs.configure did not set fsync on %s: %s", peerSyncedPrefix, out))
	}
	// The filer takes up a new filer.conf from its own metadata events;
	// give it a moment before the first synced write.
	select {
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(2 * time.Second):
	}
	return w, nil
}

func (w *weedCluster) get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	return w.hc.Do(req)
}

func getOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	return drain(hc.Do(req))
}

// start starts one weed process, its output in dir/logs/<name>.out. It
// runs in its own process group (a Ctrl-C reaches the bench, which stops
// it) and dies with the bench if the bench is killed.
func (w *weedCluster) start(bin, name string, args []string) error {
	out, err := os.Create(filepath.Join(w.dir, "logs", name+".out"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "TMPDIR="+w.dir)
	cmd.SysProcAttr = weedSysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start weed %s: %w", name, err)
	}
	p := &weedProc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	w.procs = append(w.procs, p)
	return nil
}

// await polls ready until it succeeds, a process exits or a minute passes.
func (w *weedCluster) await(ctx context.Context, what string, ready func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		for _, p := range w.procs {
			select {
			case <-p.done:
				return fmt.Errorf("weed %s exited (%v) while waiting for the %s; see %s", p.name, p.cmd.ProcessState, what, filepath.Join(w.dir, "logs", p.name+".out"))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("SeaweedFS %s not ready within a minute: %v", what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM to every process at once and SIGKILL to any still
// running 5 s later; it returns when all have exited. The data is not kept,
// so nothing waits for an orderly shutdown.
func (w *weedCluster) stop() {
	for _, p := range w.procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for _, p := range w.procs {
		select {
		case <-p.done:
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	w.procs = nil
}

// pids names the running weed processes, and this one, for meterCPU.
func (w *weedCluster) pids() map[string]int {
	m := map[string]int{loadGenerator: os.Getpid()}
	for _, p := range w.procs {
		m[p.name] = p.cmd.Process.Pid
	}
	return m
}

// peerState is the peer's cluster during a bench run and what was measured
// on it so far; nil when WEED is not set or the seaweedfs phase is not run.
type peerState struct {
	w         *weedCluster
	s         *series
	smallRuns int // small runs done (runPeerSmall)
	largeRuns int
	uploaded  int64               // bytes of the 4 KiB files stored
	sums      map[string][32]byte // 4 KiB files under peerUnsyncedPrefix, by path
	block     []byte
}

// runPeerSmall measures one run of the peer's 4 KiB uploads (synced, then
// unsynced) and of downloads of the unsynced files, if run is the next
// small run of the peer; dfs's small phases call it after each of their
// runs, so that the two alternate.
func (b *bench) runPeerSmall(ctx context.Context, run int) error {
	ps := b.peer
	if ps == nil || ps.smallRuns != run {
		return nil
	}
	ps.smallRuns++
	const size = 4 << 10
	var mu sync.Mutex
	for _, mode := range []struct {
		prefix, key string
	}{{peerSyncedPrefix, peerUploadSynced}, {peerUnsyncedPrefix, peerUpload}} {
		if err := ctx.Err(); err != nil {
			return err // interrupted: do not wait out another window
		}
		b.logf("SeaweedFS 4 KiB uploads under %s, run %d of %d (%d clients, %s)", mode.prefix, run+1, b.runs, b.clients, b.window)
		cpu := meterCPU(ps.w.pids(), b.warm, b.window)
		r := closedLoop(ctx, b.clients, b.warm, b.window, func(ctx context.Context, w, i int) error {
			c := harness.Content{Seed: 1<<63 | uint64(run)<<48 | uint64(w)<<32 | uint64(i), Size: size}
			data, err := io.ReadAll(c.Reader())
			if err != nil {
				return err
			}
			path := fmt.Sprintf("%sr%d/w%d/%d.bin", mode.prefix, run, w, i)
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			if err := ps.w.upload(rctx, path, bytes.NewReader(data), size); err != nil {
				return err
			}
			mu.Lock()
			ps.uploaded += size
			if mode.prefix == peerUnsyncedPrefix {
				ps.sums[path] = sha256.Sum256(data)
			}
			mu.Unlock()
			return nil
		})
		b.loopFailures("SeaweedFS 4 KiB upload under "+mode.prefix, r)
		addRate(ps.s, mode.key, r)
		addPeerCPU(ps.s, strings.TrimPrefix(strings.TrimSuffix(mode.key, ".rate"), "peer."), r, cpu)
	}
	paths := make([]string, 0, len(ps.sums))
	for p := range ps.sums {
		paths = append(paths, p)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(paths) == 0 {
		return errors.New("no SeaweedFS 4 KiB upload succeeded")
	}
	b.logf("SeaweedFS 4 KiB downloads, run %d of %d", run+1, b.runs)
	cpu := meterCPU(ps.w.pids(), b.warm, b.window)
	r := closedLoop(ctx, b.clients, b.warm, b.window, func(ctx context.Context, _, _ int) error {
		path := paths[rand.IntN(len(paths))]
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		return ps.w.downloadSum(rctx, path, size, ps.sums[path])
	})
	b.loopFailures("SeaweedFS 4 KiB download", r)
	addRate(ps.s, peerDownload, r)
	addPeerCPU(ps.s, "download4k", r, cpu)
	return nil
}

// addPeerCPU adds the CPU of the peer's processes together and of the load
// generator, in cores, and the peer's in CPU microseconds per operation of
// r (as addCPU does for dfs).
func addPeerCPU(s *series, phase string, r loopResult, wait func() (map[string]float64, float64)) {
	byProc, _ := wait()
	peer := 0.0
	for name, c := range byProc {
		if name != loadGenerator {
			peer += c
		}
	}
	s.add("peer.cpu."+phase+".seaweedfs", "cores", peer)
	s.add("peer.cpu."+phase+".bench", "cores", byProc[loadGenerator])
	if rate := r.rate(); rate > 0 {
		s.add("peer.cpu."+phase+".seaweedfs"+usPerOp, "µs/op", cpuMicros(peer, rate))
	}
}

// runPeerLarge measures one upload and one download of b.largeSize bytes
// through the filer under the unsynced prefix, and one upload under the
// synced one, if run is the peer's next large run.
func (b *bench) runPeerLarge(ctx context.Context, run int) error {
	ps := b.peer
	if ps == nil || ps.largeRuns != run {
		return nil
	}
	ps.largeRuns++
	if ps.block == nil {
		ps.block = make([]byte, 4<<20)
		if _, err := io.ReadFull(harness.Content{Seed: 43, Size: int64(len(ps.block))}.Reader(), ps.block); err != nil {
			return err
		}
	}
	b.logf("SeaweedFS %s upload and download, run %d of %d", sizeText(b.largeSize), run+1, b.runs)
	for _, mode := range []struct{ prefix, key string }{{peerUnsyncedPrefix, peerBigUp}, {peerSyncedPrefix, peerBigUpSynced}} {
		ps.block[0] = byte(run)
		path := fmt.Sprintf("%slarge-%d.bin", mode.prefix, run)
		mbps, err := timedBytes(b.largeSize, func() error {
			return ps.w.upload(ctx, path, io.LimitReader(&repeatReader{buf: ps.block}, b.largeSize), b.largeSize)
		})
		if err != nil {
			return fmt.Errorf("SeaweedFS upload of %s under %s: %w", sizeText(b.largeSize), mode.prefix, err)
		}
		ps.s.add(mode.key, "MB/s", mbps)
		if mode.prefix == peerUnsyncedPrefix {
			mbps, err = timedBytes(b.largeSize, func() error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, ps.w.filerURL()+path, nil)
				if err != nil {
					return err
				}
				return drainExact(ps.w.hc.Do(req))(b.largeSize)
			})
			if err != nil {
				return fmt.Errorf("SeaweedFS download of %s: %w", sizeText(b.largeSize), err)
			}
			ps.s.add(peerBigDown, "MB/s", mbps)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, ps.w.filerURL()+path, nil)
		if err != nil {
			return err
		}
		if err := drain(ps.w.hc.Do(req)); err != nil {
			return fmt.Errorf("SeaweedFS delete of %s: %w", path, err)
		}
	}
	return nil
}

// upload sends size bytes of body to the filer as a multipart form, as
// dfs's client sends its uploads, and checks the answer.
func (w *weedCluster) upload(ctx context.Context, path string, body io.Reader, size int64) error {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		part, err := mw.CreateFormFile("file", filepath.Base(path))
		if err == nil {
			_, err = io.Copy(part, body)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.filerURL()+path, pr)
	if err != nil {
		pr.Close()
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := w.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("filer answered %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	}
	var res struct {
		Size  int64  `json:"size"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return fmt.Errorf("filer answer %q: %w", answer, err)
	}
	if res.Error != "" || res.Size != size {
		return fmt.Errorf("filer stored %d of %d bytes: %s", res.Size, size, res.Error)
	}
	return nil
}

// downloadSum reads path from the filer and checks its length and SHA-256
// (dfs's client verifies every download the same way).
func (w *weedCluster) downloadSum(ctx context.Context, path string, size int64, sum [32]byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.filerURL()+path, nil)
	if err != nil {
		return err
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("filer answered %d for %s", resp.StatusCode, path)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return err
	}
	if n != size || !bytes.Equal(h.Sum(nil), sum[:]) {
		return fmt.Errorf("%s: got %d bytes, not the %d uploaded", path, n, size)
	}
	return nil
}

// volumeBytes is the size of the volume data files (.dat) under dir.
func volumeBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".dat" {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}

// checkCopies fails unless each volume server's volume files hold at least
// the bytes of every 4 KiB file stored: with 3 copies on 3 servers each
// server holds every file.
func (w *weedCluster) checkCopies(stored int64) error {
	for i := range peerVolumeServers {
		n, err := volumeBytes(weedVolumeDir(w.dir, i))
		if err != nil {
			return err
		}
		if n < stored {
			return fmt.Errorf("SeaweedFS volume server %d holds %d bytes of volume data, less than the %d bytes of 4 KiB files stored: not 3 copies", i+1, n, stored)
		}
	}
	return nil
}

// startPeer starts the peer for the seaweedfs phase before the phases run,
// so that dfs's runs and the peer's alternate; it returns the function that
// stops it. Without WEED it notes that the peer is not measured.
func (b *bench) startPeer(ctx context.Context) (func(), error) {
	bin := os.Getenv("WEED")
	if bin == "" {
		return func() {}, nil // run notes that the peer is not measured
	}
	b.logf("starting SeaweedFS (%s): master, %d volume servers, filer", bin, peerVolumeServers)
	w, err := b.startWeed(ctx, bin)
	if err != nil {
		return func() {}, err
	}
	b.peer = &peerState{w: w, s: newSeries(), sums: map[string][32]byte{}}
	b.res.Config["peer"] = fmt.Sprintf("SeaweedFS (%s): 1 master (-defaultReplication=%s), %d volume servers of one rack, 1 filer (defaults: leveldb2 store, -maxMB=4 chunks); 4 KiB files by multipart POST to the filer, %s with fs.configure -fsync=true, %s as default", bin, peerReplication, peerVolumeServers, peerSyncedPrefix, peerUnsyncedPrefix)
	return w.stop, nil
}

// seaweedfs runs the peer's small runs that no dfs phase ran beside its
// own, and checks that the peer stored 3 copies of what it acknowledged.
func (b *bench) seaweedfs(ctx context.Context) error {
	ps := b.peer
	if ps == nil {
		return nil
	}
	for run := ps.smallRuns; run < b.runs; run++ {
		if err := b.runPeerSmall(ctx, run); err != nil {
			return err
		}
	}
	if err := ps.w.checkCopies(ps.uploaded); err != nil {
		return err
	}
	b.res.Notes = append(b.res.Notes, fmt.Sprintf("SeaweedFS: each of the %d volume servers holds at least the %s of 4 KiB files the filer acknowledged (3 copies)", peerVolumeServers, sizeText(ps.uploaded)))
	return nil
}

// peerFigures runs the peer's large runs that the large phase did not run
// beside dfs's, and adds the peer's figures to the results.
func (b *bench) peerFigures(ctx context.Context) error {
	ps := b.peer
	if ps == nil {
		return nil
	}
	for run := ps.largeRuns; run < b.runs; run++ {
		if err := b.runPeerLarge(ctx, run); err != nil {
			return err
		}
	}
	figs := ps.s.figures()
	rename(figs, peerUploadSynced, fmt.Sprintf("SeaweedFS 4 KiB upload ×%d, fsync", b.clients))
	rename(figs, peerUploadSyncedP+"50", "SeaweedFS 4 KiB upload p50, fsync")
	rename(figs, peerUploadSyncedP+"99", "SeaweedFS 4 KiB upload p99, fsync")
	rename(figs, peerUpload, fmt.Sprintf("SeaweedFS 4 KiB upload ×%d, default", b.clients))
	rename(figs, peerUploadP+"50", "SeaweedFS 4 KiB upload p50, default")
	rename(figs, peerUploadP+"99", "SeaweedFS 4 KiB upload p99, default")
	rename(figs, peerDownload, fmt.Sprintf("SeaweedFS 4 KiB download ×%d", b.clients))
	rename(figs, peerDownloadP+"50", "SeaweedFS 4 KiB download p50")
	rename(figs, peerDownloadP+"99", "SeaweedFS 4 KiB download p99")
	rename(figs, peerBigUp, "SeaweedFS "+sizeText(b.largeSize)+" upload, default")
	rename(figs, peerBigUpSynced, "SeaweedFS "+sizeText(b.largeSize)+" upload, fsync")
	rename(figs, peerBigDown, "SeaweedFS "+sizeText(b.largeSize)+" download")
	for _, phase := range []string{"upload4k-synced", "upload4k", "download4k"} {
		rename(figs, "peer.cpu."+phase+".seaweedfs", "SeaweedFS processes' CPU during "+phase)
		rename(figs, "peer.cpu."+phase+".bench", "load generator's CPU during SeaweedFS "+phase)
		rename(figs, "peer.cpu."+phase+".seaweedfs"+usPerOp, "SeaweedFS processes' CPU per operation, "+phase)
	}
	b.res.addFigures(figs)
	return nil
}

// peerRows sets each dfs figure beside the peer's, with the project's
// targets (PERFORMANCE.md's aims) as notes. A pair whose peer figure was not
// measured gets no row: the dfs figure has its rows beside the baselines.
func (b *bench) peerRows() {
	row := func(dfs, peer, note string) {
		if f, ok := b.res.Figures[peer]; ok && f.valid() {
			b.res.row(dfs, peer, 0, note)
		}
	}
	sfx, _ := layoutSuffix("volumes")
	for _, s := range []string{"", sfx} {
		row(layoutKey(dfsUpload, s), peerUploadSynced, "target ≥ 1.5")
		row(layoutKey(dfsUpload, s), peerUpload, "target ≥ 1.2")
		row(layoutKey(dfsUploadP, s)+"99", peerUploadSyncedP+"99", "target ≤ 1")
		row(layoutKey(dfsUploadP, s)+"99", peerUploadP+"99", "")
		row(layoutKey(dfsDownload, s), peerDownload, "target ≥ 1.2")
		row(layoutKey(dfsDownloadP, s)+"99", peerDownloadP+"99", "")
		// What each system's own processes spent per operation. Below 1,
		// dfs spent less.
		row(dfsCPU+"upload4k"+s+servers+usPerOp, "peer.cpu.upload4k-synced.seaweedfs"+usPerOp, "")
		row(dfsCPU+"upload4k"+s+servers+usPerOp, "peer.cpu.upload4k.seaweedfs"+usPerOp, "")
		row(dfsCPU+"download4k"+s+servers+usPerOp, "peer.cpu.download4k.seaweedfs"+usPerOp, "")
	}
	row(dfsBigUp, peerBigUp, "target ≥ 2")
	row(dfsBigUp, peerBigUpSynced, "")
	row(dfsBigDown, peerBigDown, "target ≥ 2")
}
