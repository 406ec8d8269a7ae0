package storagenode_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/storagenode"
)

func TestConfigDefaults(t *testing.T) {
	cfg, err := storagenode.LoadConfig(envconf.FromMap(nil))
	require.NoError(t, err)
	require.Equal(t, storagenode.Config{
		BindHost:             "",
		Port:                 9001,
		NodeID:               "node-1",
		DataDir:              filepath.Join("data", "node-1"),
		AdvertisedHost:       "localhost",
		AdvertisedPort:       9001,
		CoordinatorURL:       "",
		RegistrationInterval: 15 * time.Second,
		ClusterToken:         "",
		CapacityBytes:        0,
		SyncMode:             blob.DefaultSyncMode(),
		SyncBatchMax:         blob.DefaultBatchSyncMax,
		Layout:               "", // the data directory's own, volumes for a new one
		VolumeSize:           blob.DefaultVolumeSize,
		InlineMax:            blob.DefaultInlineMax,
		CompactThreshold:     0.3,
		ScrubPeriod:          7 * 24 * time.Hour,
		ScrubBandwidth:       32 << 20,
		LogLevel:             "info",
		LogFormat:            "text",
		Weight:               1,
		ShutdownTimeout:      10 * time.Second,
	}, cfg)
}

func TestConfigFromEnvironment(t *testing.T) {
	cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{
		"SERVER_HOST":               "127.0.0.1",
		"SERVER_PORT":               "9100",
		"STORAGE_NODE_ID":           "node-7.rack_2",
		"STORAGE_DATA_DIRECTORY":    "/var/lib/dfs",
		"STORAGE_ADVERTISED_HOST":   "storage-node-7.storage.svc.cluster.local",
		"STORAGE_ADVERTISED_PORT":   "19100",
		"COORDINATOR_URL":           "https://coordinator:8080/",
		"REGISTRATION_INTERVAL":     "2m",
		"CLUSTER_TOKEN":             "s3cret",
		"STORAGE_CAPACITY_BYTES":    "10GiB",
		"STORAGE_SYNC_MODE":         "File",
		"STORAGE_SYNC_BATCH_MAX":    "4MiB",
		"STORAGE_LAYOUT":            "Volumes",
		"STORAGE_VOLUME_SIZE":       "64MiB",
		"STORAGE_INLINE_MAX":        "64KiB",
		"STORAGE_COMPACT_THRESHOLD": "0.5",
		"SCRUB_PERIOD":              "24h",
		"SCRUB_BANDWIDTH":           "8MiB",
		"LOG_LEVEL":                 "DEBUG",
		"LOG_FORMAT":                "json",
		"PPROF_ADDR":                "127.0.0.1:6061",
		"STORAGE_ZONE":              "eu-west-1a",
		"STORAGE_WEIGHT":            "2.5",
	}))
	require.NoError(t, err)
	require.Equal(t, storagenode.Config{
		BindHost:             "127.0.0.1",
		Port:                 9100,
		NodeID:               "node-7.rack_2",
		DataDir:              "/var/lib/dfs",
		AdvertisedHost:       "storage-node-7.storage.svc.cluster.local",
		AdvertisedPort:       19100,
		CoordinatorURL:       "https://coordinator:8080/",
		RegistrationInterval: 2 * time.Minute,
		ClusterToken:         "s3cret",
		CapacityBytes:        10 << 30,
		SyncMode:             blob.SyncFile,
		SyncBatchMax:         4 << 20,
		Layout:               blob.LayoutVolumes,
		VolumeSize:           64 << 20,
		InlineMax:            64 << 10,
		CompactThreshold:     0.5,
		ScrubPeriod:          24 * time.Hour,
		ScrubBandwidth:       8 << 20,
		LogLevel:             "debug",
		LogFormat:            "json",
		PprofAddr:            "127.0.0.1:6061",
		Zone:                 "eu-west-1a",
		Weight:               2.5,
		ShutdownTimeout:      10 * time.Second,
	}, cfg)
	auto, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{"STORAGE_WEIGHT": "Auto"}))
	require.NoError(t, err)
	require.True(t, auto.WeightAuto)
}

func TestConfigDerivedDefaults(t *testing.T) {
	cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{"SERVER_PORT": "9002", "STORAGE_NODE_ID": "node-2"}))
	require.NoError(t, err)
	require.Equal(t, 9002, cfg.AdvertisedPort, "the advertised port defaults to the server port")
	require.Equal(t, filepath.Join("data", "node-2"), cfg.DataDir, "the data directory defaults to data/<node id>")
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		name, value string
	}{
		{"SERVER_HOST", "not a host!"},
		{"SERVER_PORT", "0"},
		{"SERVER_PORT", "65536"},
		{"SERVER_PORT", "http"},
		{"STORAGE_NODE_ID", "node 1"},
		{"STORAGE_NODE_ID", "-node"},
		{"STORAGE_NODE_ID", "../node"},
		{"STORAGE_NODE_ID", strings.Repeat("n", 64)},
		{"STORAGE_ADVERTISED_HOST", "http://node-1"},
		{"STORAGE_ADVERTISED_HOST", "node_1"},
		{"STORAGE_ADVERTISED_PORT", "-1"},
		{"COORDINATOR_URL", "coordinator:8080"},
		{"COORDINATOR_URL", "ftp://coordinator"},
		{"COORDINATOR_URL", "http://"},
		{"COORDINATOR_URL", "http://c:8080/?x=1"},
		{"REGISTRATION_INTERVAL", "15"},
		{"REGISTRATION_INTERVAL", "-5s"},
		{"STORAGE_CAPACITY_BYTES", "lots"},
		{"STORAGE_CAPACITY_BYTES", "-1"},
		{"STORAGE_SYNC_MODE", "fast"},
		{"STORAGE_SYNC_MODE", "fsync"},
		{"STORAGE_SYNC_BATCH_MAX", "0"},
		{"STORAGE_SYNC_BATCH_MAX", "big"},
		{"STORAGE_LAYOUT", "heap"},
		{"STORAGE_INLINE_MAX", "0"},
		{"STORAGE_INLINE_MAX", "-1KiB"},
		{"STORAGE_VOLUME_SIZE", "1MiB"},
		{"STORAGE_VOLUME_SIZE", "huge"},
		{"STORAGE_COMPACT_THRESHOLD", "0"},
		{"STORAGE_COMPACT_THRESHOLD", "100%"},
		{"STORAGE_COMPACT_THRESHOLD", "-5%"},
		{"STORAGE_COMPACT_THRESHOLD", "lots"},
		{"STORAGE_COMPACT_THRESHOLD", "NaN"},
		{"LOG_LEVEL", "verbose"},
		{"LOG_FORMAT", "xml"},
		{"PPROF_ADDR", "6061"},
		{"SCRUB_PERIOD", "7d"},
		{"SCRUB_PERIOD", "0s"},
		{"SCRUB_PERIOD", "500ms"},
		{"SCRUB_BANDWIDTH", "fast"},
		{"SCRUB_BANDWIDTH", "0"},
		{"SCRUB_BANDWIDTH", "1KiB"},
		{"STORAGE_ZONE", "rack a"},
		{"STORAGE_ZONE", strings.Repeat("z", 256)},
		{"STORAGE_WEIGHT", "0"},
		{"STORAGE_WEIGHT", "-1"},
		{"STORAGE_WEIGHT", "1001"},
		{"STORAGE_WEIGHT", "heavy"},
		{"STORAGE_WEIGHT", "NaN"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			_, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{tc.name: tc.value}))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.name+"=")
		})
	}
}

func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{
		"SERVER_PORT": "x", "STORAGE_NODE_ID": "bad id", "COORDINATOR_URL": "nope",
	}))
	require.Error(t, err)
	for _, name := range []string{"SERVER_PORT", "STORAGE_NODE_ID", "COORDINATOR_URL"} {
		require.Contains(t, err.Error(), name)
	}
}

func TestConfigCompactThresholdForms(t *testing.T) {
	for in, want := range map[string]float64{"30%": 0.3, "0.3": 0.3, " 45 % ": 0.45, "99.5%": 0.995, "0.01": 0.01} {
		cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{"STORAGE_COMPACT_THRESHOLD": in}))
		require.NoError(t, err, in)
		require.InDelta(t, want, cfg.CompactThreshold, 1e-9, in)
	}
}

func TestConfigAcceptsIPs(t *testing.T) {
	for _, host := range []string{"10.0.0.7", "::1", "node-1", "storage-node-1.storage"} {
		_, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{"STORAGE_ADVERTISED_HOST": host, "SERVER_HOST": host}))
		require.NoError(t, err, host)
	}
}

func TestConfigSyncModeNeedsSupport(t *testing.T) {
	cfg, err := storagenode.LoadConfig(envconf.FromMap(map[string]string{"STORAGE_SYNC_MODE": "batch"}))
	if why := blob.BatchSyncSupported(); why != nil {
		require.ErrorContains(t, err, "STORAGE_SYNC_MODE=")
		require.ErrorContains(t, err, why.Error())
		return
	}
	require.NoError(t, err)
	require.Equal(t, blob.SyncBatch, cfg.SyncMode)
}
