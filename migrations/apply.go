package migrations

import (
	"errors"
	"io/fs"
	"log/slog"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/dfs-project/dfs/internal/errs"
)

// Apply brings the database behind db to the newest migration in dir of fsys
// and reports the versions before and after (0 is an empty database).
// dbName is the name db's driver is registered under ("pgx5", "sqlite").
//
// It refuses, with an errs.Conflict error and without touching the schema, a
// database that is dirty (a migration stopped partway) or whose version is
// newer than the newest migration this program carries: running on a schema
// it does not know could corrupt data written by a newer release.
//
// Apply closes db.
func Apply(fsys fs.FS, dir, dbName string, db database.Driver, logger *slog.Logger) (from, to uint, err error) {
	src, err := iofs.New(fsys, dir)
	if err != nil {
		_ = db.Close()
		return 0, 0, errs.Wrap(errs.Other, err, "read embedded migrations %s", dir)
	}
	newest, err := Newest(src)
	if err != nil {
		_ = src.Close()
		_ = db.Close()
		return 0, 0, err
	}
	m, err := migrate.NewWithInstance("iofs", src, dbName, db)
	if err != nil {
		_ = src.Close()
		_ = db.Close()
		return 0, 0, errs.Wrap(errs.Other, err, "prepare schema migration")
	}
	defer func() {
		srcErr, dbErr := m.Close()
		if err == nil {
			if cerr := errors.Join(srcErr, dbErr); cerr != nil {
				err = errs.Wrap(errs.Other, cerr, "close schema migration")
			}
		}
	}()

	current, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		current = 0
	case err != nil:
		return 0, 0, errs.Wrap(errs.Unavailable, err, "read the metadata schema version")
	}
	if dirty {
		return current, current, errs.E(errs.Conflict,
			"metadata schema is dirty at version %d: a migration stopped partway; repair the schema by hand, then clear the dirty flag in schema_migrations", current)
	}
	if current > newest {
		return current, current, errs.E(errs.Conflict,
			"metadata schema version %d is newer than this program knows (newest %d): run a dfs release that knows it", current, newest)
	}
	if current == newest {
		logger.Debug("metadata schema is current", "version", current)
		return current, current, nil
	}
	logger.Info("migrating metadata schema", "from", current, "to", newest)
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return current, current, errs.Wrap(errs.Other, err, "migrate metadata schema from version %d to %d", current, newest)
	}
	logger.Info("metadata schema migrated", "from", current, "to", newest)
	return current, newest, nil
}

// Newest returns the highest version src holds.
func Newest(src source.Driver) (uint, error) {
	v, err := src.First()
	if err != nil {
		return 0, errs.Wrap(errs.Other, err, "embedded migrations hold no version")
	}
	for {
		next, err := src.Next(v)
		if errors.Is(err, fs.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, errs.Wrap(errs.Other, err, "walk embedded migrations after version %d", v)
		}
		v = next
	}
}
