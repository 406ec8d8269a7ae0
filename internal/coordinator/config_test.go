package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
)

func TestConfigDefaults(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(nil))
	require.NoError(t, err)
	require.Equal(t, Config{
		Port: 8080, DataDir: "./data/coordinator", ReplicationFactor: 3, VirtualNodes: 100,
		MaxFileSize: 512 << 20, HealthCheckInterval: 10 * time.Second, HealthProbeTimeout: 2 * time.Second,
		HealthFailureThreshold: 2, HealthSuccessThreshold: 2, RebalanceOnMembershipChange: true,
		RepairInterval: time.Minute, VerifyChecksumOnDownload: true, DownloadBufferSize: 1 << 20,
		CacheEnabled: true, CacheMetadataTTL: 2 * time.Minute, PendingUploadTimeout: 15 * time.Minute, PendingRecordDelay: time.Second,
		AntiEntropyInterval: 10 * time.Minute, AntiEntropyRate: 2000, AntiEntropyOrphanGrace: 30 * time.Minute,
		ReplicaWriteConcurrency: 64, LocalCacheEntries: 25000, SQLiteCheckpointPages: 10000, ContentCacheMaxFile: 64 << 10, NodeStallTimeout: 30 * time.Second, SignedURLTTL: 5 * time.Minute, NodeBatchMax: 64, NodeBatchInflight: 2, RebalanceParallelism: 32, SpoolMemoryMax: 256 << 10, SpoolMemoryLimit: 16 << 20, DrainTimeout: 5 * time.Minute, LeaseTTL: 20 * time.Second, LogLevel: "info", LogFormat: "text",
		S3Region: "us-east-1", APIAuth: "keys",
		ChunkSize: 8 << 20, ChunkUploadConcurrency: 3, ChunkBuffers: 3, ChunkReadAhead: 2, UploadSessionTTL: 24 * time.Hour,
		ShutdownTimeout: 3 * time.Second,
	}, c)
	require.Equal(t, ":8080", c.Addr())
}

func TestConfigReadsEveryVariable(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(map[string]string{
		"SERVER_HOST": "127.0.0.1", "SERVER_PORT": "9090", "DATA_DIRECTORY": "/var/dfs",
		"DATABASE_URL": "postgres://u@db/dfs", "REDIS_URL": "redis://cache:6379/1",
		"REPLICATION_FACTOR": "2", "VIRTUAL_NODES": "50", "MAX_FILE_SIZE": "1GiB",
		"HEALTH_CHECK_INTERVAL": "3s", "HEALTH_PROBE_TIMEOUT": "500ms",
		"HEALTH_FAILURE_THRESHOLD": "4", "HEALTH_SUCCESS_THRESHOLD": "5",
		"REBALANCE_ON_MEMBERSHIP_CHANGE": "false", "REPAIR_INTERVAL": "30s",
		"VERIFY_CHECKSUM_ON_DOWNLOAD": "false", "DOWNLOAD_BUFFER_SIZE": "64KB",
		"CACHE_ENABLED": "false", "CACHE_METADATA_TTL": "10s", "PENDING_UPLOAD_TIMEOUT": "1m",
		"PENDING_RECORD_DELAY": "250ms", "ANTI_ENTROPY_INTERVAL": "5m", "ANTI_ENTROPY_RATE": "300", "ANTI_ENTROPY_ORPHAN_GRACE": "2m",
		"REPLICA_WRITE_CONCURRENCY": "8", "SPOOL_MEMORY_MAX": "64KiB", "LOCAL_CACHE_ENTRIES": "5", "SQLITE_CHECKPOINT_PAGES": "500", "CONTENT_CACHE_MAX_FILE": "32KiB", "NODE_STALL_TIMEOUT": "7s", "SIGNED_URL_TTL": "90s", "NODE_BATCH_MAX": "16", "NODE_BATCH_INFLIGHT": "2", "REBALANCE_PARALLELISM": "4", "SPOOL_MEMORY_LIMIT": "1MiB", "DRAIN_TIMEOUT": "1m", "LEASE_TTL": "5s", "CLUSTER_TOKEN": "t",
		"LOG_LEVEL": "debug", "LOG_FORMAT": "json", "PPROF_ADDR": "127.0.0.1:6060",
		"S3_PORT": "9000", "S3_DOMAIN": "s3.example.com", "S3_REGION": "eu-west-3",
		"ROOT_ACCESS_KEY": "root-key", "ROOT_SECRET_KEY": "root-secret", "API_AUTH": "open",
		"CHUNK_SIZE": "16MiB", "CHUNK_UPLOAD_CONCURRENCY": "5", "CHUNK_BUFFERS": "9", "CHUNK_READAHEAD": "4", "UPLOAD_SESSION_TTL": "2h",
		"SHUTDOWN_TIMEOUT": "20s",
	}))
	require.NoError(t, err)
	require.Equal(t, Config{
		Host: "127.0.0.1", Port: 9090, DataDir: "/var/dfs", DatabaseURL: "postgres://u@db/dfs",
		RedisURL: "redis://cache:6379/1", ReplicationFactor: 2, VirtualNodes: 50, MaxFileSize: 1 << 30,
		HealthCheckInterval: 3 * time.Second, HealthProbeTimeout: 500 * time.Millisecond,
		HealthFailureThreshold: 4, HealthSuccessThreshold: 5, RebalanceOnMembershipChange: false,
		RepairInterval: 30 * time.Second, VerifyChecksumOnDownload: false, DownloadBufferSize: 64 << 10,
		CacheEnabled: false, CacheMetadataTTL: 10 * time.Second, PendingUploadTimeout: time.Minute, PendingRecordDelay: 250 * time.Millisecond,
		AntiEntropyInterval: 5 * time.Minute, AntiEntropyRate: 300, AntiEntropyOrphanGrace: 2 * time.Minute,
		ReplicaWriteConcurrency: 8, LocalCacheEntries: 5, SQLiteCheckpointPages: 500, ContentCacheMaxFile: 32 << 10, NodeStallTimeout: 7 * time.Second, SignedURLTTL: 90 * time.Second, NodeBatchMax: 16, NodeBatchInflight: 2, RebalanceParallelism: 4, SpoolMemoryMax: 64 << 10, SpoolMemoryLimit: 1 << 20, DrainTimeout: time.Minute, LeaseTTL: 5 * time.Second, ClusterToken: "t", LogLevel: "debug", LogFormat: "json",
		PprofAddr: "127.0.0.1:6060", ChunkSize: 16 << 20, ChunkUploadConcurrency: 5, ChunkBuffers: 9, ChunkReadAhead: 4, UploadSessionTTL: 2 * time.Hour,
		ShutdownTimeout: 20 * time.Second,
		S3Port:          9000, S3Domain: "s3.example.com", S3Region: "eu-west-3", RootAccessKey: "root-key", RootSecretKey: "root-secret", APIAuth: "open",
	}, c)
	require.Equal(t, "127.0.0.1:9090", c.Addr())
}

func TestConfigProbeTimeoutFollowsAShortInterval(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(map[string]string{"HEALTH_CHECK_INTERVAL": "1s"}))
	require.NoError(t, err)
	require.Equal(t, 500*time.Millisecond, c.HealthProbeTimeout)
}

func TestConfigNamesEveryBadVariable(t *testing.T) {
	bad := map[string]string{
		"SERVER_PORT": "0", "REPLICATION_FACTOR": "0", "VIRTUAL_NODES": "many", "MAX_FILE_SIZE": "0",
		"HEALTH_CHECK_INTERVAL": "10", "HEALTH_FAILURE_THRESHOLD": "-1", "HEALTH_SUCCESS_THRESHOLD": "x",
		"REBALANCE_ON_MEMBERSHIP_CHANGE": "perhaps", "REPAIR_INTERVAL": "-1m", "VERIFY_CHECKSUM_ON_DOWNLOAD": "2",
		"DOWNLOAD_BUFFER_SIZE": "1GB", "CACHE_ENABLED": "nope", "CACHE_METADATA_TTL": "forever",
		"PENDING_UPLOAD_TIMEOUT": "0s", "REPLICA_WRITE_CONCURRENCY": "0", "DRAIN_TIMEOUT": "soon",
		"DATABASE_URL": "mysql://x", "REDIS_URL": "http://x", "LOG_LEVEL": "loud", "LOG_FORMAT": "xml",
		"HEALTH_PROBE_TIMEOUT": "0", "LEASE_TTL": "x", "PPROF_ADDR": "6060",
		"SPOOL_MEMORY_MAX": "2MiB", "SPOOL_MEMORY_LIMIT": "1MiB", "LOCAL_CACHE_ENTRIES": "-1", "SQLITE_CHECKPOINT_PAGES": "99", "REBALANCE_PARALLELISM": "0",
		"CONTENT_CACHE_SIZE": "-1", "CONTENT_CACHE_MAX_FILE": "lots", "NODE_STALL_TIMEOUT": "0s", "SIGNED_URL_TTL": "48h", "NODE_BATCH_MAX": "257", "NODE_BATCH_INFLIGHT": "0",
		"ANTI_ENTROPY_INTERVAL": "0s", "ANTI_ENTROPY_RATE": "0", "ANTI_ENTROPY_ORPHAN_GRACE": "never",
		"CHUNK_SIZE": "512KiB", "CHUNK_UPLOAD_CONCURRENCY": "0", "CHUNK_BUFFERS": "0", "CHUNK_READAHEAD": "0", "UPLOAD_SESSION_TTL": "500ms",
		"SHUTDOWN_TIMEOUT": "0s", "PENDING_RECORD_DELAY": "-1s",
	}
	_, err := LoadConfig(envconf.FromMap(bad))
	require.Error(t, err)
	for name := range bad {
		require.Contains(t, err.Error(), name, "the error names %s", name)
	}
}

func TestConfigChunkSizeBounds(t *testing.T) {
	for _, v := range []string{"1MiB", "64MiB"} {
		_, err := LoadConfig(envconf.FromMap(map[string]string{"CHUNK_SIZE": v}))
		require.NoError(t, err, v)
	}
	_, err := LoadConfig(envconf.FromMap(map[string]string{"CHUNK_SIZE": "65MiB"}))
	require.ErrorContains(t, err, "CHUNK_SIZE")
}

func TestConfigOrphanGraceCoversPendingUploads(t *testing.T) {
	_, err := LoadConfig(envconf.FromMap(map[string]string{"PENDING_UPLOAD_TIMEOUT": "20m", "ANTI_ENTROPY_ORPHAN_GRACE": "10m"}))
	require.ErrorContains(t, err, "ANTI_ENTROPY_ORPHAN_GRACE")
	require.ErrorContains(t, err, "PENDING_UPLOAD_TIMEOUT")
}

func TestConfigPendingRecordDelayIsBelowTheTimeout(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(map[string]string{"PENDING_UPLOAD_TIMEOUT": "1s"}))
	require.NoError(t, err)
	require.Equal(t, 500*time.Millisecond, c.PendingRecordDelay, "the default follows a short timeout")
	_, err = LoadConfig(envconf.FromMap(map[string]string{"PENDING_UPLOAD_TIMEOUT": "2s", "PENDING_RECORD_DELAY": "2s"}))
	require.ErrorContains(t, err, "PENDING_RECORD_DELAY")
	c, err = LoadConfig(envconf.FromMap(map[string]string{"PENDING_RECORD_DELAY": "0s"}))
	require.NoError(t, err)
	require.Zero(t, c.PendingRecordDelay)
}

func TestConfigContentCache(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(map[string]string{"CONTENT_CACHE_SIZE": "8MiB", "CONTENT_CACHE_MAX_FILE": "16KiB"}))
	require.NoError(t, err)
	require.Equal(t, int64(8<<20), c.ContentCacheSize)
	require.Equal(t, int64(16<<10), c.ContentCacheMaxFile)
	for name, env := range map[string]map[string]string{
		"CONTENT_CACHE_MAX_FILE":      {"CONTENT_CACHE_SIZE": "8MiB", "CONTENT_CACHE_MAX_FILE": "2MiB", "DOWNLOAD_BUFFER_SIZE": "1MiB"},
		"VERIFY_CHECKSUM_ON_DOWNLOAD": {"CONTENT_CACHE_SIZE": "8MiB", "VERIFY_CHECKSUM_ON_DOWNLOAD": "false"},
	} {
		_, err := LoadConfig(envconf.FromMap(env))
		require.Error(t, err, name)
		require.Contains(t, err.Error(), name)
	}
}

func TestConfigDoesNotEchoTheDatabasePassword(t *testing.T) {
	_, err := LoadConfig(envconf.FromMap(map[string]string{"DATABASE_URL": "mysql://user:hunter2@db/x"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
}

func TestConfigRedisClusterAddrs(t *testing.T) {
	c, err := LoadConfig(envconf.FromMap(map[string]string{"REDIS_CLUSTER_ADDRS": "10.0.0.1:7000, redis-b:7001,[::1]:7002,"}))
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1:7000", "redis-b:7001", "[::1]:7002"}, c.RedisClusterAddrs)
	require.Empty(t, c.RedisURL)

	for value, want := range map[string]string{
		"redis-a":                   `"redis-a" is not host:port`,
		"redis-a:0":                 `"redis-a:0": the port must be a number from 1 to 65535`,
		"redis-a:7000,:7001":        `":7001" is not host:port`,
		"redis-a:x":                 `"redis-a:x": the port must be a number`,
		"redis-a:7000,redis-a:7000": `"redis-a:7000" is listed twice`,
		" , ":                       "REDIS_CLUSTER_ADDRS: no address",
		"redis://redis-a:7000":      `"redis://redis-a:7000" is not host:port`,
	} {
		_, err := LoadConfig(envconf.FromMap(map[string]string{"REDIS_CLUSTER_ADDRS": value}))
		require.ErrorContains(t, err, "REDIS_CLUSTER_ADDRS", value)
		require.ErrorContains(t, err, want, value)
	}

	_, err = LoadConfig(envconf.FromMap(map[string]string{"REDIS_CLUSTER_ADDRS": "redis-a:7000", "REDIS_URL": "redis://cache:6379/0"}))
	require.ErrorContains(t, err, "REDIS_CLUSTER_ADDRS and REDIS_URL: set one of them, not both")
}
