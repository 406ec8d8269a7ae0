package sqlite

import (
	"context"
	"database/sql"
	"errors"
)

// Savepoint statements of the committer (commit.go), prepared like the rest.
const (
	sqlSavepoint  = `SAVEPOINT ` + savepoint
	sqlRelease    = `RELEASE ` + savepoint
	sqlRollbackTo = `ROLLBACK TO ` + savepoint
)

// stmtSet holds statements prepared once, when the store opens: parsing a
// statement costs SQLite more than running it, and an upload runs a dozen.
// The write set lives on the write pool's one connection, and a transaction
// reuses it through Tx.StmtContext, which finds the statement already
// prepared there; the read set lives on the read pool, where database/sql
// prepares it again on each connection as it first uses it.
//
// Never prepared lazily: preparing needs the write pool's only connection,
// which the committer holds for the whole of a batch, so a prepare from
// inside a transaction would wait for itself.
type stmtSet map[string]*sql.Stmt

func prepareSet(ctx context.Context, db *sql.DB, queries []string) (stmtSet, error) {
	set := stmtSet{}
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return nil, errors.Join(err, set.close())
		}
		set[q] = st
	}
	return set, nil
}

// close closes every statement. The map itself is left alone: a read that
// races with Close (a background task finishing late) then gets the closed
// statement's error instead of racing on the map, and closing twice is
// harmless because a closed statement's Close does nothing.
func (ss stmtSet) close() error {
	var errList []error
	for _, st := range ss {
		errList = append(errList, st.Close())
	}
	return errors.Join(errList...)
}

// exec, queryRow and query run q in tx, prepared when q is in the set.
func (ss stmtSet) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st := ss[q]; st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, q, args...)
}

func (ss stmtSet) queryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	if st := ss[q]; st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, q, args...)
}

func (ss stmtSet) query(ctx context.Context, tx *sql.Tx, q string, args ...any) (*sql.Rows, error) {
	if st := ss[q]; st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, q, args...)
}

// queryPool and queryRowPool run q on db, the pool the set was prepared on.
func (ss stmtSet) queryPool(ctx context.Context, db *sql.DB, q string, args ...any) (*sql.Rows, error) {
	if st := ss[q]; st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.QueryContext(ctx, q, args...)
}

func (ss stmtSet) queryRowPool(ctx context.Context, db *sql.DB, q string, args ...any) *sql.Row {
	if st := ss[q]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.QueryRowContext(ctx, q, args...)
}
