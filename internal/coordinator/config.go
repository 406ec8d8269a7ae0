package coordinator

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/antientropy"
	"github.com/dfs-project/dfs/internal/debugserver"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/files"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
	"github.com/dfs-project/dfs/internal/nodeclient"
	"github.com/dfs-project/dfs/internal/rebalance"
	"github.com/dfs-project/dfs/internal/redisx"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// Config is every setting of the coordinator. LoadConfig documents the
// environment variable and the default of each field.
type Config struct {
	Host                        string        // SERVER_HOST: bind address ("" = all interfaces)
	Port                        int           // SERVER_PORT
	DataDir                     string        // DATA_DIRECTORY: embedded metadata store and upload spool
	DatabaseURL                 string        // DATABASE_URL: PostgreSQL; empty = embedded store
	RedisURL                    string        // REDIS_URL: empty = no Redis
	RedisClusterAddrs           []string      // REDIS_CLUSTER_ADDRS: nodes of a Redis Cluster (host:port, comma-separated), instead of REDIS_URL
	ReplicationFactor           int           // REPLICATION_FACTOR
	VirtualNodes                int           // VIRTUAL_NODES
	MaxFileSize                 int64         // MAX_FILE_SIZE
	HealthCheckInterval         time.Duration // HEALTH_CHECK_INTERVAL
	HealthProbeTimeout          time.Duration // HEALTH_PROBE_TIMEOUT
	HealthFailureThreshold      int           // HEALTH_FAILURE_THRESHOLD
	HealthSuccessThreshold      int           // HEALTH_SUCCESS_THRESHOLD
	RebalanceOnMembershipChange bool          // REBALANCE_ON_MEMBERSHIP_CHANGE
	RepairInterval              time.Duration // REPAIR_INTERVAL
	VerifyChecksumOnDownload    bool          // VERIFY_CHECKSUM_ON_DOWNLOAD
	DownloadBufferSize          int64         // DOWNLOAD_BUFFER_SIZE: files up to this size are verified before the first byte is sent
	CacheEnabled                bool          // CACHE_ENABLED
	CacheMetadataTTL            time.Duration // CACHE_METADATA_TTL
	PendingUploadTimeout        time.Duration // PENDING_UPLOAD_TIMEOUT
	PendingRecordDelay          time.Duration // PENDING_RECORD_DELAY: a small upload still writing copies after this long records its PENDING row (0: every upload before its first copy)
	AntiEntropyInterval         time.Duration // ANTI_ENTROPY_INTERVAL: every file is checked against the ring and the nodes within this period
	AntiEntropyRate             int           // ANTI_ENTROPY_RATE: files the sweep checks per second at most
	AntiEntropyOrphanGrace      time.Duration // ANTI_ENTROPY_ORPHAN_GRACE: how long a blob no metadata lists is left before it is removed
	ReplicaWriteConcurrency     int           // REPLICA_WRITE_CONCURRENCY: bound on parallel copy writes across all uploads
	LocalCacheEntries           int           // LOCAL_CACHE_ENTRIES: file records kept in memory (embedded store only)
	SQLiteCheckpointPages       int           // SQLITE_CHECKPOINT_PAGES: WAL pages the embedded store holds before a checkpoint
	NodeStallTimeout            time.Duration // NODE_STALL_TIMEOUT: a node transfer that makes no progress this long fails
	SignedURLTTL                time.Duration // SIGNED_URL_TTL: how long the node URLs of /api/files/{id}/locations read
	NodeBatchMax                int           // NODE_BATCH_MAX: small copies (up to 32 KiB) one write request to a node carries (1: one each)
	NodeBatchInflight           int           // NODE_BATCH_INFLIGHT: batched write requests running to one node at once
	ContentCacheSize            int64         // CONTENT_CACHE_SIZE: memory for verified bytes of small files (0: off)
	ContentCacheMaxFile         int64         // CONTENT_CACHE_MAX_FILE: the largest file the content cache keeps
	RebalanceParallelism        int           // REBALANCE_PARALLELISM: files one rebalance run reconciles at once
	RebalanceBandwidth          int64         // REBALANCE_BANDWIDTH: bytes/s of all rebalance, drain and repair copies together (0: unlimited)
	SpoolMemoryMax              int64         // SPOOL_MEMORY_MAX: largest upload held in memory rather than a spool file
	SpoolMemoryLimit            int64         // SPOOL_MEMORY_LIMIT: memory all in-memory uploads may hold at once
	DrainTimeout                time.Duration // DRAIN_TIMEOUT: how long DELETE /api/nodes/{id}?wait=true waits
	LeaseTTL                    time.Duration // LEASE_TTL: life of a background-work lease between renewals
	ClusterToken                string        // CLUSTER_TOKEN: empty = no internal auth
	LogLevel                    string        // LOG_LEVEL
	LogFormat                   string        // LOG_FORMAT
	PprofAddr                   string        // PPROF_ADDR
	S3Port                      int           // S3_PORT: the S3 listener's port; 0 = no S3 listener
	S3Domain                    string        // S3_DOMAIN: enables virtual-hosted addressing (BUCKET.S3_DOMAIN)
	S3Region                    string        // S3_REGION: the region requests are signed for
	RootAccessKey               string        // ROOT_ACCESS_KEY: the admin key; empty = no authentication
	RootSecretKey               string        // ROOT_SECRET_KEY
	APIAuth                     string        // API_AUTH: "keys" (REST needs a key once a root key is set) or "open"
	ChunkSize                   int64         // CHUNK_SIZE: files larger than this are stored as chunks of it
	ChunkUploadConcurrency      int           // CHUNK_UPLOAD_CONCURRENCY: chunks of one upload written to nodes at once
	ChunkBuffers                int           // CHUNK_BUFFERS: CHUNK_SIZE buffers all uploads and parts share
	ChunkReadAhead              int           // CHUNK_READAHEAD: chunks of a download fetched at once beyond the one being sent
	UploadSessionTTL            time.Duration // UPLOAD_SESSION_TTL: an upload session not completed or aborted by then is removed
	ShutdownTimeout             time.Duration // SHUTDOWN_TIMEOUT: how long requests in flight at SIGTERM may run on before they are cut off
}

// DefaultShutdownTimeout leaves room, within the 5 s a local cluster's tests
// give a process between SIGTERM and SIGKILL, for the background loops and
// the store to close after the requests' grace.
const DefaultShutdownTimeout = 3 * time.Second

// Addr is the listen address.
func (c Config) Addr() string { return fmt.Sprintf("%s:%d", c.Host, c.Port) }

// LoadConfig reads the configuration from l, reporting every bad value at once.
func LoadConfig(l *envconf.Loader) (Config, error) {
	c := Config{
		Host:                        l.String("SERVER_HOST", ""),
		Port:                        l.Port("SERVER_PORT", 8080),
		DataDir:                     l.String("DATA_DIRECTORY", "./data/coordinator"),
		DatabaseURL:                 l.String("DATABASE_URL", ""),
		RedisURL:                    l.String("REDIS_URL", ""),
		ReplicationFactor:           l.Int("REPLICATION_FACTOR", 3, 1, 16),
		VirtualNodes:                l.Int("VIRTUAL_NODES", 100, 1, 10000),
		MaxFileSize:                 l.Size("MAX_FILE_SIZE", 512<<20),
		HealthCheckInterval:         l.Duration("HEALTH_CHECK_INTERVAL", 10*time.Second),
		HealthFailureThreshold:      l.Int("HEALTH_FAILURE_THRESHOLD", 2, 1, 1000),
		HealthSuccessThreshold:      l.Int("HEALTH_SUCCESS_THRESHOLD", 2, 1, 1000),
		RebalanceOnMembershipChange: l.Bool("REBALANCE_ON_MEMBERSHIP_CHANGE", true),
		RepairInterval:              l.Duration("REPAIR_INTERVAL", 60*time.Second),
		VerifyChecksumOnDownload:    l.Bool("VERIFY_CHECKSUM_ON_DOWNLOAD", true),
		DownloadBufferSize:          l.Size("DOWNLOAD_BUFFER_SIZE", 1<<20),
		CacheEnabled:                l.Bool("CACHE_ENABLED", true),
		CacheMetadataTTL:            l.Duration("CACHE_METADATA_TTL", 2*time.Minute),
		PendingUploadTimeout:        l.Duration("PENDING_UPLOAD_TIMEOUT", 15*time.Minute),
		AntiEntropyInterval:         l.Duration("ANTI_ENTROPY_INTERVAL", antientropy.DefaultInterval),
		AntiEntropyRate:             l.Int("ANTI_ENTROPY_RATE", antientropy.DefaultRate, 1, 1_000_000),
		AntiEntropyOrphanGrace:      l.Duration("ANTI_ENTROPY_ORPHAN_GRACE", antientropy.DefaultOrphanGrace),
		ReplicaWriteConcurrency:     l.Int("REPLICA_WRITE_CONCURRENCY", 64, 1, 4096),
		LocalCacheEntries:           l.Int("LOCAL_CACHE_ENTRIES", 25000, 0, 10_000_000),
		SQLiteCheckpointPages:       l.Int("SQLITE_CHECKPOINT_PAGES", sqlite.DefaultCheckpointPages, sqlite.MinCheckpointPages, sqlite.MaxCheckpointPages),
		NodeStallTimeout:            l.Duration("NODE_STALL_TIMEOUT", nodeclient.DefaultStallTimeout),
		SignedURLTTL:                l.Duration("SIGNED_URL_TTL", files.DefaultSignedURLTTL),
		NodeBatchMax:                l.Int("NODE_BATCH_MAX", nodeclient.DefaultBatchMax, 1, wire.MaxBatchItems),
		NodeBatchInflight:           l.Int("NODE_BATCH_INFLIGHT", nodeclient.DefaultBatchInflight, 1, 64),
		ContentCacheSize:            l.Size("CONTENT_CACHE_SIZE", 0),
		ContentCacheMaxFile:         l.Size("CONTENT_CACHE_MAX_FILE", 64<<10),
		RebalanceParallelism:        l.Int("REBALANCE_PARALLELISM", rebalance.DefaultParallelism, 1, 1024),
		RebalanceBandwidth:          l.Size("REBALANCE_BANDWIDTH", 0),
		SpoolMemoryMax:              l.Size("SPOOL_MEMORY_MAX", 256<<10),
		SpoolMemoryLimit:            l.Size("SPOOL_MEMORY_LIMIT", 16<<20),
		DrainTimeout:                l.Duration("DRAIN_TIMEOUT", 5*time.Minute),
		LeaseTTL:                    l.Duration("LEASE_TTL", 20*time.Second),
		ClusterToken:                l.String("CLUSTER_TOKEN", ""),
		LogLevel:                    l.OneOf("LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		LogFormat:                   l.OneOf("LOG_FORMAT", "text", "text", "json"),
		PprofAddr:                   l.String("PPROF_ADDR", ""),
		S3Port:                      l.Int("S3_PORT", 0, 0, 65535),
		S3Domain:                    l.String("S3_DOMAIN", ""),
		S3Region:                    l.String("S3_REGION", "us-east-1"),
		RootAccessKey:               l.String("ROOT_ACCESS_KEY", ""),
		RootSecretKey:               l.String("ROOT_SECRET_KEY", ""),
		APIAuth:                     l.OneOf("API_AUTH", "keys", "keys", "open"),
		ChunkSize:                   l.Size("CHUNK_SIZE", 8<<20),
		ChunkUploadConcurrency:      l.Int("CHUNK_UPLOAD_CONCURRENCY", 3, 1, 64),
		ChunkBuffers:                l.Int("CHUNK_BUFFERS", 3, 1, 1024),
		ChunkReadAhead:              l.Int("CHUNK_READAHEAD", 2, 1, 64),
		UploadSessionTTL:            l.Duration("UPLOAD_SESSION_TTL", 24*time.Hour),
		ShutdownTimeout:             l.Duration("SHUTDOWN_TIMEOUT", DefaultShutdownTimeout),
	}
	// The probe timeout defaults to a fraction of the interval so a sweep ends
	// before the next one starts.
	c.HealthProbeTimeout = l.Duration("HEALTH_PROBE_TIMEOUT", min(2*time.Second, c.HealthCheckInterval/2))
	// Likewise the record delay defaults below a short PENDING_UPLOAD_TIMEOUT.
	c.PendingRecordDelay = l.DurationOrZero("PENDING_RECORD_DELAY", min(time.Second, c.PendingUploadTimeout/2))
	var problems []error
	if err := l.Err(); err != nil {
		problems = append(problems, err)
	}
	if c.MaxFileSize <= 0 {
		problems = append(problems, fmt.Errorf("MAX_FILE_SIZE=%d: must be positive", c.MaxFileSize))
	}
	if c.ChunkSize < 1<<20 || c.ChunkSize > 64<<20 {
		problems = append(problems, fmt.Errorf("CHUNK_SIZE=%d: must be between 1MiB and 64MiB", c.ChunkSize))
	}
	if c.SignedURLTTL < time.Second || c.SignedURLTTL > 24*time.Hour {
		problems = append(problems, fmt.Errorf("SIGNED_URL_TTL=%s: must be between 1s and 24h", c.SignedURLTTL))
	}
	if c.UploadSessionTTL < time.Second {
		problems = append(problems, fmt.Errorf("UPLOAD_SESSION_TTL=%s: at least 1s", c.UploadSessionTTL))
	}
	if c.DownloadBufferSize > 64<<20 {
		problems = append(problems, fmt.Errorf("DOWNLOAD_BUFFER_SIZE=%d: at most 64MiB (it is held in memory per download)", c.DownloadBufferSize))
	}
	if c.ContentCacheSize < 0 {
		problems = append(problems, fmt.Errorf("CONTENT_CACHE_SIZE=%d: must not be negative (0 turns the cache off)", c.ContentCacheSize))
	}
	if c.ContentCacheSize > 0 && (c.ContentCacheMaxFile <= 0 || c.ContentCacheMaxFile > c.DownloadBufferSize) {
		problems = append(problems, fmt.Errorf("CONTENT_CACHE_MAX_FILE=%d: must be positive and at most DOWNLOAD_BUFFER_SIZE (%d): only files verified whole before they are sent are cached",
			c.ContentCacheMaxFile, c.DownloadBufferSize))
	}
	if c.ContentCacheSize > 0 && !c.VerifyChecksumOnDownload {
		problems = append(problems, fmt.Errorf("CONTENT_CACHE_SIZE=%d needs VERIFY_CHECKSUM_ON_DOWNLOAD=true: only verified bytes are cached", c.ContentCacheSize))
	}
	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			problems = append(problems, fmt.Errorf("DATABASE_URL: must be a postgres:// or postgresql:// URL"))
		}
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			problems = append(problems, fmt.Errorf("REDIS_URL: must be a redis:// or rediss:// URL"))
		}
	}
	if s := l.String("REDIS_CLUSTER_ADDRS", ""); s != "" {
		addrs, err := redisx.ParseClusterAddrs(s)
		switch {
		case err != nil:
			problems = append(problems, fmt.Errorf("%v (a comma-separated list of host:port)", err))
		case c.RedisURL != "":
			problems = append(problems, errors.New("REDIS_CLUSTER_ADDRS and REDIS_URL: set one of them, not both (REDIS_URL names one Redis server, REDIS_CLUSTER_ADDRS the nodes of a Redis Cluster)"))
		default:
			c.RedisClusterAddrs = addrs
		}
	}
	if c.SpoolMemoryMax > 64<<20 {
		problems = append(problems, fmt.Errorf("SPOOL_MEMORY_MAX=%d: at most 64MiB (larger uploads belong in the spool directory)", c.SpoolMemoryMax))
	}
	if c.SpoolMemoryMax > c.SpoolMemoryLimit {
		problems = append(problems, fmt.Errorf("SPOOL_MEMORY_MAX=%d: larger than SPOOL_MEMORY_LIMIT=%d, so no upload could be held in memory", c.SpoolMemoryMax, c.SpoolMemoryLimit))
	}
	if c.ShutdownTimeout <= 0 {
		problems = append(problems, fmt.Errorf("SHUTDOWN_TIMEOUT=%s: must be positive", c.ShutdownTimeout))
	}
	if c.AntiEntropyInterval <= 0 {
		problems = append(problems, fmt.Errorf("ANTI_ENTROPY_INTERVAL=%s: must be positive", c.AntiEntropyInterval))
	}
	// An upload's copies wait up to the delay for their PENDING row: below
	// PENDING_UPLOAD_TIMEOUT, which the orphan grace must reach (below), the
	// sweep never removes a copy whose row is still to come.
	if c.PendingRecordDelay >= c.PendingUploadTimeout {
		problems = append(problems, fmt.Errorf("PENDING_RECORD_DELAY=%s: must be less than PENDING_UPLOAD_TIMEOUT (%s)",
			c.PendingRecordDelay, c.PendingUploadTimeout))
	}
	// An upload's copies land before its rows say where they are, and a
	// PENDING row lives up to PENDING_UPLOAD_TIMEOUT: a grace shorter than
	// that could remove a copy an upload is about to record.
	if c.AntiEntropyOrphanGrace < c.PendingUploadTimeout {
		problems = append(problems, fmt.Errorf("ANTI_ENTROPY_ORPHAN_GRACE=%s: must be at least PENDING_UPLOAD_TIMEOUT (%s), the longest an upload's copies can wait for their rows",
			c.AntiEntropyOrphanGrace, c.PendingUploadTimeout))
	}
	if err := debugserver.ValidateAddr(c.PprofAddr); err != nil {
		problems = append(problems, fmt.Errorf("PPROF_ADDR=%q: %v", c.PprofAddr, err))
	}
	problems = append(problems, c.checkS3()...)
	if strings.TrimSpace(c.DataDir) == "" {
		problems = append(problems, errors.New("DATA_DIRECTORY: must not be empty"))
	}
	return c, errors.Join(problems...)
}
