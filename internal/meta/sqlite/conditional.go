package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/meta/metastore/rules"
)

// DeleteObjectIf removes the key if what it holds meets p. The look and the
// delete are one write transaction, and the committer runs one at a time,
// so no write of the key comes between them.
func (s *Store) DeleteObjectIf(ctx context.Context, bucket, key string, p meta.Precondition) (meta.Object, error) {
	var o meta.Object
	err := s.writeTx(ctx, "delete object "+bucket+"/"+key+" if it meets its precondition", func(ctx context.Context, tx *sql.Tx) error {
		var etag string
		err := tx.QueryRowContext(ctx, `SELECT etag FROM objects WHERE bucket = ? AND object_key = ?`, bucket, []byte(key)).Scan(&etag)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := p.Check(bucket, key, err == nil, etag); err != nil {
			return err
		}
		o, err = scanObject(tx.QueryRowContext(ctx, `DELETE FROM objects WHERE bucket = ? AND object_key = ?
			RETURNING `+objectColumns, bucket, []byte(key)))
		if errors.Is(err, sql.ErrNoRows) {
			return rules.ObjectNotFound(bucket, key)
		}
		return err
	})
	return o, err
}
