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

// stmtSet holds statements prepared once on the write pool's one connection.
// Parsing a statement costs SQLite more than running it, and an upload runs
// a dozen; a transaction reuses them through Tx.StmtContext, which finds the
// statement already prepared on its connection.
//
// They are prepared when the store opens, never lazily: preparing needs the
// pool's only connection, which the committer holds for the whole of a
// batch, so a prepare from inside a transaction would wait for itself.
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

func (ss stmtSet) close() error {
	var errList []error
	for q, st := range ss {
		errList = append(errList, st.Close())
		delete(ss, q)
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
