package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWeedArgs(t *testing.T) {
	p := weedPorts{master: 1000, masterGRPC: 1001, filer: 1002, filerGRPC: 1003,
		volume: [peerVolumeServers]int{2000, 2002, 2004}, volumeGRPC: [peerVolumeServers]int{2001, 2003, 2005}}
	master, volumes, filer := weedArgs("/d", p)

	// The global options come before the command.
	require.Equal(t, []string{"-logdir=/d/logs", "-config_dir=/d/config", "master"}, master[:3])
	require.Subset(t, master, []string{"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=1000", "-port.grpc=1001", "-mdir=/d/master", "-peers=none", "-defaultReplication=002"})

	require.Len(t, volumes, 3)
	dirs := map[string]bool{}
	for i, v := range volumes {
		require.Equal(t, "volume", v[2])
		require.Subset(t, v, []string{"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master=127.0.0.1:1000.1001", "-rack=rack1", "-dataCenter=dc1", "-preStopSeconds=0"})
		require.Contains(t, v, "-port="+[]string{"2000", "2002", "2004"}[i])
		require.Contains(t, v, "-port.grpc="+[]string{"2001", "2003", "2005"}[i])
		for _, a := range v {
			if d, ok := strings.CutPrefix(a, "-dir="); ok {
				dirs[d] = true
			}
		}
	}
	require.Len(t, dirs, 3, "each volume server has its own directory")

	require.Equal(t, "filer", filer[2])
	require.Subset(t, filer, []string{"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-port=1002", "-port.grpc=1003", "-master=127.0.0.1:1000.1001", "-defaultStoreDir=/d/filer", "-localSocket=/d/filer.sock"})

	// Nothing listens beyond loopback or outside the given ports.
	for _, args := range append([][]string{master, filer}, volumes...) {
		for _, a := range args {
			if strings.HasPrefix(a, "-ip") {
				require.True(t, strings.HasSuffix(a, "=127.0.0.1"), a)
			}
		}
	}
}

func TestWeedShellScript(t *testing.T) {
	require.Equal(t, "fs.configure -locationPrefix=/synced/ -fsync=true -apply\n", weedShellScript())
}

func TestFilerConfHasFsync(t *testing.T) {
	// What `weed shell` prints for fs.configure: a prompt, then the filer
	// configuration as protobuf JSON.
	withRule := `> {
  "version": 0,
  "locations": [
    {
      "locationPrefix": "/synced/",
      "collection": "",
      "fsync": true,
      "volumeGrowthCount": 0
    }
  ]
}
> `
	require.True(t, filerConfHasFsync(withRule, "/synced/"))
	require.False(t, filerConfHasFsync(withRule, "/unsynced/"), "another prefix")
	require.False(t, filerConfHasFsync(strings.Replace(withRule, `"fsync": true`, `"fsync": false`, 1), "/synced/"))
	require.False(t, filerConfHasFsync(strings.Replace(withRule, `"fsync": true,`, ``, 1), "/synced/"), "fsync unset inherits: not on")
	require.False(t, filerConfHasFsync(`{"version": 0, "locations": []}`, "/synced/"))
	require.False(t, filerConfHasFsync("error: connection refused", "/synced/"))
	require.False(t, filerConfHasFsync("{ not json }", "/synced/"))
}

func TestTopologyDataNodes(t *testing.T) {
	status := `{"Topology":{"Max":24,"Free":21,"DataCenters":[{"Id":"dc1","Racks":[{"Id":"rack1","DataNodes":[{"Url":"127.0.0.1:1"},{"Url":"127.0.0.1:2"}]},{"Id":"rack2","DataNodes":[{"Url":"127.0.0.1:3"}]}]}]},"Version":"30GB 4.53"}`
	n, err := topologyDataNodes(strings.NewReader(status))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = topologyDataNodes(strings.NewReader(`{"Topology":{}}`))
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = topologyDataNodes(strings.NewReader("<html>"))
	require.Error(t, err)
}

func TestCheckCopies(t *testing.T) {
	dir := t.TempDir()
	w := &weedCluster{dir: dir}
	write := func(i int, name string, size int) {
		d := weedVolumeDir(dir, i)
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, name), make([]byte, size), 0o644))
	}
	for i := range peerVolumeServers {
		write(i, "1.dat", 3000)
		write(i, "2.dat", 2000)
		write(i, "1.idx", 9000) // not volume data
	}
	require.NoError(t, w.checkCopies(5000))
	err := w.checkCopies(5001)
	require.ErrorContains(t, err, "not 3 copies")
	// One server holding a third, as with replication 000.
	require.NoError(t, os.Remove(filepath.Join(weedVolumeDir(dir, 1), "2.dat")))
	require.ErrorContains(t, w.checkCopies(4000), "volume server 2")
}

func TestPeerRows(t *testing.T) {
	b := &bench{res: &Results{Figures: map[string]Figure{
		dfsUpload:                newFigure("dfs up", "/s", []float64{300}),
		peerUploadSynced:         newFigure("peer up fsync", "/s", []float64{200}),
		peerUpload:               newFigure("peer up", "/s", []float64{400}),
		dfsBigDown:               newFigure("dfs down", "MB/s", []float64{100}),
		peerBigDown:              newFigure("peer down", "MB/s", []float64{50}),
		dfsUploadP + "99":        newFigure("dfs p99", "ms", []float64{10}),
		peerUploadSyncedP + "99": newFigure("peer p99", "ms", []float64{20}),
		dfsCPU + "upload4k-volumes" + servers + usPerOp: newFigure("dfs cpu", "µs/op", []float64{600}),
		"peer.cpu.upload4k.seaweedfs" + usPerOp:         newFigure("peer cpu", "µs/op", []float64{1200}),
	}}}
	b.peerRows()
	got := map[string]float64{}
	for _, r := range b.res.Rows {
		got[r.DFS+" / "+r.Baseline] = r.Ratio
	}
	require.Equal(t, map[string]float64{
		dfsUpload + " / " + peerUploadSynced:            1.5,
		dfsUpload + " / " + peerUpload:                  0.75,
		dfsBigDown + " / " + peerBigDown:                2,
		dfsUploadP + "99 / " + peerUploadSyncedP + "99": 0.5,
		dfsCPU + "upload4k-volumes" + servers + usPerOp + " / peer.cpu.upload4k.seaweedfs" + usPerOp: 0.5,
	}, got)
	i := slices.IndexFunc(b.res.Rows, func(r Row) bool { return r.Baseline == peerUploadSynced })
	require.Equal(t, "target ≥ 1.5", b.res.Rows[i].Note)
}
