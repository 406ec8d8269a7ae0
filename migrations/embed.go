// Package migrations embeds the versioned SQL schema of dfs's metadata store,
// one directory per database dialect, so the binaries carry their schema and
// apply it at start with golang-migrate.
//
// Each version is an up/down pair named NNNNNN_title.up.sql and
// NNNNNN_title.down.sql. Both dialects have the same versions with the same
// meaning: a version number names one schema, whichever database holds it.
// Published migrations are never edited; a change is a new version.
package migrations

import "embed"

// Postgres holds the PostgreSQL migrations under the directory PostgresDir.
//
//go:embed postgres/*.sql
var Postgres embed.FS

// SQLite holds the embedded-store (SQLite) migrations under the directory SQLiteDir.
//
//go:embed sqlite/*.sql
var SQLite embed.FS

// The directories inside Postgres and SQLite that hold the migration files.
const (
	PostgresDir = "postgres"
	SQLiteDir   = "sqlite"
)
