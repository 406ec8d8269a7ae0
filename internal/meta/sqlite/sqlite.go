// Package sqlite implements meta.Store on an embedded SQLite database (the
// pure-Go modernc.org/sqlite driver), for a coordinator that runs without
// PostgreSQL.
//
// The database is one file in WAL mode with synchronous=FULL, so a committed
// write survives a power cut before the coordinator acknowledges an upload.
// SQLite admits one writer at a time, and each COMMIT costs an fsync of the
// WAL. Writes therefore go through a committer: one goroutine that owns the
// only write connection, takes the write transactions queued at that moment
// (up to MaxBatch, never waiting for more), and runs them in one IMMEDIATE
// transaction (it takes the write lock at BEGIN, so it never fails upgrading
// a read lock), each inside a savepoint of its own, with one COMMIT for all.
// A write whose statements fail is rolled back to its savepoint and fails
// alone, with the error it would have had on its own; the others learn the
// COMMIT's result only after it has returned, so no write is acknowledged
// before it is on disk. Concurrent writers thus share fsyncs instead of
// queueing for one each, and a lone writer commits as soon as it arrives.
// Reads use a separate pool of read-only connections, which WAL lets run
// while the writer writes, and see only committed batches. busy_timeout (5s)
// covers the rare wait on another process holding the file, such as a backup.
//
// The writer checkpoints the WAL into the database file (SQLite's automatic
// checkpoint, run by the COMMIT that takes the WAL past it) once it holds
// Options.CheckpointPages pages, DefaultCheckpointPages unless configured:
// ten times SQLite's default of 1000. A checkpoint writes every page the
// WAL holds once, however many commits rewrote it, and syncs the database
// file; uploads rewrite the same index pages over and over, so fewer,
// larger checkpoints write and sync much less (BenchmarkParallelUpload, at
// 150,000 files: 124-130 against 144-149 µs of CPU per upload). The price
// is a WAL of up to about 40 MiB on disk, which SQLite reuses rather than
// shrinks, and a longer pause for the one batch whose COMMIT runs the
// checkpoint.
//
// The schema (migrations/sqlite) has the same tables, constraints, indexes and
// versions as the PostgreSQL one; timestamps are INTEGER microseconds since
// the Unix epoch, UTC.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"time"

	sqlitemigrate "github.com/golang-migrate/migrate/v4/database/sqlite"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
	"github.com/dfs-project/dfs/migrations"
)

// BusyTimeout is how long a statement waits for a lock held by another
// connection (in practice another process) before it fails.
const BusyTimeout = 5 * time.Second

// Store is the embedded metadata store. It is safe for concurrent use.
type Store struct {
	write *sql.DB // one connection; writes reach it only through the committer
	read  *sql.DB // read-only connections
	w     *committer
	ws    stmtSet // the write path's prepared statements
	rs    stmtSet // the read path's prepared statements, on the read pool
}

var _ meta.Store = (*Store)(nil)

// dsn builds the driver's connection string for path. Every connection gets
// the pragmas, since SQLite keeps most of them per connection.
func dsn(path string, readOnly bool, opts Options) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		// journal_mode is stored in the file; setting it on the writer is enough.
		q.Add("_pragma", "journal_mode(WAL)")
		// Each member of a batch runs in a savepoint, whose undo log (the
		// statement journal) is a temporary file by default: a page write
		// there per page a member touches. It never needs to outlive the
		// transaction, so it lives in memory.
		q.Add("_pragma", "temp_store(MEMORY)")
		// Only the writer commits, so only it checkpoints.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", opts.CheckpointPages))
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: path}).EscapedPath(), RawQuery: q.Encode()}
	return u.String()
}

// DefaultCheckpointPages is Options.CheckpointPages unless configured
// otherwise (SQLITE_CHECKPOINT_PAGES).
const DefaultCheckpointPages = 10000

// Bounds of Options.CheckpointPages. Below the minimum nearly every commit
// would checkpoint; above the maximum (about 4 GiB of WAL) the WAL would
// outgrow what a restart can read back quickly.
const (
	MinCheckpointPages = 100
	MaxCheckpointPages = 1_000_000
)

// Options tune an embedded store.
type Options struct {
	// CheckpointPages is how many pages the WAL holds before a commit
	// checkpoints it into the database file.
	CheckpointPages int
}

// DefaultOptions are the options of Open.
func DefaultOptions() Options { return Options{CheckpointPages: DefaultCheckpointPages} }

// Open opens (creating it if needed) the database file at path, whose
// directory must exist, and migrates it to the newest embedded schema. A
// dirty schema or one newer than the program is errs.Conflict; a file that
// cannot be opened is errs.Unavailable.
func Open(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	return OpenWith(ctx, path, logger, DefaultOptions())
}

// OpenWith is Open with opts. Options outside their bounds are errs.Invalid.
func OpenWith(ctx context.Context, path string, logger *slog.Logger, opts Options) (*Store, error) {
	if opts.CheckpointPages < MinCheckpointPages || opts.CheckpointPages > MaxCheckpointPages {
		return nil, errs.E(errs.Invalid, "metadata store: checkpoint after %d WAL pages: must be %d to %d",
			opts.CheckpointPages, MinCheckpointPages, MaxCheckpointPages)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := migrate(ctx, path, logger); err != nil {
		return nil, err
	}
	write, err := sql.Open("sqlite", dsn(path, false, opts))
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "metadata store: open %s", path)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxIdleTime(0)
	readers := max(4, runtime.GOMAXPROCS(0))
	read, err := sql.Open("sqlite", dsn(path, true, opts))
	if err != nil {
		_ = write.Close()
		return nil, errs.Wrap(errs.Invalid, err, "metadata store: open %s", path)
	}
	read.SetMaxOpenConns(readers)
	read.SetMaxIdleConns(readers)
	ws, err := prepareSet(ctx, write, writeQueries)
	if err != nil {
		return nil, errors.Join(fail(ctx, err, "prepare statements"), write.Close(), read.Close())
	}
	rs, err := prepareSet(ctx, read, readQueries)
	if err != nil {
		return nil, errors.Join(fail(ctx, err, "prepare statements"), ws.close(), write.Close(), read.Close())
	}
	s := &Store{write: write, read: read, ws: ws, rs: rs, w: newCommitter(write, ws)}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	logger.Info("metadata store open", "store", "sqlite", "path", path, "readers", readers, "checkpoint_pages", opts.CheckpointPages)
	return s, nil
}

// migrate applies the schema through a connection of its own, which
// golang-migrate closes when done.
func migrate(ctx context.Context, path string, logger *slog.Logger) error {
	db, err := sql.Open("sqlite", dsn(path, false, DefaultOptions()))
	if err != nil {
		return errs.Wrap(errs.Invalid, err, "metadata store: open %s", path)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return fail(ctx, err, "open "+path)
	}
	drv, err := sqlitemigrate.WithInstance(db, &sqlitemigrate.Config{})
	if err != nil {
		_ = db.Close()
		return fail(ctx, err, "prepare schema migration")
	}
	_, _, err = migrations.Apply(migrations.SQLite, migrations.SQLiteDir, "sqlite", drv, logger)
	return err
}

// Close stops the committer, which finishes the batch under way (queued
// writes that have not started fail), then closes the prepared statements
// and both pools. It may be called more than once.
func (s *Store) Close() error {
	s.w.close()
	return errors.Join(s.ws.close(), s.rs.close(), s.write.Close(), s.read.Close())
}

// writeTx runs fn as one all-or-nothing write transaction through the
// committer; see committer.writeTx.
func (s *Store) writeTx(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	return s.w.writeTx(ctx, op, fn)
}

// Ping reports whether the database answers, on both pools.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fail(ctx, err, "ping")
	}
	var one int
	if err := s.read.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fail(ctx, err, "ping")
	}
	return nil
}

// readTx runs fn in a read transaction, one snapshot for several statements.
func (s *Store) readTx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(ctx, err, op)
	}
	defer func() { _ = tx.Rollback() }()
	return fail(ctx, fn(tx), op)
}

// fail gives err an errs kind. Errors the store built itself pass unchanged.
func fail(ctx context.Context, err error, op string) error {
	if err == nil {
		return nil
	}
	if own, ok := err.(*errs.Error); ok {
		return own
	}
	var sqlErr *sqlite.Error
	if errors.As(err, &sqlErr) {
		switch code := sqlErr.Code(); {
		case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE, code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return errs.Wrap(errs.Conflict, err, "metadata store: %s: duplicate key", op)
		case code == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return errs.Wrap(errs.Invalid, err, "metadata store: %s: refers to an unknown row", op)
		case code&0xff == sqlite3.SQLITE_CONSTRAINT, code&0xff == sqlite3.SQLITE_MISMATCH, code&0xff == sqlite3.SQLITE_RANGE:
			return errs.Wrap(errs.Invalid, err, "metadata store: %s", op)
		case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED, code&0xff == sqlite3.SQLITE_IOERR,
			code&0xff == sqlite3.SQLITE_CANTOPEN, code&0xff == sqlite3.SQLITE_FULL, code&0xff == sqlite3.SQLITE_READONLY,
			code&0xff == sqlite3.SQLITE_CORRUPT, code&0xff == sqlite3.SQLITE_NOTADB, code&0xff == sqlite3.SQLITE_PROTOCOL,
			code&0xff == sqlite3.SQLITE_INTERRUPT, code&0xff == sqlite3.SQLITE_NOLFS, code&0xff == sqlite3.SQLITE_PERM:
			return rules.Unavailable(err, op)
		}
		return errs.Wrap(errs.Other, err, "metadata store: %s", op)
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return rules.Unavailable(err, op)
	}
	return errs.Wrap(errs.Other, err, "metadata store: %s", op)
}

// micros is t as stored: microseconds since the Unix epoch.
func micros(t time.Time) int64 { return t.UnixMicro() }

// microsPtr is micros for an optional time.
func microsPtr(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

// fromMicros is a stored time read back, in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func fromMicrosPtr(us sql.NullInt64) *time.Time {
	if !us.Valid {
		return nil
	}
	t := fromMicros(us.Int64)
	return &t
}
