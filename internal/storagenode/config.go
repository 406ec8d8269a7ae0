package storagenode

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/debugserver"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/scrub"
)

// Config is everything a storage node is told at start. LoadConfig reads it
// from the environment; the defaults are the ones documented on each field.
type Config struct {
	// BindHost is the address the HTTP server listens on (SERVER_HOST; default
	// "", every interface).
	BindHost string
	// Port is the HTTP port (SERVER_PORT; default 9001). 0 picks a free port.
	Port int
	// NodeID names the node in the cluster (STORAGE_NODE_ID; default "node-1").
	NodeID string
	// DataDir holds the blobs (STORAGE_DATA_DIRECTORY; default data/<node id>,
	// relative to the working directory).
	DataDir string
	// AdvertisedHost and AdvertisedPort are where the coordinator reaches the
	// node (STORAGE_ADVERTISED_HOST, default "localhost";
	// STORAGE_ADVERTISED_PORT, default the HTTP port).
	AdvertisedHost string
	AdvertisedPort int
	// CoordinatorURL is the coordinator's base URL the node registers with
	// (COORDINATOR_URL; default "", no registration).
	CoordinatorURL string
	// RegistrationInterval is how often the node re-announces itself
	// (REGISTRATION_INTERVAL; default 15s).
	RegistrationInterval time.Duration
	// ClusterToken, when set, is the bearer token every /internal call must
	// carry and that registration sends (CLUSTER_TOKEN; default unset).
	ClusterToken string
	// Zone is the node's failure domain: a rack, a room, an availability
	// zone (STORAGE_ZONE; default "", none: the node is a zone of its own).
	// The coordinator keeps the copies of a file in distinct zones where the
	// ring has enough of them.
	Zone string
	// Weight is the node's size relative to the others (STORAGE_WEIGHT; a
	// decimal > 0, default 1): a node of weight 2 holds about twice the
	// share. WeightAuto (STORAGE_WEIGHT=auto) works it out at start from
	// the data directory's capacity (see AutoWeight).
	Weight     float64
	WeightAuto bool
	// CapacityBytes bounds the bytes of blobs stored; writes beyond it answer
	// 507 as if the disk were full (STORAGE_CAPACITY_BYTES; default 0,
	// unlimited).
	CapacityBytes int64
	// SyncMode is how each write is put on stable storage before it is
	// acknowledged (STORAGE_SYNC_MODE): batch shares whole-file-system syncs
	// among concurrent writes, file fsyncs each file and directory. Default
	// batch on Linux 5.8 and later, file elsewhere; batch is refused where
	// the kernel cannot report write-back errors to it.
	SyncMode blob.SyncMode
	// SyncBatchMax is, in batch mode, the largest copy that shares the
	// syncs; larger copies fsync their own files (STORAGE_SYNC_BATCH_MAX,
	// default 1MiB).
	SyncBatchMax int64
	// Layout is how the data directory keeps blobs (STORAGE_LAYOUT): files,
	// one file and a checksum sidecar per blob, or volumes, small blobs
	// appended to volume files with group commit. A directory keeps the
	// layout it was created with: another one named over it stops the node
	// at start. Unset ("") is the default: the layout of the directory
	// (blob.DirectoryLayout; files for one from before layouts were
	// recorded), volumes for a new directory.
	Layout blob.Layout
	// VolumeSize is, in the volumes layout, the length at which a volume is
	// sealed and a new one started (STORAGE_VOLUME_SIZE; default 1GiB).
	VolumeSize int64
	// InlineMax is, in the volumes layout, the largest blob appended to a
	// volume; larger ones are kept as in the files layout
	// (STORAGE_INLINE_MAX; default 1MiB).
	InlineMax int64
	// CompactThreshold is, in the volumes layout, the share of a sealed
	// volume that garbage (removed or superseded blobs) must pass for the
	// volume to be compacted in the background (STORAGE_COMPACT_THRESHOLD,
	// a percentage such as 30% or a fraction such as 0.3; default 30%).
	CompactThreshold float64
	// ScrubPeriod is the time within which the scrubber re-hashes every blob
	// once, its pass spread over the period (SCRUB_PERIOD; default 168h, at
	// least 1s).
	ScrubPeriod time.Duration
	// ScrubBandwidth caps the bytes per second the scrubber reads
	// (SCRUB_BANDWIDTH, size syntax; default 32MiB, at least 4KiB).
	ScrubBandwidth int64
	// LogLevel and LogFormat configure the logger main builds (LOG_LEVEL,
	// default info; LOG_FORMAT, default text).
	LogLevel  string
	LogFormat string
	// PprofAddr, when set, is a separate listener serving Go's profiles at
	// /debug/pprof/ (PPROF_ADDR).
	PprofAddr string
	// ShutdownTimeout bounds how long a stopping node waits for requests in
	// flight (not configurable from the environment; default 10s).
	ShutdownTimeout time.Duration
}

// Defaults.
const (
	DefaultPort                 = 9001
	DefaultNodeID               = "node-1"
	DefaultAdvertisedHost       = "localhost"
	DefaultRegistrationInterval = 15 * time.Second
	DefaultShutdownTimeout      = 10 * time.Second
	// minVolumeFactor is how many of the largest inline blobs a volume must
	// hold at least, so that volumes are not rolled for every few writes.
	minVolumeFactor = 4
)

var (
	nodeIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)
)

// LoadConfig reads the node's configuration from l. Every bad value is
// reported, each naming its variable.
func LoadConfig(l *envconf.Loader) (Config, error) {
	var c Config
	c.BindHost = l.String("SERVER_HOST", "")
	c.Port = l.Port("SERVER_PORT", DefaultPort)
	c.NodeID = l.String("STORAGE_NODE_ID", DefaultNodeID)
	c.DataDir = l.String("STORAGE_DATA_DIRECTORY", filepath.Join("data", c.NodeID))
	c.AdvertisedHost = l.String("STORAGE_ADVERTISED_HOST", DefaultAdvertisedHost)
	c.AdvertisedPort = l.Port("STORAGE_ADVERTISED_PORT", c.Port)
	c.CoordinatorURL = l.String("COORDINATOR_URL", "")
	c.RegistrationInterval = l.Duration("REGISTRATION_INTERVAL", DefaultRegistrationInterval)
	c.ClusterToken = l.String("CLUSTER_TOKEN", "")
	c.CapacityBytes = l.Size("STORAGE_CAPACITY_BYTES", 0)
	c.Zone = l.String("STORAGE_ZONE", "")
	c.Weight = 1
	var weightErr error
	if w := strings.TrimSpace(l.String("STORAGE_WEIGHT", "1")); strings.EqualFold(w, "auto") {
		c.WeightAuto = true
	} else if f, err := strconv.ParseFloat(w, 64); err == nil {
		c.Weight = f
	} else {
		weightErr = fmt.Errorf("STORAGE_WEIGHT=%q: not a decimal such as 1 or 2.5, nor auto", w)
	}
	c.SyncMode = blob.SyncMode(l.OneOf("STORAGE_SYNC_MODE", string(blob.DefaultSyncMode()), string(blob.SyncBatch), string(blob.SyncFile)))
	c.SyncBatchMax = l.Size("STORAGE_SYNC_BATCH_MAX", blob.DefaultBatchSyncMax)
	c.Layout = blob.Layout(l.OneOf("STORAGE_LAYOUT", "", string(blob.LayoutFiles), string(blob.LayoutVolumes)))
	c.VolumeSize = l.Size("STORAGE_VOLUME_SIZE", blob.DefaultVolumeSize)
	c.InlineMax = l.Size("STORAGE_INLINE_MAX", blob.DefaultInlineMax)
	threshold, thresholdErr := parseShare(l.String("STORAGE_COMPACT_THRESHOLD", "30%"))
	c.CompactThreshold = threshold
	c.ScrubPeriod = l.Duration("SCRUB_PERIOD", scrub.DefaultPeriod)
	c.ScrubBandwidth = l.Size("SCRUB_BANDWIDTH", scrub.DefaultBandwidth)
	c.LogLevel = l.OneOf("LOG_LEVEL", "info", "debug", "info", "warn", "warning", "error")
	c.LogFormat = l.OneOf("LOG_FORMAT", "text", "text", "json")
	c.PprofAddr = l.String("PPROF_ADDR", "")
	c.ShutdownTimeout = DefaultShutdownTimeout
	return c, errors.Join(l.Err(), thresholdErr, weightErr, c.Validate())
}

// MaxWeight is the largest STORAGE_WEIGHT the coordinator accepts.
const MaxWeight = 1000

// AutoWeightFloor is the least weight STORAGE_WEIGHT=auto gives, so a small
// test disk still takes a share.
const AutoWeightFloor = 0.1

// AutoWeight is the weight STORAGE_WEIGHT=auto gives a node that can hold
// capacity bytes: 1 per TiB, rounded to hundredths (so that a device's size
// reading the same each start gives the same weight, and moves no data),
// at least AutoWeightFloor and at most MaxWeight.
func AutoWeight(capacity int64) float64 {
	w := math.Round(float64(capacity)/(1<<40)*100) / 100
	return min(max(w, AutoWeightFloor), MaxWeight)
}

// parseShare reads a share written as a percentage ("30%") or a fraction
// ("0.3").
func parseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct, isPct := strings.CutSuffix(t, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("STORAGE_COMPACT_THRESHOLD=%q: not a percentage such as 30%% or a fraction such as 0.3", s)
	}
	if isPct {
		f /= 100
	}
	return f, nil
}

// Validate checks the values LoadConfig cannot check alone, naming the
// variable each comes from.
func (c Config) Validate() error {
	var problems []error
	bad := func(name, value, why string) {
		problems = append(problems, fmt.Errorf("%s=%q: %s", name, value, why))
	}
	if c.BindHost != "" && !validHost(c.BindHost) {
		bad("SERVER_HOST", c.BindHost, "not a host name or IP address")
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("SERVER_PORT", fmt.Sprint(c.Port), "must be between 0 and 65535")
	}
	if !nodeIDPattern.MatchString(c.NodeID) {
		bad("STORAGE_NODE_ID", c.NodeID, "must be 1 to 63 characters of A-Z, a-z, 0-9, '.', '_' or '-', starting with a letter or digit")
	}
	if c.DataDir == "" {
		bad("STORAGE_DATA_DIRECTORY", c.DataDir, "must not be empty")
	}
	if !validHost(c.AdvertisedHost) {
		bad("STORAGE_ADVERTISED_HOST", c.AdvertisedHost, "not a host name or IP address")
	}
	if c.AdvertisedPort < 1 || c.AdvertisedPort > 65535 {
		bad("STORAGE_ADVERTISED_PORT", fmt.Sprint(c.AdvertisedPort), "must be between 1 and 65535")
	}
	if c.CoordinatorURL != "" {
		u, err := url.Parse(c.CoordinatorURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad("COORDINATOR_URL", c.CoordinatorURL, "must be an http or https URL such as http://coordinator:8080")
		}
	}
	if c.RegistrationInterval <= 0 {
		bad("REGISTRATION_INTERVAL", c.RegistrationInterval.String(), "must be positive")
	}
	if c.CapacityBytes < 0 {
		bad("STORAGE_CAPACITY_BYTES", fmt.Sprint(c.CapacityBytes), "must not be negative")
	}
	if len(c.Zone) > 255 || strings.IndexFunc(c.Zone, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		bad("STORAGE_ZONE", c.Zone, "must be at most 255 bytes without spaces or control characters")
	}
	if !c.WeightAuto && !(c.Weight > 0 && c.Weight <= MaxWeight) {
		bad("STORAGE_WEIGHT", fmt.Sprint(c.Weight), fmt.Sprintf("must be a decimal > 0 and at most %d, or auto", MaxWeight))
	}
	if err := debugserver.ValidateAddr(c.PprofAddr); err != nil {
		bad("PPROF_ADDR", c.PprofAddr, err.Error())
	}
	switch c.SyncMode {
	case blob.SyncFile:
	case blob.SyncBatch:
		if err := blob.BatchSyncSupported(); err != nil {
			bad("STORAGE_SYNC_MODE", string(c.SyncMode), err.Error()+"; use file")
		}
	default:
		bad("STORAGE_SYNC_MODE", string(c.SyncMode), "must be batch or file")
	}
	if c.SyncBatchMax <= 0 {
		bad("STORAGE_SYNC_BATCH_MAX", fmt.Sprint(c.SyncBatchMax), "must be positive (STORAGE_SYNC_MODE=file fsyncs every copy alone)")
	}
	switch c.Layout {
	case "", blob.LayoutFiles, blob.LayoutVolumes:
	default:
		bad("STORAGE_LAYOUT", string(c.Layout), "must be files or volumes")
	}
	if c.InlineMax <= 0 {
		bad("STORAGE_INLINE_MAX", fmt.Sprint(c.InlineMax), "must be positive")
	}
	if c.VolumeSize < minVolumeFactor*c.InlineMax {
		bad("STORAGE_VOLUME_SIZE", fmt.Sprint(c.VolumeSize), fmt.Sprintf("must be at least %d times STORAGE_INLINE_MAX (%d)", minVolumeFactor, c.InlineMax))
	}
	if !(c.CompactThreshold > 0 && c.CompactThreshold < 1) {
		bad("STORAGE_COMPACT_THRESHOLD", fmt.Sprint(c.CompactThreshold), "must be above 0% and below 100%")
	}
	if c.ScrubPeriod < scrub.MinPeriod {
		bad("SCRUB_PERIOD", c.ScrubPeriod.String(), "must be at least "+scrub.MinPeriod.String())
	}
	if c.ScrubBandwidth < scrub.MinBandwidth {
		bad("SCRUB_BANDWIDTH", fmt.Sprint(c.ScrubBandwidth), fmt.Sprintf("must be at least %d bytes/s (4KiB)", scrub.MinBandwidth))
	}
	if c.ShutdownTimeout <= 0 {
		problems = append(problems, fmt.Errorf("shutdown timeout %s must be positive", c.ShutdownTimeout))
	}
	return errors.Join(problems...)
}

func validHost(h string) bool {
	return net.ParseIP(h) != nil || hostnamePattern.MatchString(h)
}
