// Package metastore opens the coordinator's metadata store: PostgreSQL when a
// database URL is configured, the embedded SQLite store otherwise. It lives
// apart from package meta because it imports both implementations, which
// import meta.
package metastore

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/postgres"
	"github.com/dfs-project/dfs/internal/meta/sqlite"
)

// FileName is the embedded store's database file inside the data directory.
const FileName = "metadata.db"

// Open returns the metadata store with its schema migrated to the newest
// version this program carries. A non-empty databaseURL (DATABASE_URL) selects
// PostgreSQL; otherwise the embedded store lives at <dataDir>/metadata.db
// (DATA_DIRECTORY), opened with opts, and dataDir is created if missing.
//
// Errors: errs.Unavailable (code METADATA_UNAVAILABLE) when the database cannot
// be reached or the file cannot be opened; errs.Conflict when its schema is
// dirty or newer than this program; errs.Invalid for a malformed URL or an
// empty dataDir without a URL.
func Open(ctx context.Context, databaseURL, dataDir string, opts sqlite.Options, logger *slog.Logger) (meta.Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if databaseURL != "" {
		return postgres.Open(ctx, databaseURL, logger)
	}
	if dataDir == "" {
		return nil, errs.E(errs.Invalid, "metadata store: no DATABASE_URL and no data directory for the embedded store")
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "metadata store: create data directory %s", dataDir)
	}
	return sqlite.OpenWith(ctx, filepath.Join(dataDir, FileName), logger, opts)
}
