// Package postgres implements meta.Store on PostgreSQL through a pgx
// connection pool.
//
// Open applies the embedded schema (migrations/postgres) with golang-migrate
// and refuses a database whose schema is newer than the program or dirty.
// Every method is a single statement or one short transaction; optimistic
// locking compares the version column. Timestamps are written at microsecond
// precision in UTC by the program, except lease expiry, which uses the
// database's clock so coordinators with skewed clocks agree on who holds a
// lease.
package postgres

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
	"github.com/dfs-project/dfs/migrations"
)

// Limits applied when the database URL does not set its own.
const (
	// DefaultConnectTimeout bounds opening a connection: dialling and the
	// startup handshake (URL: connect_timeout, in seconds). Short, so a down
	// or hung database fails requests in seconds.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultMaxConns is the pool size (URL: pool_max_conns).
	DefaultMaxConns = 10
	// OperationTimeout bounds one store method whose context has no earlier
	// deadline, so a hung server cannot stall a caller forever.
	OperationTimeout = 30 * time.Second
)

// Store is the PostgreSQL metadata store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// acquireTimeout bounds the wait for a pooled connection, which includes
	// dialling a new one.
	acquireTimeout time.Duration
}

var _ meta.Store = (*Store)(nil)

// Open connects to databaseURL (a postgres:// URL or key=value string, with
// pgx's parameters), migrates the schema to the newest embedded version and
// returns the store. A database that cannot be reached is errs.Unavailable
// with code METADATA_UNAVAILABLE; a dirty or newer schema is errs.Conflict; a
// malformed URL is errs.Invalid.
func Open(ctx context.Context, databaseURL string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// pgconn redacts the password in parse errors.
		return nil, errs.Wrap(errs.Invalid, err, "metadata store: parse the PostgreSQL URL")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// pgconn bounds the whole connect (dial, TLS, startup) by this.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "metadata store: configure the PostgreSQL pool")
	}
	s := &Store{pool: pool, acquireTimeout: cfg.ConnConfig.ConnectTimeout + time.Second}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := s.migrate(logger); err != nil {
		pool.Close()
		return nil, err
	}
	logger.Info("metadata store open", "store", "postgres",
		"host", cfg.ConnConfig.Host, "database", cfg.ConnConfig.Database, "max_conns", cfg.MaxConns)
	return s, nil
}

func (s *Store) migrate(logger *slog.Logger) error {
	// golang-migrate speaks database/sql; lend it connections from the pool.
	// Closing this *sql.DB leaves the pool open.
	db := stdlib.OpenDBFromPool(s.pool)
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		_ = db.Close()
		return fail(context.Background(), err, "prepare schema migration")
	}
	_, _, err = migrations.Apply(migrations.Postgres, migrations.PostgresDir, "pgx5", drv, logger)
	return err
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.run(ctx, "ping", func(ctx context.Context, c *pgxpool.Conn) error {
		return c.Ping(ctx)
	})
}

// run calls fn with a pooled connection, within the store's time limits, and
// gives any error an errs kind.
func (s *Store) run(ctx context.Context, op string, fn func(context.Context, *pgxpool.Conn) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, OperationTimeout)
		defer cancel()
	}
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	c, err := s.pool.Acquire(actx)
	timedOut := ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		if timedOut {
			return rules.Unavailable(err, op+": no database connection within "+s.acquireTimeout.String())
		}
		return fail(ctx, err, op)
	}
	defer c.Release()
	return fail(ctx, fn(ctx, c), op)
}

// tx runs fn in a read-write transaction on a pooled connection.
func (s *Store) tx(ctx context.Context, op string, fn func(context.Context, pgx.Tx) error) error {
	return s.run(ctx, op, func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginTxFunc(ctx, c, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// snapshot runs fn in a read-only transaction that sees one snapshot, for
// reads made of more than one statement.
func (s *Store) snapshot(ctx context.Context, op string, fn func(context.Context, pgx.Tx) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return s.run(ctx, op, func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginTxFunc(ctx, c, opts, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// SQLSTATE codes and classes the store classifies.
const (
	sqlUniqueViolation      = "23505"
	sqlForeignKeyViolation  = "23503"
	sqlSerializationFailure = "40001"
	sqlDeadlockDetected     = "40P01"
	// A write reached a server that does not take writes now: a standby,
	// or a primary being demoted in a failover.
	sqlReadOnlyTransaction = "25006"
	sqlClassDataException  = "22" // a value the column cannot hold
	sqlClassIntegrity      = "23" // check, not-null and the constraints above
	sqlClassConnection     = "08" // connection exception
	sqlClassResources      = "53" // insufficient resources: too many connections, disk full
	sqlClassOperatorAction = "57" // shutdown, cannot connect now, statement cancelled
	sqlClassSystemError    = "58" // I/O error in the server
)

// fail gives err an errs kind. Errors the store built itself pass unchanged.
func fail(ctx context.Context, err error, op string) error {
	if err == nil {
		return nil
	}
	if own, ok := err.(*errs.Error); ok {
		return own
	}
	// A connection that could not be opened is an unreachable database
	// whatever the server said: still starting, a standby refused for
	// writes, a database a standby has not replayed yet, a full server.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return rules.Unavailable(err, op)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		class := pgErr.Code[:2]
		switch {
		case pgErr.Code == sqlUniqueViolation:
			return errs.Wrap(errs.Conflict, err, "metadata store: %s: duplicate key", op)
		case pgErr.Code == sqlForeignKeyViolation:
			return errs.Wrap(errs.Invalid, err, "metadata store: %s: refers to an unknown row", op)
		case class == sqlClassIntegrity, class == sqlClassDataException:
			return errs.Wrap(errs.Invalid, err, "metadata store: %s", op)
		case pgErr.Code == sqlSerializationFailure, pgErr.Code == sqlDeadlockDetected:
			return errs.Wrap(errs.Conflict, err, "metadata store: %s: concurrent update", op)
		case pgErr.Code == sqlReadOnlyTransaction,
			class == sqlClassConnection, class == sqlClassResources,
			class == sqlClassOperatorAction, class == sqlClassSystemError:
			return rules.Unavailable(err, op)
		}
		return errs.Wrap(errs.Other, err, "metadata store: %s", op)
	}
	if ctx.Err() != nil || unreachable(err) {
		return rules.Unavailable(err, op)
	}
	return errs.Wrap(errs.Other, err, "metadata store: %s", op)
}

// unreachable reports whether err says the server could not be reached or
// the connection broke, as opposed to a fault in a statement.
func unreachable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
